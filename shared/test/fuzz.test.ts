// Hostile input into every decoder: whatever the bytes, a decoder either throws a ProtocolError or
// returns a message that encodes back to exactly those bytes. Nothing else may escape (invariant 6:
// bad input gets a clear error, never a crash), and no length may turn into an allocation.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeRequestHeader,
  decodeResponseHeader,
  encodeRequestHeader,
  encodeResponseHeader,
  ProtocolError,
  peekProduceAcks,
  peekRequestKey,
  recordBatches,
} from '../src/index.js';
import { CODECS, type Codec, encodeWith } from './helpers/codecs.js';
import { sampleBatch } from './helpers/record-batches.js';

/** Runs `fn`; a ProtocolError is an accepted outcome, anything else is rethrown. */
function rejectsOnlyWithProtocolError<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch (e) {
    if (e instanceof ProtocolError) return undefined;
    throw e;
  }
}

function decodeOrReject(codec: Codec, body: Buffer, version: number): void {
  const msg = rejectsOnlyWithProtocolError(() => codec.decode(body, version));
  if (msg !== undefined) expect(encodeWith(codec, msg, version).equals(body)).toBe(true);
}

type Mutation =
  | { kind: 'flip'; at: number; xor: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'delete'; at: number; count: number }
  | { kind: 'huge'; at: number; compact: boolean };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('insert' as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 6 }),
  }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constant('huge' as const), at: fc.nat(), compact: fc.boolean() }),
);

// 2^31-1 as an int32 length/count, or 2^32-1 as an unsigned varint.
const HUGE_INT32 = Buffer.from('7fffffff', 'hex');
const HUGE_UVARINT = Buffer.from('ffffffff0f', 'hex');

function mutate(bytes: Buffer, m: Mutation): Buffer {
  const at = bytes.length === 0 ? 0 : m.at % (bytes.length + 1);
  switch (m.kind) {
    case 'flip': {
      if (bytes.length === 0) return bytes;
      const out = Buffer.from(bytes);
      const i = at % bytes.length;
      out[i] = out[i]! ^ m.xor;
      return out;
    }
    case 'truncate':
      return bytes.subarray(0, at);
    case 'insert':
      return Buffer.concat([bytes.subarray(0, at), m.bytes, bytes.subarray(at)]);
    case 'delete':
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + m.count)]);
    case 'huge': {
      // Overwrites whatever is there with a huge length, as a hostile peer would declare one.
      const huge = m.compact ? HUGE_UVARINT : HUGE_INT32;
      return Buffer.concat([bytes.subarray(0, at), huge, bytes.subarray(at + huge.length)]);
    }
  }
}

describe.each(CODECS)('$name decoder under hostile input', (codec) => {
  it.each(codec.versions)('v%i: arbitrary bytes give a ProtocolError or an exact round trip', (v) => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => decodeOrReject(codec, Buffer.from(bytes), v)),
      { numRuns: 150 },
    );
  });

  it.each(codec.versions)('v%i: mutated valid messages give a ProtocolError or an exact round trip', (v) => {
    fc.assert(
      fc.property(
        codec.arbitrary(v),
        fc.array(mutation, { minLength: 1, maxLength: 3 }),
        (msg, mutations) => {
          let bytes = encodeWith(codec, msg, v);
          for (const m of mutations) bytes = mutate(bytes, m);
          decodeOrReject(codec, bytes, v);
        },
      ),
      { numRuns: 150 },
    );
  });

  it.each(codec.versions)(
    'v%i: a huge length at any offset of a valid message is refused, not allocated',
    (v) => {
      fc.assert(
        fc.property(codec.arbitrary(v), (msg) => {
          const bytes = encodeWith(codec, msg, v);
          for (let at = 0; at < bytes.length; at++) {
            for (const compact of [false, true])
              decodeOrReject(codec, mutate(bytes, { kind: 'huge', at, compact }), v);
          }
        }),
        { numRuns: 10 },
      );
    },
  );
});

describe('headers under hostile input', () => {
  it('request frames give a ProtocolError or a header that re-encodes exactly', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const frame = Buffer.from(bytes);
        rejectsOnlyWithProtocolError(() => peekRequestKey(frame));
        rejectsOnlyWithProtocolError(() => peekProduceAcks(frame));
        const h = rejectsOnlyWithProtocolError(() => decodeRequestHeader(frame));
        if (h !== undefined) expect(encodeRequestHeader(h)).toEqual(frame.subarray(0, h.headerLength));
      }),
      { numRuns: 2000 },
    );
  });

  it('request frames of known keys with a mangled client id or tag section are refused cleanly', () => {
    const key = fc.tuple(fc.integer({ min: 0, max: 92 }), fc.integer({ min: 0, max: 20 }));
    fc.assert(
      fc.property(key, fc.uint8Array({ maxLength: 40 }), ([apiKey, apiVersion], rest) => {
        const head = Buffer.alloc(8);
        head.writeInt16BE(apiKey, 0);
        head.writeInt16BE(apiVersion, 2);
        const frame = Buffer.concat([head, rest]);
        rejectsOnlyWithProtocolError(() => peekProduceAcks(frame));
        const h = rejectsOnlyWithProtocolError(() => decodeRequestHeader(frame));
        if (h !== undefined) expect(encodeRequestHeader(h)).toEqual(frame.subarray(0, h.headerLength));
      }),
      { numRuns: 2000 },
    );
  });

  it('response frames give a ProtocolError or a header that re-encodes exactly', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 32 }),
        fc.constantFrom(0 as const, 1 as const),
        (bytes, version) => {
          const frame = Buffer.from(bytes);
          const h = rejectsOnlyWithProtocolError(() => decodeResponseHeader(frame, version));
          if (h !== undefined)
            expect(encodeResponseHeader(h, version)).toEqual(frame.subarray(0, h.headerLength));
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('record batch iteration under hostile input', () => {
  it('arbitrary bytes give batches, a partial batch, or a ProtocolError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => {
        rejectsOnlyWithProtocolError(() => {
          for (const b of recordBatches(Buffer.from(bytes))) if (!b.partial) b.isCrcValid();
        });
      }),
      { numRuns: 1000 },
    );
  });

  it('mutated real batches give batches, a partial batch, or a ProtocolError', () => {
    const blob = Buffer.concat([sampleBatch(0n, 2, 20), sampleBatch(2n, 3, 5, 2)]);
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), (mutations) => {
        let bytes: Buffer = blob;
        for (const m of mutations) bytes = mutate(bytes, m);
        rejectsOnlyWithProtocolError(() => {
          for (const b of recordBatches(bytes)) if (!b.partial) b.isCrcValid();
        });
      }),
      { numRuns: 1000 },
    );
  });
});
