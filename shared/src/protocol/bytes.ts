// Unchecked big-endian reads for hot paths whose callers have already checked the bounds. Node's
// Buffer.readInt32BE re-validates its offset on every call, which shows in a batch walk (measured
// in bench/fetch-walk.bench.ts).

export function int16At(b: Buffer, o: number): number {
  return (((b[o]! << 8) | b[o + 1]!) << 16) >> 16;
}

export function int32At(b: Buffer, o: number): number {
  return (b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!;
}

/** One BigInt conversion instead of three when the value fits in a double (|v| < 2^53). */
export function int64At(b: Buffer, o: number): bigint {
  const hi = int32At(b, o);
  if (hi >= -0x200000 && hi < 0x200000) return BigInt(hi * 4294967296 + (int32At(b, o + 4) >>> 0));
  return b.readBigInt64BE(o);
}
