import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeFrame, FRAME_SIZE_PREFIX_BYTES } from '../../src/protocol/frame.js';
import { decodeResponseHeader, encodeResponseHeader } from '../../src/protocol/headers.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('encodeFrame', () => {
  it('writes the int32 size of header and body, then both', () => {
    // Given a response header v0 (correlation 7) and a 3-byte body
    const header = encodeResponseHeader({ correlationId: 7 }, 0);
    // When framed
    const frame = encodeFrame(header, hex('0a0b0c'));
    // Then the prefix counts the 7 bytes after it, and the header reads back after the prefix
    expect(frame).toEqual(hex('00000007 00000007 0a0b0c'));
    expect(decodeResponseHeader(frame.subarray(FRAME_SIZE_PREFIX_BYTES), 0).correlationId).toBe(7);
  });

  it('frames nothing as a zero size', () => {
    expect(encodeFrame()).toEqual(hex('00000000'));
    expect(encodeFrame(Buffer.alloc(0), Buffer.alloc(0))).toEqual(hex('00000000'));
  });

  it('gives the bytes of every former way: size prefix + concat of the parts, in a buffer of its own', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 5 }), (arrays) => {
        const parts = arrays.map((a) => Buffer.from(a));
        const size = parts.reduce((n, p) => n + p.length, 0);
        const prefix = Buffer.alloc(FRAME_SIZE_PREFIX_BYTES);
        prefix.writeInt32BE(size, 0);
        const frame = encodeFrame(...parts);
        expect(frame).toEqual(Buffer.concat([prefix, ...parts]));
        // A copy: changing a part afterwards leaves the frame as it was.
        if (parts[0] && parts[0].length > 0) {
          const before = Buffer.from(frame);
          parts[0][0] = parts[0][0]! ^ 0xff;
          expect(frame).toEqual(before);
        }
      }),
    );
  });
});
