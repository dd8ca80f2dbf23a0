import { crc32c } from './checksum.js';
import { WalFormatError } from './errors.js';
import {
  BATCH_CRC_START,
  BATCH_HEADER_SIZE,
  BATCH_LENGTH,
  BATCH_LOG_OVERHEAD,
  BATCH_MAGIC,
  BATCH_MAGIC_V2,
  ENTRY_BASE_SEQUENCE,
  ENTRY_CRC,
  ENTRY_LAST_OFFSET_DELTA,
  ENTRY_LENGTH,
  ENTRY_PARTITION,
  ENTRY_POSITION,
  ENTRY_PRODUCER_EPOCH,
  ENTRY_PRODUCER_ID,
  ENTRY_RECORD_COUNT,
  ENTRY_TOPIC_INDEX,
  HEADER_BROKER_ID,
  HEADER_CRC,
  HEADER_CREATED_AT,
  HEADER_LENGTH,
  HEADER_VERSION,
  TRAILER_FOOTER_CRC,
  TRAILER_FOOTER_LENGTH,
  TRAILER_FOOTER_POSITION,
  TRAILER_MAGIC,
  TRAILER_VERSION,
  WAL_EMPTY_FOOTER_SIZE,
  WAL_FORMAT_VERSION,
  WAL_HEADER_SIZE,
  WAL_INDEX_ENTRY_SIZE,
  WAL_MAGIC,
  WAL_TOPIC_FIXED_SIZE,
  WAL_TRAILER_SIZE,
  type WalHeader,
  type WalIndexEntry,
  type WalObject,
  type WalTrailer,
} from './format.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes and checks the header from the first WAL_HEADER_SIZE bytes of an object. */
export function readHeader(head: Buffer): WalHeader {
  if (head.length < WAL_HEADER_SIZE) {
    throw new WalFormatError(
      'TRUNCATED',
      `WAL header needs ${WAL_HEADER_SIZE} bytes, got ${head.length}`,
      head.length,
    );
  }
  if (!head.subarray(0, WAL_MAGIC.length).equals(WAL_MAGIC)) {
    throw new WalFormatError('BAD_MAGIC', `not a WAL object: it does not start with "${WAL_MAGIC}"`, 0);
  }
  const formatVersion = head.readUInt16BE(HEADER_VERSION);
  checkVersion(formatVersion, 'header', HEADER_VERSION);
  const headerLength = head.readUInt16BE(HEADER_LENGTH);
  if (headerLength !== WAL_HEADER_SIZE) {
    throw new WalFormatError(
      'BAD_INDEX',
      `WAL v1 header length is ${WAL_HEADER_SIZE}, the header says ${headerLength}`,
      HEADER_LENGTH,
    );
  }
  const stored = head.readUInt32BE(HEADER_CRC);
  const actual = crc32c(head.subarray(0, HEADER_CRC));
  if (stored !== actual) {
    throw new WalFormatError(
      'HEADER_CRC_MISMATCH',
      `WAL header CRC-32C is ${hex(actual)}, stored ${hex(stored)}`,
      HEADER_CRC,
    );
  }
  return {
    formatVersion,
    writerBrokerId: head.readInt32BE(HEADER_BROKER_ID),
    createdAtMs: Number(head.readBigInt64BE(HEADER_CREATED_AT)),
  };
}

/**
 * Decodes the trailer from the last WAL_TRAILER_SIZE bytes of `tail` (the end of an object, e.g. a
 * suffix range read). With `objectSize`, also checks that the footer it points at fits the object.
 */
export function readTrailer(tail: Buffer, objectSize?: number): WalTrailer {
  if (tail.length < WAL_TRAILER_SIZE) {
    throw new WalFormatError(
      'TRUNCATED',
      `WAL trailer needs the last ${WAL_TRAILER_SIZE} bytes, got ${tail.length}`,
      tail.length,
    );
  }
  const t = tail.subarray(tail.length - WAL_TRAILER_SIZE);
  if (!t.subarray(TRAILER_MAGIC).equals(WAL_MAGIC)) {
    throw new WalFormatError(
      'BAD_MAGIC',
      `not a complete WAL object: it does not end with "${WAL_MAGIC}" (truncated, or not a WAL object)`,
    );
  }
  const formatVersion = t.readUInt16BE(TRAILER_VERSION);
  checkVersion(formatVersion, 'trailer');
  const trailer: WalTrailer = {
    formatVersion,
    footerPosition: t.readUInt32BE(TRAILER_FOOTER_POSITION),
    footerLength: t.readUInt32BE(TRAILER_FOOTER_LENGTH),
    footerCrc: t.readUInt32BE(TRAILER_FOOTER_CRC),
  };
  if (trailer.footerPosition < WAL_HEADER_SIZE || trailer.footerLength < WAL_EMPTY_FOOTER_SIZE) {
    throw new WalFormatError(
      'BAD_INDEX',
      `trailer places the footer at ${trailer.footerPosition} with ${trailer.footerLength} bytes: impossible in a WAL object`,
    );
  }
  if (objectSize !== undefined) {
    const expected = trailer.footerPosition + trailer.footerLength + WAL_TRAILER_SIZE;
    if (expected !== objectSize) {
      throw new WalFormatError(
        expected > objectSize ? 'TRUNCATED' : 'BAD_INDEX',
        `trailer says the object has ${expected} bytes (footer at ${trailer.footerPosition}, ${trailer.footerLength} bytes), it has ${objectSize}`,
      );
    }
  }
  return trailer;
}

