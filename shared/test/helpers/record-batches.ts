// Builds real magic v2 record batches (uncompressed), the way a Java producer lays them out, for
// tests and benchmarks. Record = Length varint, Attributes int8, TimestampDelta varlong,
// OffsetDelta varint, Key varint-length bytes, Value varint-length bytes, Headers varint count.

import { Writer } from '../../src/protocol/writer.js';
import { crc32c } from '../../src/records/crc32c.js';

export interface RecordSpec {
  key: Buffer | null;
  value: Buffer | null;
  timestampDelta?: number;
  headers?: { key: string; value: Buffer | null }[];
}

export interface BatchSpec {
  baseOffset?: bigint;
  partitionLeaderEpoch?: number;
  attributes?: number;
  baseTimestamp?: bigint;
  producerId?: bigint;
  producerEpoch?: number;
  baseSequence?: number;
  records: RecordSpec[];
}

function varintBytes(w: Writer, b: Buffer | null): void {
  if (b === null) {
    w.varint(-1, 'length');
    return;
  }
  w.varint(b.length, 'length');
  w.raw(b);
}

function encodeRecord(r: RecordSpec, offsetDelta: number): Buffer {
  const w = new Writer();
  w.int8(0, 'attributes');
  w.varlong(BigInt(r.timestampDelta ?? 0), 'timestampDelta');
  w.varint(offsetDelta, 'offsetDelta');
  varintBytes(w, r.key);
  varintBytes(w, r.value);
  const headers = r.headers ?? [];
  w.varint(headers.length, 'headers');
  for (const h of headers) {
    varintBytes(w, Buffer.from(h.key));
    varintBytes(w, h.value);
  }
  const body = w.finish();
  const framed = new Writer();
  framed.varint(body.length, 'length');
  framed.raw(body);
  return framed.finish();
}

export function buildRecordBatch(spec: BatchSpec): Buffer {
  const baseTimestamp = spec.baseTimestamp ?? 1_700_000_000_000n;
  const records = spec.records.map((r, i) => encodeRecord(r, i));
  const maxDelta = spec.records.reduce((m, r) => Math.max(m, r.timestampDelta ?? 0), 0);
  const w = new Writer();
  w.int64(spec.baseOffset ?? 0n, 'baseOffset');
  w.int32(0, 'length (patched)');
  w.int32(spec.partitionLeaderEpoch ?? 0, 'partitionLeaderEpoch');
  w.int8(2, 'magic');
  w.uint32(0, 'crc (patched)');
  w.int16(spec.attributes ?? 0, 'attributes');
  w.int32(Math.max(records.length - 1, 0), 'lastOffsetDelta');
  w.int64(baseTimestamp, 'baseTimestamp');
  w.int64(baseTimestamp + BigInt(maxDelta), 'maxTimestamp');
  w.int64(spec.producerId ?? -1n, 'producerId');
  w.int16(spec.producerEpoch ?? -1, 'producerEpoch');
  w.int32(spec.baseSequence ?? -1, 'baseSequence');
  w.int32(records.length, 'recordCount');
  for (const r of records) w.raw(r);
  const batch = Buffer.from(w.finish());
  batch.writeInt32BE(batch.length - 12, 8);
  batch.writeUInt32BE(crc32c(batch.subarray(21)), 17);
  return batch;
}

/** A batch of `count` records with values of `valueSize` bytes, looking like producer output. */
export function sampleBatch(baseOffset: bigint, count: number, valueSize: number, seed = 1): Buffer {
  const records: RecordSpec[] = [];
  for (let i = 0; i < count; i++) {
    const value = Buffer.alloc(valueSize, (seed * 31 + i) & 0xff);
    records.push({ key: Buffer.from(`key-${seed}-${i}`), value, timestampDelta: i });
  }
  return buildRecordBatch({
    baseOffset,
    partitionLeaderEpoch: 3,
    producerId: 4000n + BigInt(seed),
    producerEpoch: 0,
    baseSequence: 0,
    records,
  });
}
