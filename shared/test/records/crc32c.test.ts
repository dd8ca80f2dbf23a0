import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CRC32C_IMPLEMENTATION, crc32c, crc32cNative, crc32cPure } from '../../src/records/crc32c.js';

// RFC 3720 (iSCSI) B.4 test vectors, plus the classic check value.
const VECTORS: [string, Buffer, number][] = [
  ['"123456789"', Buffer.from('123456789'), 0xe3069283],
  ['empty', Buffer.alloc(0), 0],
  ['32 zero bytes', Buffer.alloc(32, 0x00), 0x8a9136aa],
  ['32 0xff bytes', Buffer.alloc(32, 0xff), 0x62a8ab43],
  ['0..31', Buffer.from(Array.from({ length: 32 }, (_, i) => i)), 0x46dd794e],
  ['31..0', Buffer.from(Array.from({ length: 32 }, (_, i) => 31 - i)), 0x113fdb5c],
];

describe('crc32c', () => {
  it('loads the native implementation on this platform', () => {
    expect(CRC32C_IMPLEMENTATION).toBe('native');
    expect(crc32cNative).toBeDefined();
    expect(crc32c).toBe(crc32cNative);
  });

  it.each(VECTORS)('gives the known value for %s, native and pure', (_, input, expected) => {
    expect(crc32cPure(input)).toBe(expected);
    expect(crc32cNative!(input)).toBe(expected);
  });

  it('gives the same value native and pure on random inputs, including views at odd offsets', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), fc.nat(7), (bytes, skip) => {
        const view = Buffer.from(bytes).subarray(Math.min(skip, bytes.length));
        expect(crc32cPure(view)).toBe(crc32cNative!(view));
      }),
      { numRuns: 300 },
    );
  });

  it('continues a CRC over split input: crc32c(b, crc32c(a)) = crc32c(a ‖ b)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), fc.uint8Array({ maxLength: 512 }), (a, b) => {
        const whole = crc32cPure(Buffer.concat([a, b]));
        expect(crc32cPure(b, crc32cPure(a))).toBe(whole);
        expect(crc32cNative!(b, crc32cNative!(a))).toBe(whole);
      }),
    );
  });
});