/**
 * Checks the footer against the trailer's CRC and decodes its index. `footer` is exactly the
 * trailer's footerLength bytes at footerPosition. Entries must tile the body from the end of the
 * header to the footer, in order, with no gap or overlap.
 */
export function parseFooter(footer: Buffer, trailer: WalTrailer): WalIndexEntry[] {
  if (footer.length !== trailer.footerLength) {
    throw new WalFormatError(
      'TRUNCATED',
      `footer is ${trailer.footerLength} bytes by the trailer, ${footer.length} were given`,
    );
  }
  const actual = crc32c(footer);
  if (actual !== trailer.footerCrc) {
    throw new WalFormatError(
      'FOOTER_CRC_MISMATCH',
      `WAL footer CRC-32C is ${hex(actual)}, the trailer says ${hex(trailer.footerCrc)}: the footer is corrupt`,
      trailer.footerPosition,
    );
  }
  const at = (offset: number) => trailer.footerPosition + offset;
  const need = (offset: number, bytes: number, what: string) => {
    if (offset + bytes > footer.length) {
      throw new WalFormatError('BAD_INDEX', `footer ends inside ${what}`, at(offset));
    }
  };

  need(0, 4, 'the topic count');
  const topicCount = footer.readUInt32BE(0);
  const topics: { id: string; name: string }[] = [];
  let o = 4;
  for (let i = 0; i < topicCount; i++) {
    need(o, WAL_TOPIC_FIXED_SIZE, `topic ${i}`);
    const id = footer.toString('hex', o, o + 16);
    const nameLength = footer.readUInt16BE(o + 16);
    need(o + WAL_TOPIC_FIXED_SIZE, nameLength, `the name of topic ${i}`);
    let name: string;
    try {
      name = utf8.decode(footer.subarray(o + WAL_TOPIC_FIXED_SIZE, o + WAL_TOPIC_FIXED_SIZE + nameLength));
    } catch {
      throw new WalFormatError('BAD_INDEX', `the name of topic ${i} is not valid UTF-8`, at(o));
    }
    topics.push({ id, name });
    o += WAL_TOPIC_FIXED_SIZE + nameLength;
  }

  need(o, 4, 'the entry count');
  const entryCount = footer.readUInt32BE(o);
  o += 4;
  if (footer.length - o !== entryCount * WAL_INDEX_ENTRY_SIZE) {
    throw new WalFormatError(
      'BAD_INDEX',
      `footer has room for ${(footer.length - o) / WAL_INDEX_ENTRY_SIZE} index entries, it declares ${entryCount}`,
      at(o - 4),
    );
  }

  const entries: WalIndexEntry[] = [];
  let expectedPosition = WAL_HEADER_SIZE;
  for (let i = 0; i < entryCount; i++, o += WAL_INDEX_ENTRY_SIZE) {
    const topicIndex = footer.readUInt32BE(o + ENTRY_TOPIC_INDEX);
    const topic = topics[topicIndex];
    if (topic === undefined) {
      throw new WalFormatError(
        'BAD_INDEX',
        `index entry ${i} names topic ${topicIndex}, the footer lists ${topicCount}`,
        at(o),
      );
    }
    const position = footer.readUInt32BE(o + ENTRY_POSITION);
    const length = footer.readUInt32BE(o + ENTRY_LENGTH);
    const partition = footer.readInt32BE(o + ENTRY_PARTITION);
    const where = `index entry ${i} (${topic.name || topic.id}-${partition}, bytes ${position}..${position + length})`;
    if (position + length > trailer.footerPosition) {
      throw new WalFormatError(
        'BAD_INDEX',
        `${where} runs past the end of the body at ${trailer.footerPosition}`,
        at(o),
      );
    }
    if (position !== expectedPosition) {
      throw new WalFormatError(
        'BAD_INDEX',
        `${where} should start at ${expectedPosition}, where the previous batch ends`,
        at(o),
      );
    }
    if (length < BATCH_HEADER_SIZE) {
      throw new WalFormatError('BAD_INDEX', `${where} is shorter than a record batch header`, at(o));
    }
    entries.push({
      topicId: topic.id,
      topicName: topic.name,
      partition,
      position,
      length,
      crc: footer.readUInt32BE(o + ENTRY_CRC),
      producerId: footer.readBigInt64BE(o + ENTRY_PRODUCER_ID),
      producerEpoch: footer.readInt16BE(o + ENTRY_PRODUCER_EPOCH),
      baseSequence: footer.readInt32BE(o + ENTRY_BASE_SEQUENCE),
      recordCount: footer.readInt32BE(o + ENTRY_RECORD_COUNT),
      lastOffsetDelta: footer.readInt32BE(o + ENTRY_LAST_OFFSET_DELTA),
    });
    expectedPosition = position + length;
  }
  if (expectedPosition !== trailer.footerPosition) {
    throw new WalFormatError(
      'BAD_INDEX',
      `the index covers the body up to ${expectedPosition}, the footer starts at ${trailer.footerPosition}`,
    );
  }
  return entries;
}

