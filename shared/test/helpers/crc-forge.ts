// Forges CRC-32C collisions for tests: CRC-32C is affine over GF(2), so for a fixed length the
// change in CRC caused by flipping bits of four chosen bytes is a linear map of those 32 bits, and
// it is invertible for 32 consecutive bits. Solving it lets a test make two different batches with
// the same CRC, the way a producer choosing its bytes could.
import { crc32c } from '../../src/records/crc32c.js';
import { sampleBatch } from './record-batches.js';

/**
 * Rewrites `buf[at..at+4)` so that crc32c(buf.subarray(from)) equals `target`. Returns `buf`.
 */
export function forceCrc32c(buf: Buffer, from: number, at: number, target: number): Buffer {
  const crcOf = () => crc32c(buf.subarray(from));
  const base = crcOf();
  // Column k: the CRC change that flipping bit k of the four bytes causes.
  const columns: number[] = [];
  for (let k = 0; k < 32; k++) {
    const byte = at + (k >> 3);
    buf[byte]! ^= 1 << (k & 7);
    columns.push((crcOf() ^ base) >>> 0);
    buf[byte]! ^= 1 << (k & 7);
  }
  // Gaussian elimination: rows are (column value, which input bits make it).
  const rows = columns.map((value, k) => ({ value, bits: 1 << k }));
  const basis: Array<{ value: number; bits: number } | undefined> = new Array(32);
  for (let row of rows) {
    for (let bit = 31; bit >= 0 && row.value !== 0; bit--) {
      if (((row.value >>> bit) & 1) === 0) continue;
      const pivot = basis[bit];
      if (pivot === undefined) {
        basis[bit] = row;
        break;
      }
      row = { value: (row.value ^ pivot.value) >>> 0, bits: row.bits ^ pivot.bits };
    }
  }
  let want = (base ^ target) >>> 0;
  let flip = 0;
  for (let bit = 31; bit >= 0; bit--) {
    if (((want >>> bit) & 1) === 0) continue;
    const pivot = basis[bit];
    if (pivot === undefined) throw new Error('these four bytes cannot reach every CRC');
    want = (want ^ pivot.value) >>> 0;
    flip ^= pivot.bits;
  }
  for (let k = 0; k < 32; k++) if ((flip >>> k) & 1) buf[at + (k >> 3)]! ^= 1 << (k & 7);
  if (crcOf() !== target >>> 0) throw new Error('CRC forging failed');
  return buf;
}

/**
 * Two batches a non-idempotent producer could send in the same millisecond: same length and
 * header bytes 17..61 (no producer id, same timestamps and count), other records, and four bytes
 * of the second's last value forged so that both have the same CRC-32C.
 */
export function collidingPair(): [Buffer, Buffer] {
  const a = sampleBatch(0n, 3, 100, 1);
  a.writeBigInt64BE(-1n, 43);
  a.writeInt16BE(-1, 51);
  a.writeInt32BE(-1, 53);
  a.writeUInt32BE(crc32c(a.subarray(21)), 17);
  const b = Buffer.from(a);
  b.fill(0x55, b.length - 40, b.length - 10);
  forceCrc32c(b, 21, b.length - 10, a.readUInt32BE(17));
  return [a, b];
}
