import { crc32c } from './checksum.js';
import { WalFormatError } from './errors.js';
import {
  BATCH_BASE_SEQUENCE,
  BATCH_CRC_START,
  BATCH_HEADER_SIZE,
  BATCH_LAST_OFFSET_DELTA,
  BATCH_LENGTH,
  BATCH_LOG_OVERHEAD,
  BATCH_MAGIC,
  BATCH_MAGIC_V2,
  BATCH_PRODUCER_EPOCH,
  BATCH_PRODUCER_ID,
  BATCH_RECORD_COUNT,
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
  WAL_MAX_OBJECT_SIZE,
  WAL_TOPIC_FIXED_SIZE,
  WAL_TRAILER_SIZE,
  ZERO_TOPIC_ID,
} from './format.js';

export interface WalObjectBuilderOptions {
  /** The broker whose sidecar writes the object (int32). */
  writerBrokerId: number;
  /** When the object was opened, in milliseconds since the epoch; passed in to keep this pure. */
  createdAtMs: number;
}

/** One produced batch to add. At least one of topic id and topic name must be known. */
export interface WalAppendEntry {
  /** 32 lowercase hex digits (Produce v13+); omitted or ZERO_TOPIC_ID when only the name is known. */
  topicId?: string | undefined;
  /** Omitted or empty when only the id is known. */
  topicName?: string | undefined;
  partition: number;
  /** Exactly one complete magic v2 record batch; kept by reference (zero-copy) until sealed. */
  batch: Buffer;
}

/** Where an appended batch sits in the object. */
export interface WalAppendResult {
  position: number;
  length: number;
}

const TOPIC_ID = /^[0-9a-f]{32}$/;

interface Topic {
  id: string;
  name: Buffer;
}

/**
 * Packs produced record batches of any partitions into one WAL object. Pure: no I/O, no clock. The
 * batches are not copied; `seal()` hands back the header, the batches themselves and the footer as
 * a list, so the caller decides whether and when to concatenate (a file store writes the list with
 * one writev; the S3 SDK needs one Buffer).
 */
export class WalObjectBuilder {
  readonly #header: Buffer;
  readonly #batches: Buffer[] = [];
  /** Index entries, written as the batches arrive. */
  #entries: Buffer;
  readonly #topics: Topic[] = [];
  readonly #topicIndex = new Map<string, number>();
  #topicTableSize = 0;
  #bodySize = 0;
  #sealed = false;

  constructor(options: WalObjectBuilderOptions) {
    const { writerBrokerId, createdAtMs } = options;
    if (!Number.isInteger(writerBrokerId) || writerBrokerId < -(2 ** 31) || writerBrokerId >= 2 ** 31) {
      throw new WalFormatError('INVALID_ENTRY', `writer broker id ${writerBrokerId} is not an int32`);
    }
    if (!Number.isSafeInteger(createdAtMs) || createdAtMs < 0) {
      throw new WalFormatError(
        'INVALID_ENTRY',
        `creation time ${createdAtMs} is not a non-negative integer of ms`,
      );
    }
    const header = Buffer.alloc(WAL_HEADER_SIZE);
    WAL_MAGIC.copy(header, 0);
    header.writeUInt16BE(WAL_FORMAT_VERSION, HEADER_VERSION);
    header.writeUInt16BE(WAL_HEADER_SIZE, HEADER_LENGTH);
    header.writeInt32BE(writerBrokerId, HEADER_BROKER_ID);
    header.writeBigInt64BE(BigInt(createdAtMs), HEADER_CREATED_AT);
    header.writeUInt32BE(crc32c(header.subarray(0, HEADER_CRC)), HEADER_CRC);
    this.#header = header;
    this.#entries = Buffer.alloc(WAL_INDEX_ENTRY_SIZE * 32);
  }

  /** Bytes the sealed object will have, footer and trailer included: what to compare to a target size. */
  get size(): number {
    return (
      WAL_HEADER_SIZE +
      this.#bodySize +
      WAL_EMPTY_FOOTER_SIZE +
      this.#topicTableSize +
      this.#batches.length * WAL_INDEX_ENTRY_SIZE +
      WAL_TRAILER_SIZE
    );
  }

  get batchCount(): number {
    return this.#batches.length;
  }

