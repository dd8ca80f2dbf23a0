import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Writer } from '../../src/protocol/writer.js';
import {
  decodePrefetchHints,
  encodePrefetchHints,
  encodePrefetchHintsWanted,
  PREFETCH_HINTS_TAG,
  type PrefetchHint,
  wantsPrefetchHints,
} from '../../src/replication/prefetch-hints.js';
import { FETCH_CAPABILITY_TAG, PARTITION_SEGMENTS_TAG } from '../../src/replication/wal-references.js';
import { WAL_TRACE_TAG } from '../../src/replication/wal-trace.js';

const hintArb: fc.Arbitrary<PrefetchHint> = fc.record({
  store: fc.constantFrom('s3://zone-a-bucket', 's3://zone-b-bucket', 'file:///shared/wal'),
  objectKey: fc.string({ minLength: 1, maxLength: 80 }),
  size: fc.nat({ max: 0x7fff_ffff }),
});

describe('prefetch hints tag', () => {
  it('is a tag of its own, above Kafka’s and beside the other walproxy tags', () => {
    expect(
      new Set([PREFETCH_HINTS_TAG, FETCH_CAPABILITY_TAG, PARTITION_SEGMENTS_TAG, WAL_TRACE_TAG]).size,
    ).toBe(4);
    expect(PREFETCH_HINTS_TAG).toBeGreaterThan(WAL_TRACE_TAG);
  });

  it('round-trips any list of hints, each store written once', () => {
    fc.assert(
      fc.property(fc.array(hintArb, { maxLength: 20 }), (hints) => {
        const data = encodePrefetchHints(hints);
        expect(decodePrefetchHints(data)).toEqual(hints);
        for (const store of new Set(hints.map((h) => h.store))) {
          expect(data.toString('latin1').split(store).length - 1).toBe(1);
        }
      }),
    );
  });

  it('asks for hints in the version it reads, and tells a request that asks another one apart', () => {
    expect(wantsPrefetchHints(encodePrefetchHintsWanted())).toBe(true);
    expect(wantsPrefetchHints(Buffer.from([2]))).toBe(false);
    expect(wantsPrefetchHints(Buffer.alloc(0))).toBe(false);
  });

  it('reads another version, a bad store index, trailing or cut bytes as no hints, never a throw', () => {
    const good = encodePrefetchHints([{ store: 's3://a', objectKey: 'k', size: 10 }]);
    expect(decodePrefetchHints(Buffer.concat([Buffer.from([2]), good.subarray(1)]))).toBeUndefined();
    expect(decodePrefetchHints(Buffer.concat([good, Buffer.from([0])]))).toBeUndefined();
    expect(decodePrefetchHints(good.subarray(0, good.length - 1))).toBeUndefined();
    const w = new Writer({ api: 'test', version: 1, flexible: true }, 16);
    w.int8(1, 'Version');
    w.compactArray(['s3://a'], 'Stores', (w2, s) => w2.compactString(s, 'Store'));
    w.compactArray([0], 'Objects', (w2) => {
      w2.uvarint(1, 'Store');
      w2.compactString('k', 'ObjectKey');
      w2.uvarint(1, 'Size');
    });
    expect(decodePrefetchHints(w.finish())).toBeUndefined();
  });
});