export interface ParseWalObjectOptions {
  /**
   * Also check every batch against its index entry: Length and Magic fields, and the CRC-32C of
   * bytes 21..end (default true; one CRC pass over the body).
   */
  verifyBatches?: boolean;
}

/** Decodes and checks a whole WAL object: header, trailer, footer and, by default, every batch. */
export function parseWalObject(object: Buffer, options: ParseWalObjectOptions = {}): WalObject {
  const header = readHeader(object);
  // A good header without the magic at the end is an upload or a read cut short.
  if (
    object.length < WAL_HEADER_SIZE + WAL_TRAILER_SIZE ||
    !object.subarray(-WAL_MAGIC.length).equals(WAL_MAGIC)
  ) {
    throw new WalFormatError(
      'TRUNCATED',
      `WAL object of ${object.length} bytes starts like one but does not end with "${WAL_MAGIC}": it is truncated`,
      object.length,
    );
  }
  const trailer = readTrailer(object, object.length);
  if (trailer.formatVersion !== header.formatVersion) {
    throw new WalFormatError(
      'BAD_INDEX',
      `header says format version ${header.formatVersion}, trailer ${trailer.formatVersion}`,
    );
  }
  const footer = object.subarray(trailer.footerPosition, trailer.footerPosition + trailer.footerLength);
  const entries = parseFooter(footer, trailer);
  if (options.verifyBatches ?? true) {
    for (const [i, entry] of entries.entries()) {
      // The batch CRC starts at byte 21; Length and Magic before it are checked against the index.
      const declared = object.readInt32BE(entry.position + BATCH_LENGTH) + BATCH_LOG_OVERHEAD;
      const magic = object.readInt8(entry.position + BATCH_MAGIC);
      if (declared !== entry.length || magic !== BATCH_MAGIC_V2) {
        throw new WalFormatError(
          'BAD_INDEX',
          `batch ${i} (${entry.topicName || entry.topicId}-${entry.partition}) has magic ${magic} and ${declared} bytes by its header, the index says magic 2 and ${entry.length} bytes`,
          entry.position,
        );
      }
      const actual = crc32c(object.subarray(entry.position + BATCH_CRC_START, entry.position + entry.length));
      if (actual !== entry.crc) {
        throw new WalFormatError(
          'BATCH_CRC_MISMATCH',
          `batch ${i} (${entry.topicName || entry.topicId}-${entry.partition}) has CRC-32C ${hex(actual)}, the index says ${hex(entry.crc)}`,
          entry.position,
        );
      }
    }
  }
  return { header, trailer, entries };
}

/**
 * The bytes of a batch's records (everything after its 61-byte header): what a follower reads from
 * the object when the leader sent it the header inline.
 */
export function batchBodyRange(entry: Pick<WalIndexEntry, 'position' | 'length'>): {
  offset: number;
  length: number;
} {
  return { offset: entry.position + BATCH_HEADER_SIZE, length: entry.length - BATCH_HEADER_SIZE };
}

function checkVersion(version: number, where: string, offset?: number): void {
  if (version !== WAL_FORMAT_VERSION) {
    throw new WalFormatError(
      'UNSUPPORTED_VERSION',
      `WAL ${where} has format version ${version}; this reader knows version ${WAL_FORMAT_VERSION}`,
      offset,
    );
  }
}

function hex(crc: number): string {
  return `0x${crc.toString(16).padStart(8, '0')}`;
}
