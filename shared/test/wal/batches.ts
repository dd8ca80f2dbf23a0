// Magic v2 record batches for WAL tests: the header fields the WAL index copies, a records section
// of arbitrary bytes (the WAL never looks inside it), and a correct CRC, as a producer sends them.
import { crc32c } from '@node-rs/crc32';
import fc from 'fast-check';

export interface BatchFields {
  producerId: bigint;
  producerEpoch: number;
  baseSequence: number;
  recordCount: number;
  lastOffsetDelta: number;
  attributes: number;
  baseTimestamp: bigint;
  records: Buffer;
}

export function makeBatch(fields: Partial<BatchFields> = {}): Buffer {
  const records = fields.records ?? Buffer.from('records');
  const b = Buffer.alloc(61 + records.length);
  b.writeBigInt64BE(0n, 0); // BaseOffset: the producer sends 0, the leader assigns it
  b.writeInt32BE(b.length - 12, 8);
  b.writeInt32BE(-1, 12); // PartitionLeaderEpoch: set by the leader
  b.writeInt8(2, 16);
  b.writeInt16BE(fields.attributes ?? 0, 21);
  b.writeInt32BE(fields.lastOffsetDelta ?? 0, 23);
  b.writeBigInt64BE(fields.baseTimestamp ?? 1_767_225_600_000n, 27);
  b.writeBigInt64BE(fields.baseTimestamp ?? 1_767_225_600_000n, 35);
  b.writeBigInt64BE(fields.producerId ?? -1n, 43);
  b.writeInt16BE(fields.producerEpoch ?? -1, 51);
  b.writeInt32BE(fields.baseSequence ?? -1, 53);
  b.writeInt32BE(fields.recordCount ?? 1, 57);
  records.copy(b, 61);
  b.writeUInt32BE(crc32c(b.subarray(21)), 17);
  return b;
}

export const batchArb: fc.Arbitrary<Buffer> = fc
  .record({
    producerId: fc.bigInt({ min: -1n, max: 2n ** 63n - 1n }),
    producerEpoch: fc.integer({ min: -1, max: 32767 }),
    baseSequence: fc.integer({ min: -1, max: 2 ** 31 - 1 }),
    recordCount: fc.integer({ min: 1, max: 10_000 }),
    lastOffsetDelta: fc.integer({ min: 0, max: 9_999 }),
    attributes: fc.integer({ min: 0, max: 0x7f }),
    baseTimestamp: fc.bigInt({ min: 0n, max: 2n ** 62n }),
    records: fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)),
  })
  .map(makeBatch);

/** Topics as Produce names them: by name (v3–v12), by id (v13+), or both. */
export const topicArb: fc.Arbitrary<{ topicId?: string; topicName?: string }> = fc.oneof(
  fc.record({ topicName: fc.stringMatching(/^[a-zA-Z0-9._-]{1,40}$/) }),
  fc.record({ topicId: fc.stringMatching(/^[0-9a-f]{32}$/).filter((id) => !/^0+$/.test(id)) }),
  fc.record({
    topicId: fc.stringMatching(/^[0-9a-f]{32}$/).filter((id) => !/^0+$/.test(id)),
    topicName: fc.stringMatching(/^[a-zA-Z0-9._-]{1,40}$/),
  }),
);

export const appendEntryArb = fc.record({
  topic: topicArb,
  partition: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  batch: batchArb,
});
