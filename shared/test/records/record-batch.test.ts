import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CompressionCodec,
  type PartialBatch,
  RECORD_BATCH_HEADER_SIZE,
  type RecordBatch,
  recordBatchAt,
  recordBatches,
} from '../../src/records/record-batch.js';
import { buildRecordBatch, sampleBatch } from '../helpers/record-batches.js';
import { protocolErrorOf } from '../helpers/round-trip.js';

function only(buf: Buffer): RecordBatch {
  const b = recordBatchAt(buf, 0);
  if (b.partial) throw new Error('expected a complete batch');
  return b;
}

describe('RecordBatch header view', () => {
  it('reads every header field at its DefaultRecordBatch offset', () => {
    // Given a transactional LogAppendTime batch of 3 records from producer 77/2
    const buf = buildRecordBatch({
      baseOffset: 5000n,
      partitionLeaderEpoch: 9,
      attributes: CompressionCodec.none | 0x08 | 0x10,
      baseTimestamp: 1_700_000_000_000n,
      producerId: 77n,
      producerEpoch: 2,
      baseSequence: 40,
      records: [
        { key: null, value: Buffer.from('a'), timestampDelta: 0 },
        { key: Buffer.from('k'), value: null, timestampDelta: 5 },
        {
          key: null,
          value: Buffer.from('c'),
          timestampDelta: 3,
          headers: [{ key: 'h', value: Buffer.from('v') }],
        },
      ],
    });
    const b = only(buf);
    // Then
    expect(b.size).toBe(buf.length);
    expect(b.batchLength).toBe(buf.length - 12);
    expect(b.baseOffset).toBe(5000n);
    expect(b.partitionLeaderEpoch).toBe(9);
    expect(b.magic).toBe(2);
    expect(b.compression).toBe(CompressionCodec.none);
    expect(b.timestampType).toBe('LogAppendTime');
    expect(b.isTransactional).toBe(true);
    expect(b.isControl).toBe(false);
    expect(b.hasDeleteHorizon).toBe(false);
    expect(b.lastOffsetDelta).toBe(2);
    expect(b.lastOffset).toBe(5002n);
    expect(b.baseTimestamp).toBe(1_700_000_000_000n);
    expect(b.maxTimestamp).toBe(1_700_000_000_005n);
    expect(b.producerId).toBe(77n);
    expect(b.producerEpoch).toBe(2);
    expect(b.baseSequence).toBe(40);
    expect(b.recordCount).toBe(3);
    expect(b.crc).toBe(buf.readUInt32BE(17));
    expect(b.isCrcValid()).toBe(true);
  });

  it('decodes the codec, control and delete-horizon attribute bits', () => {
    const b = only(buildRecordBatch({ attributes: CompressionCodec.zstd | 0x20 | 0x40, records: [] }));
    expect(b.compression).toBe(CompressionCodec.zstd);
    expect(b.timestampType).toBe('CreateTime');
    expect(b.isControl).toBe(true);
    expect(b.hasDeleteHorizon).toBe(true);
  });

  it('slices header and body without copying', () => {
    const buf = sampleBatch(0n, 2, 10);
    const b = only(buf);
    expect(b.header()).toEqual(buf.subarray(0, RECORD_BATCH_HEADER_SIZE));
    expect(b.body()).toEqual(buf.subarray(RECORD_BATCH_HEADER_SIZE));
    expect(b.body().buffer).toBe(buf.buffer);
    expect(b.bytes()).toEqual(buf);
  });

  it('patches BaseOffset and PartitionLeaderEpoch in place, and the CRC stays valid', () => {
    // Given a batch inside a larger records blob
    const blob = Buffer.concat([sampleBatch(0n, 2, 10), sampleBatch(2n, 3, 10, 2)]);
    const second = [...recordBatches(blob)][1] as RecordBatch;
    // When the leader's offset and epoch are written into it
    second.setBaseOffset(123_456_789_012n);
    second.setPartitionLeaderEpoch(17);
    // Then the blob itself changed, and the CRC (which does not cover them) still holds
    const again = [...recordBatches(blob)][1] as RecordBatch;
    expect(again.baseOffset).toBe(123_456_789_012n);
    expect(again.partitionLeaderEpoch).toBe(17);
    expect(again.isCrcValid()).toBe(true);
  });

  it('detects a changed byte under the CRC', () => {
    fc.assert(
      fc.property(fc.integer({ min: 21, max: 200 }), fc.integer({ min: 1, max: 255 }), (at, flip) => {
        const buf = sampleBatch(0n, 3, 40);
        const i = Math.min(at, buf.length - 1);
        buf[i] = buf[i]! ^ flip;
        expect(only(buf).isCrcValid()).toBe(false);
      }),
    );
  });
});

describe('recordBatches', () => {
  const batches = [sampleBatch(0n, 3, 30), sampleBatch(3n, 1, 200, 2), sampleBatch(4n, 5, 7, 3)];
  const blob = Buffer.concat(batches);

  it('walks complete batches in order', () => {
    const seen = [...recordBatches(blob)];
    expect(seen.map((b) => (b.partial ? 'partial' : b.baseOffset))).toEqual([0n, 3n, 4n]);
    expect([...recordBatches(Buffer.alloc(0))]).toEqual([]);
  });

  it('reports a partial trailing batch wherever the broker cut the bytes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: blob.length }), (cut) => {
        // Given the blob cut at any byte
        const seen = [...recordBatches(blob.subarray(0, cut))];
        // Then the batches fully before the cut are complete, and the rest is one partial batch
        let end = 0;
        let complete = 0;
        while (complete < batches.length && end + batches[complete]!.length <= cut)
          end += batches[complete++]!.length;
        expect(seen.filter((b) => !b.partial)).toHaveLength(complete);
        const last = seen.at(-1);
        if (end === cut) {
          expect(last?.partial ?? false).toBe(false);
        } else {
          const partial = last as PartialBatch;
          expect(partial.partial).toBe(true);
          expect(partial.offset).toBe(end);
          expect(partial.bytes).toEqual(blob.subarray(end, cut));
          expect(partial.declaredSize).toBe(cut - end >= 12 ? batches[complete]!.length : undefined);
        }
      }),
    );
  });

  it('refuses a batch that is not magic v2', () => {
    const buf = sampleBatch(0n, 1, 10);
    buf[16] = 1;
    expect(protocolErrorOf(() => [...recordBatches(buf)])).toMatchObject({
      code: 'WALPROXY_ERR_CORRUPT_RECORD_BATCH',
      field: 'Magic',
      offset: 16,
    });
  });

  it('refuses a Length too small for a v2 header, even in a trailing fragment', () => {
    const buf = sampleBatch(0n, 1, 10);
    buf.writeInt32BE(48, 8);
    expect(protocolErrorOf(() => [...recordBatches(buf)]).field).toBe('Length');
    buf.writeInt32BE(-5, 8);
    expect(protocolErrorOf(() => [...recordBatches(buf.subarray(0, 20))]).field).toBe('Length');
  });
});
