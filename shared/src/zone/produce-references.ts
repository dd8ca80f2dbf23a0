// Zone-local produce (issue #15, docs/zone-local.md): the Records field of one Produce partition as
// the producer's zone sidecar (S_Z) forwards it to the leader's sidecar (S_L), once S_Z has stored
// the produced batch in its own zone's bucket. S_L fills it back with the exact produced bytes
// before the broker sees the request. It is laid out as one record batch that a broker refuses:
//
//   byte  field
//    0    BaseOffset            int64   the produced batch's
//    8    Length                int32   the reference's own (bytes after this field): Kafka's batch
//                                       framing (ByteBufferLogInputStream) spans it exactly
//   12    PartitionLeaderEpoch  int32   the produced batch's
//   16    Magic                 int8    = 0x57 ('W'): never a Kafka magic. A broker answers a Produce
//                                       v3+ partition whose batch is not magic 2 INVALID_RECORD and
//                                       appends nothing (ProduceRequest.validateRecords)
//   17    bytes 17..60 of the produced batch: CRC, attributes, last offset delta, timestamps,
//         producer id and epoch, base sequence, record count. A broker reads the attributes and
//         producer id of every batch before it validates them (transactional-id and
//         idempotent-write authorization), so a reference a broker ever saw is judged by the same
//         ACLs as the batch it stands for, then refused.
//   61    Version               int8    (= 1)
//         BatchLength           int32   the produced batch's Length: it is BatchLength + 12 bytes
//         Store                 COMPACT_STRING  URL of the store holding the object (S_Z's
//                                       --wal-store-url: S3 Express One Zone buckets are zonal)
//         ObjectKey             COMPACT_STRING
//         Position              uvarint where the produced batch starts in the object
//         ObjectSize            uvarint the object's size (the leader's metadata records name it)
//
// S_L reads BatchLength + 12 bytes at Position and takes them only when they are the batch the
// reference stands for: bytes 0..7, 12..15 and 17..60 equal the reference's, Length is BatchLength,
// magic is 2 and the CRC-32C of bytes 21..end is the CRC at 17. The object then holds the exact
// bytes the producer sent, and the broker gets them.

import { ProtocolError } from '../protocol/errors.js';
import { Reader } from '../protocol/reader.js';
import { Writer } from '../protocol/writer.js';
import { crc32c } from '../records/crc32c.js';
import { CRC_START, LOG_OVERHEAD, RECORD_BATCH_HEADER_SIZE } from '../records/record-batch.js';

/** The magic byte of a reference; a Kafka record batch has 0, 1 or 2. */
export const PRODUCE_REFERENCE_MAGIC = 0x57;
const FORMAT_VERSION = 1;
const MAGIC_OFFSET = 16;
const LENGTH_OFFSET = 8;
const CRC_OFFSET = 17;

const CTX = { api: 'WalproxyProduceReference', version: FORMAT_VERSION, flexible: true };

export interface ProduceReference {
  /** The produced batch's 61 header bytes (its own Length and magic 2 included). */
  readonly header: Buffer;
  /** The produced batch's whole size: its Length + 12. */
  readonly batchSize: number;
  readonly store: string;
  readonly objectKey: string;
  readonly position: number;
  readonly objectSize: number;
}

/** Where S_Z stored the batch. */
export interface ProduceReferenceLocation {
  readonly store: string;
  readonly objectKey: string;
  readonly position: number;
  readonly objectSize: number;
}

/** The reference standing for `batch` (one whole magic v2 batch) stored at `location`. */
export function encodeProduceReference(batch: Buffer, location: ProduceReferenceLocation): Buffer {
  if (batch.length < RECORD_BATCH_HEADER_SIZE || batch[MAGIC_OFFSET] !== 2) {
    throw new RangeError('a produce reference stands for one magic v2 record batch');
  }
  const w = new Writer(
    CTX,
    RECORD_BATCH_HEADER_SIZE + 32 + location.objectKey.length + location.store.length,
  );
  w.raw(batch.subarray(0, RECORD_BATCH_HEADER_SIZE));
  w.int8(FORMAT_VERSION, 'Version');
  w.int32(batch.readInt32BE(LENGTH_OFFSET), 'BatchLength');
  w.compactString(location.store, 'Store');
  w.compactString(location.objectKey, 'ObjectKey');
  w.uvarint(location.position, 'Position');
  w.uvarint(location.objectSize, 'ObjectSize');
  const out = w.finish();
  out.writeInt32BE(out.length - LOG_OVERHEAD, LENGTH_OFFSET);
  out[MAGIC_OFFSET] = PRODUCE_REFERENCE_MAGIC;
  return out;
}