  /** Adds one batch after the previous ones. Checks that it is one magic v2 batch; copies nothing. */
  append(entry: WalAppendEntry): WalAppendResult {
    if (this.#sealed) throw new WalFormatError('BUILDER_SEALED', 'append after seal: start a new builder');
    const { batch, partition } = entry;
    checkBatch(batch);
    if (!Number.isInteger(partition) || partition < 0 || partition >= 2 ** 31) {
      throw new WalFormatError('INVALID_ENTRY', `partition ${partition} is not a non-negative int32`);
    }
    const topic = this.#resolveTopic(entry.topicId, entry.topicName);
    const position = WAL_HEADER_SIZE + this.#bodySize;
    const length = batch.length;
    const newRowSize = topic.row === undefined ? 0 : WAL_TOPIC_FIXED_SIZE + topic.row.name.length;
    if (this.size + length + WAL_INDEX_ENTRY_SIZE + newRowSize > WAL_MAX_OBJECT_SIZE) {
      throw new WalFormatError('OBJECT_TOO_LARGE', `a WAL object cannot exceed ${WAL_MAX_OBJECT_SIZE} bytes`);
    }
    if (topic.row !== undefined) {
      this.#topicIndex.set(topic.key, topic.index);
      this.#topics.push(topic.row);
      this.#topicTableSize += newRowSize;
    }

    const n = this.#batches.length;
    if ((n + 1) * WAL_INDEX_ENTRY_SIZE > this.#entries.length) {
      const grown = Buffer.alloc(this.#entries.length * 2);
      this.#entries.copy(grown);
      this.#entries = grown;
    }
    const e = this.#entries.subarray(n * WAL_INDEX_ENTRY_SIZE, (n + 1) * WAL_INDEX_ENTRY_SIZE);
    e.writeUInt32BE(topic.index, ENTRY_TOPIC_INDEX);
    e.writeInt32BE(partition, ENTRY_PARTITION);
    e.writeUInt32BE(position, ENTRY_POSITION);
    e.writeUInt32BE(length, ENTRY_LENGTH);
    // Computed, not copied from the batch header: the index vouches for the bytes actually stored.
    e.writeUInt32BE(crc32c(batch.subarray(BATCH_CRC_START)), ENTRY_CRC);
    batch.copy(e, ENTRY_PRODUCER_ID, BATCH_PRODUCER_ID, BATCH_PRODUCER_ID + 8);
    batch.copy(e, ENTRY_PRODUCER_EPOCH, BATCH_PRODUCER_EPOCH, BATCH_PRODUCER_EPOCH + 2);
    batch.copy(e, ENTRY_BASE_SEQUENCE, BATCH_BASE_SEQUENCE, BATCH_BASE_SEQUENCE + 4);
    batch.copy(e, ENTRY_RECORD_COUNT, BATCH_RECORD_COUNT, BATCH_RECORD_COUNT + 4);
    batch.copy(e, ENTRY_LAST_OFFSET_DELTA, BATCH_LAST_OFFSET_DELTA, BATCH_LAST_OFFSET_DELTA + 4);

    this.#batches.push(batch);
    this.#bodySize += length;
    return { position, length };
  }

  /**
   * Ends the object: header, every batch as appended (the same Buffers), then footer and trailer in
   * one Buffer. Their total length is `size`. The builder accepts nothing afterwards.
   */
  seal(): Buffer[] {
    if (this.#sealed) throw new WalFormatError('BUILDER_SEALED', 'seal called twice');
    if (this.#batches.length === 0) {
      throw new WalFormatError('EMPTY_OBJECT', 'a WAL object needs at least one batch');
    }
    this.#sealed = true;
    const footerPosition = WAL_HEADER_SIZE + this.#bodySize;
    const footerLength =
      WAL_EMPTY_FOOTER_SIZE + this.#topicTableSize + this.#batches.length * WAL_INDEX_ENTRY_SIZE;
    const tail = Buffer.alloc(footerLength + WAL_TRAILER_SIZE);
    let o = tail.writeUInt32BE(this.#topics.length, 0);
    for (const topic of this.#topics) {
      o += tail.write(topic.id, o, 16, 'hex');
      o = tail.writeUInt16BE(topic.name.length, o);
      o += topic.name.copy(tail, o);
    }
    o = tail.writeUInt32BE(this.#batches.length, o);
    this.#entries.copy(tail, o, 0, this.#batches.length * WAL_INDEX_ENTRY_SIZE);
    const trailer = tail.subarray(footerLength);
    trailer.writeUInt32BE(footerPosition, TRAILER_FOOTER_POSITION);
    trailer.writeUInt32BE(footerLength, TRAILER_FOOTER_LENGTH);
    trailer.writeUInt32BE(crc32c(tail.subarray(0, footerLength)), TRAILER_FOOTER_CRC);
    trailer.writeUInt16BE(WAL_FORMAT_VERSION, TRAILER_VERSION);
    WAL_MAGIC.copy(trailer, TRAILER_MAGIC);
    return [this.#header, ...this.#batches, tail];
  }

  /** The topic table row for this id and name; `row` is set when the topic is new to the object. */
  #resolveTopic(
    topicId: string | undefined,
    topicName: string | undefined,
  ): { key: string; index: number; row?: Topic } {
    const id = topicId ?? ZERO_TOPIC_ID;
    const name = topicName ?? '';
    const key = `${id}/${name}`;
    const known = this.#topicIndex.get(key);
    if (known !== undefined) return { key, index: known };
    if (!TOPIC_ID.test(id)) {
      throw new WalFormatError(
        'INVALID_ENTRY',
        `topic id ${JSON.stringify(id)} is not 32 lowercase hex digits`,
      );
    }
    if (id === ZERO_TOPIC_ID && name === '') {
      throw new WalFormatError('INVALID_ENTRY', 'a batch needs a topic id or a topic name');
    }
    const nameBytes = Buffer.from(name, 'utf8');
    if (nameBytes.length > 0xffff) {
      throw new WalFormatError('INVALID_ENTRY', `topic name of ${nameBytes.length} bytes exceeds 65535`);
    }
    return { key, index: this.#topics.length, row: { id, name: nameBytes } };
  }
}

/** One complete magic v2 batch, nothing more: its Length field accounts for every byte given. */
function checkBatch(batch: Buffer): void {
  if (batch.length < BATCH_HEADER_SIZE) {
    throw new WalFormatError(
      'INVALID_BATCH',
      `a record batch has at least ${BATCH_HEADER_SIZE} bytes; got ${batch.length}`,
    );
  }
  const magic = batch.readInt8(BATCH_MAGIC);
  if (magic !== BATCH_MAGIC_V2) {
    throw new WalFormatError(
      'INVALID_BATCH',
      `record batch magic is ${magic}, only v2 is stored`,
      BATCH_MAGIC,
    );
  }
  const declared = batch.readInt32BE(BATCH_LENGTH) + BATCH_LOG_OVERHEAD;
  if (declared !== batch.length) {
    throw new WalFormatError(
      'INVALID_BATCH',
      `record batch Length field says ${declared} bytes in all, the buffer has ${batch.length}: pass exactly one batch`,
      BATCH_LENGTH,
    );
  }
}
