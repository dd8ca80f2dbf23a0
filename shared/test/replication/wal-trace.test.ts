import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Writer } from '../../src/protocol/writer.js';
import {
  decodeWalTrace,
  encodeWalTrace,
  WAL_TRACE_CONTEXT_BYTES,
  WAL_TRACE_TAG,
  type WalTraceContext,
} from '../../src/replication/wal-trace.js';

const hex = (bytes: number) =>
  fc
    .uint8Array({ minLength: bytes, maxLength: bytes })
    .filter((b) => b.some((x) => x !== 0))
    .map((b) => Buffer.from(b).toString('hex'));

const contextArb: fc.Arbitrary<WalTraceContext> = fc.record({
  traceId: hex(16),
  spanId: hex(8),
  traceFlags: fc.nat({ max: 0xff }),
});

const upload: WalTraceContext = {
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  traceFlags: 1,
};

describe('walproxy trace tag', () => {
  it('round-trips any list of span contexts', () => {
    fc.assert(
      fc.property(fc.array(contextArb, { maxLength: 40 }), (uploads) => {
        expect(decodeWalTrace(encodeWalTrace(uploads))).toEqual(uploads);
      }),
    );
  });

  it('is ignored, not an error, in a version this build does not read', () => {
    // Given the tag as a later walproxy might write it
    const data = encodeWalTrace([upload]);
    data[0] = 2;
    // Then the follower side reads nothing from it (and fills the references all the same)
    expect(decodeWalTrace(data)).toBeUndefined();
  });

  it('is ignored when truncated, padded or corrupt, never throws on arbitrary bytes', () => {
    const data = encodeWalTrace([upload]);
    expect(decodeWalTrace(data.subarray(0, data.length - 1))).toBeUndefined();
    expect(decodeWalTrace(Buffer.concat([data, Buffer.from([0])]))).toBeUndefined();
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 120 }), (bytes) => {
        const out = decodeWalTrace(Buffer.from(bytes));
        if (out !== undefined) expect(Array.isArray(out)).toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });

  it('drops all-zero ids (invalid in W3C trace context) and refuses to write them', () => {
    // Given a tag whose second context has an all-zero span id
    const w = new Writer(undefined, 64);
    w.int8(1, 'Version');
    w.uvarint(3, 'Uploads');
    for (const spanId of ['00f067aa0ba902b7', '0000000000000000']) {
      w.uuid(upload.traceId, 'TraceId');
      w.raw(Buffer.from(spanId, 'hex'));
      w.int8(1, 'TraceFlags');
    }
    // Then only the valid one is read
    expect(decodeWalTrace(w.finish())).toEqual([upload]);
    expect(() => encodeWalTrace([{ ...upload, traceId: '0'.repeat(32) }])).toThrow(/W3C/);
  });

  it('costs 31 bytes in a response for one upload, 25 more per further upload', () => {
    // The tag as it sits in the response's top-level tagged fields: tag number, size, data
    // (the tag count goes from 0 to 1, the same one byte).
    const onWire = (n: number) => {
      const data = encodeWalTrace(Array.from({ length: n }, () => upload));
      const w = new Writer(undefined, 16);
      w.uvarint(WAL_TRACE_TAG, 'Tag');
      w.uvarint(data.length, 'Size');
      return w.finish().length + data.length;
    };
    expect(WAL_TRACE_CONTEXT_BYTES).toBe(25);
    expect(onWire(1)).toBe(31);
    expect(onWire(2)).toBe(56);
    expect(onWire(4)).toBe(106);
    console.log(
      `trace tag bytes per response: 1 upload ${onWire(1)}, 2 ${onWire(2)}, 4 ${onWire(4)}, 32 ${onWire(32)}`,
    );
  });
});