/** Whether a partition's Records field is a reference (by its magic byte; decode to know it is a valid one). */
export function isProduceReference(records: Buffer | null): records is Buffer {
  return (
    records !== null &&
    records.length > RECORD_BATCH_HEADER_SIZE &&
    records[MAGIC_OFFSET] === PRODUCE_REFERENCE_MAGIC
  );
}

export function decodeProduceReference(records: Buffer): ProduceReference {
  const r = new Reader(records, CTX);
  if (records.length <= RECORD_BATCH_HEADER_SIZE) {
    r.fail(
      'TRUNCATED',
      'Header',
      `a reference has more than ${RECORD_BATCH_HEADER_SIZE} bytes, this one ${records.length}`,
    );
  }
  if (records[MAGIC_OFFSET] !== PRODUCE_REFERENCE_MAGIC) {
    r.fail('INVALID_VALUE', 'Magic', `magic ${records[MAGIC_OFFSET]} is not a reference's`, MAGIC_OFFSET);
  }
  if (records.readInt32BE(LENGTH_OFFSET) !== records.length - LOG_OVERHEAD) {
    r.fail(
      'INVALID_LENGTH',
      'Length',
      `Length ${records.readInt32BE(LENGTH_OFFSET)} does not span the ${records.length} bytes`,
      LENGTH_OFFSET,
    );
  }
  r.skip(RECORD_BATCH_HEADER_SIZE, 'Header');
  const version = r.int8('Version');
  if (version !== FORMAT_VERSION) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      { api: CTX.api, version, field: 'Version', offset: RECORD_BATCH_HEADER_SIZE },
      `walproxy produce reference format version ${version}; this build reads ${FORMAT_VERSION}`,
    );
  }
  const batchLength = r.int32('BatchLength');
  if (batchLength < RECORD_BATCH_HEADER_SIZE - LOG_OVERHEAD) {
    r.fail('INVALID_VALUE', 'BatchLength', `a batch of Length ${batchLength} is shorter than its header`);
  }
  const store = r.compactString('Store');
  const objectKey = r.compactString('ObjectKey');
  const position = r.uvarint('Position');
  const objectSize = r.uvarint('ObjectSize');
  if (position + batchLength + LOG_OVERHEAD > objectSize) {
    r.fail(
      'INVALID_VALUE',
      'Position',
      `a batch at ${position} of ${batchLength + LOG_OVERHEAD} bytes ends past the object's ${objectSize}`,
    );
  }
  r.done('WalproxyProduceReference');
  const header = Buffer.from(records.subarray(0, RECORD_BATCH_HEADER_SIZE));
  header.writeInt32BE(batchLength, LENGTH_OFFSET);
  header[MAGIC_OFFSET] = 2;
  return { header, batchSize: batchLength + LOG_OVERHEAD, store, objectKey, position, objectSize };
}

/**
 * Why `batch` (the bytes read at the reference's position) is not the batch the reference stands
 * for, or undefined when it is: same size, the same header bytes 0..60, and a CRC-32C over bytes
 * 21..end equal to the CRC at 17.
 */
export function produceReferenceMismatch(reference: ProduceReference, batch: Buffer): string | undefined {
  if (batch.length !== reference.batchSize) {
    return `${batch.length} bytes where the reference's batch has ${reference.batchSize}`;
  }
  if (!batch.subarray(0, RECORD_BATCH_HEADER_SIZE).equals(reference.header)) {
    return 'header bytes differ from the reference';
  }
  const crc = crc32c(batch.subarray(CRC_START));
  if (crc !== batch.readUInt32BE(CRC_OFFSET))
    return `CRC-32C ${crc} is not the batch's ${batch.readUInt32BE(CRC_OFFSET)}`;
  return undefined;
}
