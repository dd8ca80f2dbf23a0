import { crc32c } from '@node-rs/crc32';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  batchBodyRange,
  parseFooter,
  parseWalObject,
  readHeader,
  readTrailer,
  WAL_HEADER_SIZE,
  WAL_MAGIC,
  WAL_TRAILER_SIZE,
  type WalAppendEntry,
  WalFormatError,
  WalObjectBuilder,
  ZERO_TOPIC_ID,
} from '../../src/wal/index.js';
import { batchArb, makeBatch, topicArb } from './batches.js';

/** Many batches over a few topics and partitions, as one produce burst gives. */
const objectArb = fc
  .record({
    topics: fc.array(topicArb, { minLength: 1, maxLength: 4 }),
    writerBrokerId: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
    createdAtMs: fc.integer({ min: 0, max: 2 ** 48 }),
    batches: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 63 }), batchArb), {
      minLength: 1,
      maxLength: 25,
    }),
  })
  .map(({ topics, writerBrokerId, createdAtMs, batches }) => ({
    writerBrokerId,
    createdAtMs,
    entries: batches.map(
      ([t, partition, batch]): WalAppendEntry => ({ ...topics[t % topics.length]!, partition, batch }),
    ),
  }));

function build(
  entries: WalAppendEntry[],
  options = { writerBrokerId: 1, createdAtMs: 1_767_225_600_000 },
): Buffer {
  const b = new WalObjectBuilder(options);
  for (const entry of entries) b.append(entry);
  return Buffer.concat(b.seal());
}

function sample(): Buffer {
  return build([
    { topicName: 'orders', partition: 0, batch: makeBatch({ records: Buffer.alloc(300, 1) }) },
    {
      topicId: '0123456789abcdef0123456789abcdef',
      partition: 3,
      batch: makeBatch({ records: Buffer.alloc(200, 2) }),
    },
    { topicName: 'orders', partition: 1, batch: makeBatch({ records: Buffer.alloc(100, 3) }) },
  ]);
}

/** Rewrites the footer through `edit`, then fixes the trailer's CRC so only the index is wrong. */
function withEditedFooter(object: Buffer, edit: (footer: Buffer) => void): Buffer {
  const copy = Buffer.from(object);
  const trailer = readTrailer(copy);
  const footer = copy.subarray(trailer.footerPosition, trailer.footerPosition + trailer.footerLength);
  edit(footer);
  copy.writeUInt32BE(crc32c(footer), copy.length - WAL_TRAILER_SIZE + 8);
  return copy;
}

function expectWalError(fn: () => unknown, code: string, message: string | RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(WalFormatError);
  expect(thrown).toMatchObject({ code });
  expect((thrown as Error).message).toMatch(message);
}

