// Magic v2 record batches (clients/.../common/record/DefaultRecordBatch.java), the only format a
// 4.x broker writes (KIP-724, KIP-896):
//
//   byte  field                 type     in CRC
//    0    BaseOffset            int64    no
//    8    Length                int32    no   (bytes after this field: total size = Length + 12)
//   12    PartitionLeaderEpoch  int32    no
//   16    Magic                 int8     no   (= 2)
//   17    CRC                   uint32   -    (CRC-32C of bytes 21..end)
//   21    Attributes            int16    yes  (bits 0-2 codec, 3 timestamp type, 4 transactional,
//                                              5 control, 6 delete horizon)
//   23    LastOffsetDelta       int32    yes
//   27    BaseTimestamp         int64    yes
//   35    MaxTimestamp          int64    yes
//   43    ProducerId            int64    yes
//   51    ProducerEpoch         int16    yes
//   53    BaseSequence          int32    yes
//   57    RecordsCount          int32    yes
//   61    Records (compressed as a whole when a codec is set)
//
// The leader rewrites BaseOffset and PartitionLeaderEpoch on append; both are outside the CRC, which
// is why they can be patched in place without recomputing it.

import { int16At, int32At, int64At } from '../protocol/bytes.js';
import { ProtocolError } from '../protocol/errors.js';
import { crc32c } from './crc32c.js';

export const RECORD_BATCH_HEADER_SIZE = 61;
/** BaseOffset + Length: the bytes before the part that Length counts. */
export const LOG_OVERHEAD = 12;
export const CRC_START = 21;

const MAGIC_OFFSET = 16;
const CRC_OFFSET = 17;

export const CompressionCodec = { none: 0, gzip: 1, snappy: 2, lz4: 3, zstd: 4 } as const;
export type TimestampType = 'CreateTime' | 'LogAppendTime';

/**
 * A zero-copy view of one complete magic v2 batch inside a larger buffer. Getters read the header
 * on demand; setters write into the underlying buffer.
 */
export class RecordBatch {
  readonly buffer: Buffer;
  /** Where the batch starts in `buffer`. */
  readonly offset: number;
  /** Total bytes of the batch, header included. */
  readonly size: number;

  constructor(buffer: Buffer, offset: number, size: number) {
    this.buffer = buffer;
    this.offset = offset;
    this.size = size;
  }

  /** Discriminates complete batches from a PartialBatch during iteration. */
  get partial(): false {
    return false;
  }

  /** The whole batch, header included. */
  bytes(): Buffer {
    return this.buffer.subarray(this.offset, this.offset + this.size);
  }

  /** Bytes 61..end: the records, as a WAL object stores them. */
  body(): Buffer {
    return this.buffer.subarray(this.offset + RECORD_BATCH_HEADER_SIZE, this.offset + this.size);
  }

  /** The 61-byte header. */
  header(): Buffer {
    return this.buffer.subarray(this.offset, this.offset + RECORD_BATCH_HEADER_SIZE);
  }

  get baseOffset(): bigint {
    return int64At(this.buffer, this.offset);
  }

  get batchLength(): number {
    return int32At(this.buffer, this.offset + 8);
  }

  get partitionLeaderEpoch(): number {
    return int32At(this.buffer, this.offset + 12);
  }

  get magic(): number {
    return (this.buffer[this.offset + MAGIC_OFFSET]! << 24) >> 24;
  }

  get crc(): number {
    return int32At(this.buffer, this.offset + CRC_OFFSET) >>> 0;
  }

  get attributes(): number {
    return int16At(this.buffer, this.offset + 21);
  }

  /** Attribute bits 0-2, see CompressionCodec. */
  get compression(): number {
    return this.attributes & 0x07;
  }

  get timestampType(): TimestampType {
    return this.attributes & 0x08 ? 'LogAppendTime' : 'CreateTime';
  }

  get isTransactional(): boolean {
    return (this.attributes & 0x10) !== 0;
  }

  /** Transaction markers and other control records. */
  get isControl(): boolean {
    return (this.attributes & 0x20) !== 0;
  }

  /** Set by the log cleaner (KIP-534): BaseTimestamp then holds the delete horizon. */
  get hasDeleteHorizon(): boolean {
    return (this.attributes & 0x40) !== 0;
  }

  get lastOffsetDelta(): number {
    return int32At(this.buffer, this.offset + 23);
  }

