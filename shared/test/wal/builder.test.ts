import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  parseWalObject,
  WAL_HEADER_SIZE,
  WAL_INDEX_ENTRY_SIZE,
  WAL_TRAILER_SIZE,
  WalFormatError,
  WalObjectBuilder,
} from '../../src/wal/index.js';
import { appendEntryArb, makeBatch } from './batches.js';

const TOPIC_ID = '0123456789abcdef0123456789abcdef';

function builder(): WalObjectBuilder {
  return new WalObjectBuilder({ writerBrokerId: 3, createdAtMs: 1_767_225_600_123 });
}

describe('WalObjectBuilder', () => {
  it('places batches back to back after the header and seals them without copying', () => {
    // Given two batches of two partitions
    const b = builder();
    const first = makeBatch({ records: Buffer.alloc(100, 1) });
    const second = makeBatch({ records: Buffer.alloc(50, 2) });

    // When appended and sealed
    const r1 = b.append({ topicName: 'orders', partition: 0, batch: first });
    const r2 = b.append({ topicName: 'orders', partition: 1, batch: second });
    const parts = b.seal();

    // Then positions tile the body, and the parts are the header, the very same Buffers, the footer
    expect(r1).toEqual({ position: WAL_HEADER_SIZE, length: first.length });
    expect(r2).toEqual({ position: WAL_HEADER_SIZE + first.length, length: second.length });
    expect(parts).toHaveLength(4);
    expect(parts[0]).toHaveLength(WAL_HEADER_SIZE);
    expect(parts[1]).toBe(first);
    expect(parts[2]).toBe(second);
    expect(b.batchCount).toBe(2);
  });

  it('reports as size exactly the bytes seal returns, at every step', () => {
    fc.assert(
      fc.property(fc.array(appendEntryArb, { minLength: 1, maxLength: 30 }), (entries) => {
        // Given any batches, When appended one by one, Then size grows to the sealed length
        const b = builder();
        let before = b.size;
        for (const { topic, partition, batch } of entries) {
          b.append({ ...topic, partition, batch });
          expect(b.size).toBeGreaterThanOrEqual(before + batch.length + WAL_INDEX_ENTRY_SIZE);
          before = b.size;
        }
        const sealed = b.seal();
        expect(sealed.reduce((n, part) => n + part.length, 0)).toBe(b.size);
      }),
    );
  });

  it('stores each topic once in the footer however many batches it has', () => {
    // Given the same topic for ten batches, and ten topics for ten batches
    const batch = makeBatch();
    const one = builder();
    const many = builder();
    for (let p = 0; p < 10; p++) {
      one.append({ topicId: TOPIC_ID, topicName: 'clicks', partition: p, batch });
      many.append({ topicName: `clicks-${p}`, partition: 0, batch });
    }

    // Then the footers differ by the topic rows: ten against one
    expect(many.size - one.size).toBe(10 * (16 + 2 + 'clicks-0'.length) - (16 + 2 + 'clicks'.length));
  });

  it('records in the index the CRC the untouched batch carries in its own header', () => {
    // Given a producer's batch, When sealed and parsed back
    const batch = makeBatch({
      producerId: 42n,
      producerEpoch: 1,
      baseSequence: 7,
      recordCount: 3,
      lastOffsetDelta: 2,
    });
    const b = builder();
    b.append({ topicName: 't', partition: 5, batch });
    const { entries } = parseWalObject(Buffer.concat(b.seal()));

    // Then its CRC equals header bytes 17..21 and the producer fields are copied
    expect(entries[0]).toMatchObject({
      crc: batch.readUInt32BE(17),
      producerId: 42n,
      producerEpoch: 1,
      baseSequence: 7,
      recordCount: 3,
      lastOffsetDelta: 2,
    });
  });

  it.each([
    ['shorter than a batch header', Buffer.alloc(60), 'at least 61 bytes'],
    ['not magic v2', Object.assign(makeBatch(), { 16: 1 }), 'magic is 1'],
    ['two batches in one buffer', Buffer.concat([makeBatch(), makeBatch()]), 'pass exactly one batch'],
    ['a batch cut short', makeBatch({ records: Buffer.alloc(10) }).subarray(0, 65), 'pass exactly one batch'],
  ])('refuses a batch buffer that is %s', (_, batch, why) => {
    // Given bytes that are not exactly one magic v2 batch, When appended, Then it fails saying why
    const b = builder();
    expect(() => b.append({ topicName: 't', partition: 0, batch })).toThrow(why);
    expect(() => b.append({ topicName: 't', partition: 0, batch })).toThrow(
      expect.objectContaining({ code: 'WALPROXY_ERR_WAL_INVALID_BATCH' }),
    );
    expect(b.batchCount).toBe(0);
  });

  it.each([
    [{ partition: 0 }, 'needs a topic id or a topic name'],
    [{ topicId: '0'.repeat(32), topicName: '', partition: 0 }, 'needs a topic id or a topic name'],
    [{ topicId: 'ABCDEF0123456789abcdef0123456789', partition: 0 }, 'not 32 lowercase hex digits'],
    [{ topicId: '1234', partition: 0 }, 'not 32 lowercase hex digits'],
    [{ topicName: 't', partition: -1 }, 'partition -1'],
    [{ topicName: 't', partition: 2 ** 31 }, 'partition 2147483648'],
  ])('refuses the entry %j', (entry, why) => {
    // Given an entry no reader could decode, When appended, Then it fails as an invalid entry
    expect(() => builder().append({ ...entry, batch: makeBatch() })).toThrow(why);
    expect(() => builder().append({ ...entry, batch: makeBatch() })).toThrow(
      expect.objectContaining({ code: 'WALPROXY_ERR_WAL_INVALID_ENTRY' }),
    );
  });

  it('refuses header fields that do not fit the format', () => {
    expect(() => new WalObjectBuilder({ writerBrokerId: 2 ** 31, createdAtMs: 0 })).toThrow(WalFormatError);
    expect(() => new WalObjectBuilder({ writerBrokerId: 1, createdAtMs: -1 })).toThrow(WalFormatError);
    expect(() => new WalObjectBuilder({ writerBrokerId: 1, createdAtMs: 1.5 })).toThrow(WalFormatError);
  });

  it('never seals an empty object, and accepts nothing after sealing', () => {
    // Given an empty builder, When sealed, Then it refuses
    const empty = builder();
    expect(() => empty.seal()).toThrow(expect.objectContaining({ code: 'WALPROXY_ERR_WAL_EMPTY_OBJECT' }));

    // Given a sealed builder, When appended to or sealed again, Then both refuse
    const b = builder();
    b.append({ topicName: 't', partition: 0, batch: makeBatch() });
    b.seal();
    expect(() => b.append({ topicName: 't', partition: 0, batch: makeBatch() })).toThrow(
      expect.objectContaining({ code: 'WALPROXY_ERR_WAL_BUILDER_SEALED' }),
    );
    expect(() => b.seal()).toThrow(expect.objectContaining({ code: 'WALPROXY_ERR_WAL_BUILDER_SEALED' }));
  });

  it('refuses a batch that would take the object past 4 GiB, the reach of its 32-bit positions', () => {
    // Given an object already holding two 1.5 GiB batches (a batch's Length is an int32), in
    // never-touched memory that takes no real RAM
    const huge = Buffer.allocUnsafeSlow(1.5 * 2 ** 30);
    makeBatch().copy(huge, 0, 0, 61);
    huge.writeInt32BE(huge.length - 12, 8);
    const b = builder();
    b.append({ topicName: 't', partition: 0, batch: huge });
    b.append({ topicName: 't', partition: 1, batch: huge });

    // When a third one is appended, Then it fails as too large and the object is unchanged
    const sizeBefore = b.size;
    expect(() => b.append({ topicName: 't', partition: 2, batch: huge })).toThrow(
      expect.objectContaining({ code: 'WALPROXY_ERR_WAL_OBJECT_TOO_LARGE' }),
    );
    expect(b.size).toBe(sizeBefore);
    expect(b.batchCount).toBe(2);
    expect(sizeBefore).toBe(
      WAL_HEADER_SIZE + 2 * huge.length + 8 + 19 + 2 * WAL_INDEX_ENTRY_SIZE + WAL_TRAILER_SIZE,
    );
  });
});