describe('parseWalObject', () => {
  it('gives back every batch, byte for byte, with its index entry', () => {
    fc.assert(
      fc.property(objectArb, ({ writerBrokerId, createdAtMs, entries }) => {
        // Given any batches of any topics, When built, sealed, concatenated and parsed
        const object = build(entries, { writerBrokerId, createdAtMs });
        const parsed = parseWalObject(object);

        // Then the header, and each entry and its bytes, are what went in
        expect(parsed.header).toEqual({ formatVersion: 1, writerBrokerId, createdAtMs });
        expect(parsed.entries).toHaveLength(entries.length);
        parsed.entries.forEach((e, i) => {
          const input = entries[i]!;
          const batch = object.subarray(e.position, e.position + e.length);
          expect(batch.equals(input.batch)).toBe(true);
          expect(e.topicId).toBe(input.topicId ?? ZERO_TOPIC_ID);
          expect(e.topicName).toBe(input.topicName ?? '');
          expect(e.partition).toBe(input.partition);
          expect(e.crc).toBe(input.batch.readUInt32BE(17));
          expect(e.producerId).toBe(input.batch.readBigInt64BE(43));
          expect(e.producerEpoch).toBe(input.batch.readInt16BE(51));
          expect(e.baseSequence).toBe(input.batch.readInt32BE(53));
          expect(e.recordCount).toBe(input.batch.readInt32BE(57));
          expect(e.lastOffsetDelta).toBe(input.batch.readInt32BE(23));
        });
      }),
      { numRuns: 200 },
    );
  });

  it('finds the same index from range reads of the tail and the footer alone', () => {
    fc.assert(
      fc.property(objectArb, fc.integer({ min: WAL_TRAILER_SIZE, max: 4096 }), ({ entries }, tailBytes) => {
        // Given an object, When a tool reads a suffix, then the footer range the trailer names
        const object = build(entries);
        const trailer = readTrailer(object.subarray(-tailBytes), object.length);
        const footer = object.subarray(trailer.footerPosition, trailer.footerPosition + trailer.footerLength);

        // Then the footer parses to the whole-object parse's index
        expect(parseFooter(footer, trailer)).toEqual(parseWalObject(object).entries);
      }),
      { numRuns: 100 },
    );
  });

  it("reads a batch's records with one range that needs no footer", () => {
    fc.assert(
      fc.property(objectArb, ({ entries }) => {
        // Given an object and the positions append returned
        const b = new WalObjectBuilder({ writerBrokerId: 1, createdAtMs: 0 });
        const placed = entries.map((entry) => b.append(entry));
        const object = Buffer.concat(b.seal());

        // When each batch's body range is read, Then it is the batch's bytes after its 61-byte header
        placed.forEach((where, i) => {
          const { offset, length } = batchBodyRange(where);
          expect(object.subarray(offset, offset + length).equals(entries[i]!.batch.subarray(61))).toBe(true);
        });
      }),
      { numRuns: 100 },
    );
  });

  it('rejects the object when any byte it vouches for changes', () => {
    fc.assert(
      fc.property(objectArb, fc.nat(), fc.integer({ min: 1, max: 255 }), ({ entries }, at, flip) => {
        // Given an object and one byte outside the batch fields no checksum covers (BaseOffset,
        // PartitionLeaderEpoch and the batch's own CRC field: the leader rewrites the first two)
        const object = build(entries);
        const { entries: index } = parseWalObject(object);
        const uncovered = (i: number) =>
          index.some((e) => {
            const r = i - e.position;
            return (r >= 0 && r < 8) || (r >= 12 && r < 16) || (r >= 17 && r < 21);
          });
        const i = at % object.length;
        fc.pre(!uncovered(i));

        // When it is flipped, Then parsing fails with a WAL format error
        const corrupt = Buffer.from(object);
        corrupt[i]! ^= flip;
        expect(() => parseWalObject(corrupt)).toThrow(WalFormatError);
      }),
      { numRuns: 500 },
    );
  });

  it('rejects the object cut at any length', () => {
    fc.assert(
      fc.property(objectArb, fc.nat(), ({ entries }, cut) => {
        // Given an object, When any proper prefix is parsed, Then it fails as a WAL format error
        const object = build(entries);
        expect(() => parseWalObject(object.subarray(0, cut % object.length))).toThrow(WalFormatError);
      }),
      { numRuns: 300 },
    );
  });

  it('names a truncated object', () => {
    // Given an upload cut short, When parsed, Then the error says truncated
    const object = sample();
    expectWalError(
      () => parseWalObject(object.subarray(0, object.length - 5)),
      'WALPROXY_ERR_WAL_TRUNCATED',
      /truncated/,
    );
    expectWalError(
      () => parseWalObject(object.subarray(0, 10)),
      'WALPROXY_ERR_WAL_TRUNCATED',
      /needs 28 bytes/,
    );
  });

  it('names bytes that are not a WAL object', () => {
    // Given some other file, When parsed, Then the error says it is not a WAL object
    expectWalError(
      () => parseWalObject(Buffer.from('PAR1 this is a parquet file, not a WAL object, PAR1')),
      'WALPROXY_ERR_WAL_BAD_MAGIC',
      /not a WAL object/,
    );
  });

  it('names a corrupt footer', () => {
    // Given one flipped byte in the footer, When parsed, Then the footer CRC mismatch is named
    const object = sample();
    const { footerPosition } = readTrailer(object);
    object[footerPosition + 10]! ^= 0x40;
    expectWalError(() => parseWalObject(object), 'WALPROXY_ERR_WAL_FOOTER_CRC_MISMATCH', /footer is corrupt/);
  });

  it('names a corrupt header and an unknown version', () => {
    // Given a changed broker id, When parsed, Then the header CRC mismatch is named
    const changed = sample();
    changed.writeInt32BE(99, 12);
    expectWalError(() => parseWalObject(changed), 'WALPROXY_ERR_WAL_HEADER_CRC_MISMATCH', /header CRC-32C/);

    // Given a version from the future, When parsed, Then the version is named
    const future = sample();
    future.writeUInt16BE(2, 8);
    expectWalError(() => parseWalObject(future), 'WALPROXY_ERR_WAL_UNSUPPORTED_VERSION', /version 2/);
  });

  it('names an index entry that runs past the end of the body', () => {
    // Given an index whose last entry claims 1,000 more bytes (with a footer CRC to match)
    const object = withEditedFooter(sample(), (footer) => {
      const last = footer.length - 42;
      footer.writeUInt32BE(footer.readUInt32BE(last + 12) + 1000, last + 12);
    });

    // When parsed, Then that entry is named, with its topic and partition
    expectWalError(
      () => parseWalObject(object),
      'WALPROXY_ERR_WAL_BAD_INDEX',
      /index entry 2 \(orders-1.*past the end/,
    );
  });

  it('names an index with a gap, a bad topic reference or a wrong count', () => {
    const sampleObject = sample();
    // Given a gap between two batches
    const gap = withEditedFooter(sampleObject, (footer) => {
      const second = footer.length - 2 * 42;
      footer.writeUInt32BE(footer.readUInt32BE(second + 8) + 1, second + 8);
    });
    expectWalError(() => parseWalObject(gap), 'WALPROXY_ERR_WAL_BAD_INDEX', /should start at/);

    // Given a topic index beyond the topic table
    const topic = withEditedFooter(sampleObject, (footer) => footer.writeUInt32BE(7, footer.length - 42));
    expectWalError(
      () => parseWalObject(topic),
      'WALPROXY_ERR_WAL_BAD_INDEX',
      /names topic 7, the footer lists 2/,
    );

    // Given an entry count that does not match the footer's size
    const count = withEditedFooter(sampleObject, (footer) =>
      footer.writeUInt32BE(4, footer.length - 3 * 42 - 4),
    );
    expectWalError(
      () => parseWalObject(count),
      'WALPROXY_ERR_WAL_BAD_INDEX',
      /room for 3 index entries, it declares 4/,
    );
  });

  it('names a batch whose bytes changed, and can skip that check', () => {
    // Given a flipped byte inside the second batch's records
    const object = sample();
    const { entries } = parseWalObject(object);
    object[entries[1]!.position + 100]! ^= 1;

    // When parsed, Then the batch CRC mismatch is named; without batch checks the index still parses
    expectWalError(
      () => parseWalObject(object),
      'WALPROXY_ERR_WAL_BATCH_CRC_MISMATCH',
      /batch 1 \(0123456789abcdef/,
    );
    expect(parseWalObject(object, { verifyBatches: false }).entries).toHaveLength(3);
  });

  it('names a batch whose Length field disagrees with the index', () => {
    // Given a changed Length field in the first batch (outside the batch CRC)
    const object = sample();
    object.writeInt32BE(object.readInt32BE(WAL_HEADER_SIZE + 8) + 1, WAL_HEADER_SIZE + 8);

    // When parsed, Then the disagreement is named
    expectWalError(
      () => parseWalObject(object),
      'WALPROXY_ERR_WAL_BAD_INDEX',
      /batch 0 \(orders-0\) has magic 2 and/,
    );
  });
});

describe('readHeader', () => {
  it('reads the writer and time from the first 28 bytes alone', () => {
    const object = build([{ topicName: 't', partition: 0, batch: makeBatch() }], {
      writerBrokerId: 7,
      createdAtMs: 1_767_225_600_999,
    });
    expect(readHeader(object.subarray(0, WAL_HEADER_SIZE))).toEqual({
      formatVersion: 1,
      writerBrokerId: 7,
      createdAtMs: 1_767_225_600_999,
    });
  });
});

describe('readTrailer', () => {
  it('locates the footer from the last bytes and checks it against the object size', () => {
    // Given an object's tail
    const object = sample();
    const tail = object.subarray(-100);

    // When read with the true size, Then it points at the footer; with another size it fails
    const trailer = readTrailer(tail, object.length);
    expect(trailer.footerPosition + trailer.footerLength + WAL_TRAILER_SIZE).toBe(object.length);
    expectWalError(() => readTrailer(tail, object.length + 1), 'WALPROXY_ERR_WAL_BAD_INDEX', /it has/);
    expectWalError(() => readTrailer(tail, object.length - 1), 'WALPROXY_ERR_WAL_TRUNCATED', /it has/);
  });

  it('names a tail too short, without the magic, or pointing nowhere', () => {
    const object = sample();
    expectWalError(() => readTrailer(object.subarray(-10)), 'WALPROXY_ERR_WAL_TRUNCATED', /last 22 bytes/);
    expectWalError(
      () => readTrailer(object.subarray(0, -1)),
      'WALPROXY_ERR_WAL_BAD_MAGIC',
      /does not end with/,
    );
    const nowhere = Buffer.from(object.subarray(-WAL_TRAILER_SIZE));
    nowhere.writeUInt32BE(3, 0);
    expectWalError(() => readTrailer(nowhere), 'WALPROXY_ERR_WAL_BAD_INDEX', /footer at 3/);
    expect(nowhere.subarray(-8).equals(WAL_MAGIC)).toBe(true);
  });
});

describe('parseFooter', () => {
  it('refuses a footer of another length than the trailer says', () => {
    const object = sample();
    const trailer = readTrailer(object);
    const footer = object.subarray(trailer.footerPosition, trailer.footerPosition + trailer.footerLength - 1);
    expectWalError(() => parseFooter(footer, trailer), 'WALPROXY_ERR_WAL_TRUNCATED', /were given/);
  });

  it('names a topic name that is not UTF-8', () => {
    // Given a topic name byte changed to an invalid UTF-8 lead byte (footer CRC fixed up)
    const object = withEditedFooter(sample(), (footer) => {
      footer[4 + 18] = 0xff;
    });
    expectWalError(() => parseWalObject(object), 'WALPROXY_ERR_WAL_BAD_INDEX', /not valid UTF-8/);
  });
});
