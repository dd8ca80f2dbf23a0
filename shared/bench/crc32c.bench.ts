// CRC-32C throughput on 1 MiB buffers: the native @node-rs/crc32 (hardware CRC instructions) against
// the pure TypeScript slicing-by-8 fallback used when the native binary cannot load.
// Run: npx tsx shared/bench/crc32c.bench.ts

import { randomFillSync } from 'node:crypto';
import { CRC32C_IMPLEMENTATION, type Crc32c, crc32cNative, crc32cPure } from '../src/index.js';

const SIZE = 1024 * 1024;
const BUFFERS = 8;
const ROUNDS = 5;
const ROUND_MS = 500;

const buffers = Array.from({ length: BUFFERS }, () => randomFillSync(Buffer.allocUnsafe(SIZE)));
let sink = 0;

function nsPerBuffer(fn: Crc32c, ms: number): number {
  const deadline = process.hrtime.bigint() + BigInt(ms) * 1_000_000n;
  let calls = 0;
  const start = process.hrtime.bigint();
  let now = start;
  while (now < deadline) {
    for (const b of buffers) sink ^= fn(b);
    calls += buffers.length;
    now = process.hrtime.bigint();
  }
  return Number(now - start) / calls;
}

const impls: [string, Crc32c][] = [['pure', crc32cPure]];
if (crc32cNative !== undefined) impls.unshift(['native', crc32cNative]);

for (const [, fn] of impls) nsPerBuffer(fn, 300);
const samples = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, fn] of impls)
    samples.set(name, [...(samples.get(name) ?? []), nsPerBuffer(fn, ROUND_MS)]);
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

console.log(
  `CRC-32C on ${SIZE} byte buffers, median of ${ROUNDS} rounds; crc32c() uses: ${CRC32C_IMPLEMENTATION}\n`,
);
console.log('impl      µs/MiB     GB/s');
const gbps = new Map<string, number>();
for (const [name] of impls) {
  const ns = median(samples.get(name)!);
  gbps.set(name, SIZE / ns);
  console.log(
    `${name.padEnd(7)} ${(ns / 1000).toFixed(1).padStart(8)} ${(SIZE / ns).toFixed(2).padStart(8)}`,
  );
}
if (gbps.has('native')) {
  console.log(`\nnative/pure: ${(gbps.get('native')! / gbps.get('pure')!).toFixed(1)}x`);
}
if (sink === 0.5) console.log(sink);