  /** BaseOffset + LastOffsetDelta. */
  get lastOffset(): bigint {
    return this.baseOffset + BigInt(this.lastOffsetDelta);
  }

  get baseTimestamp(): bigint {
    return int64At(this.buffer, this.offset + 27);
  }

  get maxTimestamp(): bigint {
    return int64At(this.buffer, this.offset + 35);
  }

  get producerId(): bigint {
    return int64At(this.buffer, this.offset + 43);
  }

  get producerEpoch(): number {
    return int16At(this.buffer, this.offset + 51);
  }

  get baseSequence(): number {
    return int32At(this.buffer, this.offset + 53);
  }

  get recordCount(): number {
    return int32At(this.buffer, this.offset + 57);
  }

  /** Writes BaseOffset into the underlying buffer; the CRC stays valid (not covered). */
  setBaseOffset(value: bigint): void {
    this.buffer.writeBigInt64BE(value, this.offset);
  }

  /** Writes PartitionLeaderEpoch into the underlying buffer; the CRC stays valid (not covered). */
  setPartitionLeaderEpoch(value: number): void {
    this.buffer.writeInt32BE(value, this.offset + 12);
  }

  /** CRC-32C over bytes 21..end, what the CRC field should hold. */
  computeCrc(): number {
    return crc32c(this.buffer.subarray(this.offset + CRC_START, this.offset + this.size));
  }

  /** The check a follower makes before appending (DefaultRecordBatch.isValid). */
  isCrcValid(): boolean {
    return this.computeCrc() === this.crc;
  }
}

/**
 * The incomplete batch at the end of a records blob. Brokers fill a Fetch response by slicing the
 * log by bytes, so a partial trailing batch is normal; followers and consumers ignore it
 * (ByteBufferLogInputStream) and fetch it again from its offset.
 */
export interface PartialBatch {
  readonly partial: true;
  readonly offset: number;
  readonly bytes: Buffer;
  /** Total size the batch declares, when its Length field is among the bytes present. */
  readonly declaredSize: number | undefined;
}

function corrupt(field: string, offset: number, detail: string): never {
  throw new ProtocolError('CORRUPT_RECORD_BATCH', { api: 'RecordBatch', version: 2, field, offset }, detail);
}

/**
 * The complete batch starting at `offset`, or a PartialBatch when `buffer` ends before the batch
 * does. Throws CORRUPT_RECORD_BATCH for a batch that is not magic v2 or whose Length cannot hold a
 * v2 header.
 */
export function recordBatchAt(buffer: Buffer, offset: number): RecordBatch | PartialBatch {
  const left = buffer.length - offset;
  if (left < LOG_OVERHEAD) {
    return { partial: true, offset, bytes: buffer.subarray(offset), declaredSize: undefined };
  }
  const length = int32At(buffer, offset + 8);
  if (length < RECORD_BATCH_HEADER_SIZE - LOG_OVERHEAD) {
    corrupt(
      'Length',
      offset + 8,
      `batch length ${length} is below the v2 minimum ${RECORD_BATCH_HEADER_SIZE - LOG_OVERHEAD}`,
    );
  }
  const size = length + LOG_OVERHEAD;
  if (left < size) return { partial: true, offset, bytes: buffer.subarray(offset), declaredSize: size };
  const magic = buffer[offset + MAGIC_OFFSET]!;
  if (magic !== 2) corrupt('Magic', offset + MAGIC_OFFSET, `magic ${magic} is not 2`);
  return new RecordBatch(buffer, offset, size);
}

class BatchIterator implements IterableIterator<RecordBatch | PartialBatch> {
  private position = 0;
  private readonly records: Buffer;

  constructor(records: Buffer) {
    this.records = records;
  }

  [Symbol.iterator](): this {
    return this;
  }

  next(): IteratorResult<RecordBatch | PartialBatch> {
    if (this.position >= this.records.length) return { done: true, value: undefined };
    const batch = recordBatchAt(this.records, this.position);
    // A partial batch is always the last thing in the blob.
    this.position = batch.partial ? this.records.length : this.position + batch.size;
    return { done: false, value: batch };
  }
}

/**
 * The batches of a records blob in order, the last one possibly a PartialBatch. Nothing is copied:
 * each RecordBatch views `records`.
 */
export function recordBatches(records: Buffer): IterableIterator<RecordBatch | PartialBatch> {
  return new BatchIterator(records);
}
