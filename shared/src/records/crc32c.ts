// CRC-32C (Castagnoli), the checksum of magic v2 record batches (DefaultRecordBatch: it covers the
// batch from the attributes at byte 21 to the end). The native @node-rs/crc32 uses the SSE4.2/ARMv8
// CRC instructions; if its binary cannot be loaded on this platform, a pure TypeScript
// slicing-by-8 implementation gives the same results, only slower (bench/crc32c.bench.ts).

/** `initial` is the CRC of the bytes before `input`, so that crc32c(b, crc32c(a)) === crc32c(a ‖ b). */
export type Crc32c = (input: Uint8Array, initial?: number) => number;

const POLY = 0x82f63b78; // Castagnoli polynomial, bit-reflected.

// TABLE[k * 256 + n]: CRC of byte n followed by k zero bytes; eight lookups consume eight bytes.
const TABLE = (() => {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    for (let k = 1; k < 8; k++) {
      const prev = t[(k - 1) * 256 + n]!;
      t[k * 256 + n] = (prev >>> 8) ^ t[prev & 0xff]!;
    }
  }
  return t;
})();

export const crc32cPure: Crc32c = (input, initial = 0) => {
  const t = TABLE;
  let crc = ~initial;
  let i = 0;
  const end8 = input.length - (input.length % 8);
  while (i < end8) {
    const a = crc ^ (input[i]! | (input[i + 1]! << 8) | (input[i + 2]! << 16) | (input[i + 3]! << 24));
    crc =
      t[1792 + (a & 0xff)]! ^
      t[1536 + ((a >>> 8) & 0xff)]! ^
      t[1280 + ((a >>> 16) & 0xff)]! ^
      t[1024 + (a >>> 24)]! ^
      t[768 + input[i + 4]!]! ^
      t[512 + input[i + 5]!]! ^
      t[256 + input[i + 6]!]! ^
      t[input[i + 7]!]!;
    i += 8;
  }
  while (i < input.length) crc = t[(crc ^ input[i++]!) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
};

async function loadNative(): Promise<Crc32c | undefined> {
  try {
    const m = (await import('@node-rs/crc32')) as { crc32c?: Crc32c };
    return typeof m.crc32c === 'function' ? m.crc32c : undefined;
  } catch {
    // No prebuilt binary for this platform (or it failed to load): the fallback covers it.
    return undefined;
  }
}

/** The native implementation, or undefined when its binary could not be loaded. */
export const crc32cNative: Crc32c | undefined = await loadNative();

export const CRC32C_IMPLEMENTATION: 'native' | 'pure' = crc32cNative === undefined ? 'pure' : 'native';

export const crc32c: Crc32c = crc32cNative ?? crc32cPure;
