// How much does looking inside a Fetch response cost next to just copying it? Builds a ~1 MiB
// Fetch v17 response body (100 partitions of real-looking batches), then times, in the same run:
//   copy   Buffer.allocUnsafe + Buffer.copy of the body (the floor for forwarding bytes)
//   decode decodeFetchResponse only
//   walk   decode + read every batch header (what the leader-side filter does per batch)
//   encode encodeFetchResponse of an already decoded message
//   full   decode + walk + re-encode unchanged
// Run: npx tsx shared/bench/fetch-walk.bench.ts
//
// Most of a 1 MiB copy's time can be page faults on the fresh output buffer, depending on whether
// glibc reuses freed memory or returns it to the kernel. To see the codec's CPU cost without them:
//   MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_MMAP_THRESHOLD_=268435456 npx tsx shared/bench/fetch-walk.bench.ts

import { decodeFetchResponse, encodeFetchResponse, type FetchResponse, recordBatches } from '../src/index.js';
import { sampleBatch } from '../test/helpers/record-batches.js';

const VERSION = 17;
const PARTITIONS = 100;
const WARMUP_MS = 1500;
const ROUNDS = 7;
const ROUND_MS = 400;

function buildBody(): Buffer {
  const partitions = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const batches: Buffer[] = [];
    let offset = BigInt(p * 1000);
    // About 10 KiB per partition in producer batches of roughly 1-12 KiB (the Java producer's
    // batch.size is 16 KiB; linger and load decide how full they get); the last one cut short, as
    // brokers slice the log by bytes.
    let size = 0;
    for (let i = 0; size < 10_240; i++) {
      const count = 8 + ((p * 7 + i * 13) % 53);
      const batch = sampleBatch(offset, count, 100 + ((p + i * 17) % 100), p * 31 + i);
      batches.push(batch);
      size += batch.length;
      offset += BigInt(count);
    }
    const last = batches.pop()!;
    batches.push(last.subarray(0, last.length >> 1));
    partitions.push({
      partitionIndex: p,
      errorCode: 0,
      highWatermark: offset,
      lastStableOffset: offset,
      logStartOffset: 0n,
      abortedTransactions: null,
      preferredReadReplica: -1,
      records: Buffer.concat(batches),
    });
  }
  const msg: FetchResponse = {
    throttleTimeMs: 0,
    errorCode: 0,
    sessionId: 42,
    responses: [
      { topicId: '0123456789abcdef0123456789abcdef', partitions: partitions.slice(0, 50) },
      { topicId: 'fedcba9876543210fedcba9876543210', partitions: partitions.slice(50) },
    ],
  };
  return encodeFetchResponse(msg, VERSION);
}

let sink = 0;

function walk(msg: FetchResponse): void {
  for (const t of msg.responses) {
    for (const p of t.partitions) {
      if (p.records === null) continue;
      for (const b of recordBatches(p.records)) {
        if (b.partial) {
          sink += b.bytes.length;
          continue;
        }
        // The matching key of the leader-side filter: producer, sequence, count, delta, body length.
        sink += Number(b.producerId & 0xffn) + b.producerEpoch + b.baseSequence + b.recordCount;
        sink += b.lastOffsetDelta + b.size - 61 + b.partitionLeaderEpoch + b.crc;
      }
    }
  }
}

const body = buildBody();
const decoded = decodeFetchResponse(body, VERSION);
let batchCount = 0;
for (const t of decoded.responses)
  for (const p of t.partitions) for (const b of recordBatches(p.records!)) if (!b.partial) batchCount++;

const cases: Record<string, () => void> = {
  copy: () => {
    const out = Buffer.allocUnsafe(body.length);
    body.copy(out);
    sink += out[out.length - 1]!;
  },
  decode: () => {
    sink += decodeFetchResponse(body, VERSION).responses.length;
  },
  walk: () => walk(decodeFetchResponse(body, VERSION)),
  encode: () => {
    sink += encodeFetchResponse(decoded, VERSION).length;
  },
  full: () => {
    const msg = decodeFetchResponse(body, VERSION);
    walk(msg);
    const out = encodeFetchResponse(msg, VERSION);
    if (out.length !== body.length) throw new Error('re-encoding changed the size');
  },
};

// Every iteration runs each case once, timing each call, so that all cases see the same heap and
// allocator state. Timed in separate blocks instead, a case whose neighbours allocate a lot pays
// page faults for its fresh 1 MiB output buffer that a copy alone does not (glibc hands the copy
// back the chunk it just freed): a 5x swing for the same code. Both are printed.
function interleaved(ms: number): Map<string, number> {
  const entries = Object.entries(cases);
  const totals = entries.map(() => 0);
  let iterations = 0;
  const deadline = process.hrtime.bigint() + BigInt(ms) * 1_000_000n;
  while (process.hrtime.bigint() < deadline) {
    for (let i = 0; i < entries.length; i++) {
      const t0 = process.hrtime.bigint();
      entries[i]![1]();
      totals[i]! += Number(process.hrtime.bigint() - t0);
    }
    iterations++;
  }
  return new Map(entries.map(([name], i) => [name, totals[i]! / iterations]));
}

function block(fn: () => void, ms: number): number {
  const deadline = process.hrtime.bigint() + BigInt(ms) * 1_000_000n;
  let calls = 0;
  const start = process.hrtime.bigint();
  let now = start;
  while (now < deadline) {
    for (let i = 0; i < 10; i++) fn();
    calls += 10;
    now = process.hrtime.bigint();
  }
  return Number(now - start) / calls;
}

// Same-run check that re-encoding is byte-exact before timing anything.
if (!encodeFetchResponse(decodeFetchResponse(body, VERSION), VERSION).equals(body)) {
  throw new Error('round trip is not byte-exact');
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const mbps = (ns: number): string => ((body.length * 1e3) / ns).toFixed(0);

interleaved(WARMUP_MS);
const samples = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, ns] of interleaved(ROUND_MS)) samples.set(name, [...(samples.get(name) ?? []), ns]);
}
const blocks = { copy: [] as number[], full: [] as number[] };
for (let round = 0; round < ROUNDS; round++) {
  blocks.copy.push(block(cases.copy!, ROUND_MS / 2));
  blocks.full.push(block(cases.full!, ROUND_MS / 2));
}

console.log(
  `Fetch v${VERSION} response body: ${body.length} bytes, ${PARTITIONS} partitions, ${batchCount} complete batches + ${PARTITIONS} partial`,
);
console.log(`median of ${ROUNDS} rounds of ${ROUND_MS} ms, Node ${process.version}\n`);
console.log('interleaved   µs/op     MB/s  vs copy');
const copyNs = median(samples.get('copy')!);
for (const [name, xs] of samples) {
  const ns = median(xs);
  console.log(
    `${name.padEnd(11)} ${(ns / 1000).toFixed(1).padStart(7)} ${mbps(ns).padStart(8)} ${(copyNs / ns).toFixed(2).padStart(8)}`,
  );
}
const [blockCopy, blockFull] = [median(blocks.copy), median(blocks.full)];
console.log('\nseparate blocks');
console.log(
  `copy        ${(blockCopy / 1000).toFixed(1).padStart(7)} ${mbps(blockCopy).padStart(8)}     1.00`,
);
console.log(
  `full        ${(blockFull / 1000).toFixed(1).padStart(7)} ${mbps(blockFull).padStart(8)} ${(blockCopy / blockFull).toFixed(2).padStart(8)}`,
);
console.log(
  `\nfull/copy throughput ratio: ${(copyNs / median(samples.get('full')!)).toFixed(2)} interleaved, ${(blockCopy / blockFull).toFixed(2)} in blocks (aim >= 0.5; checksum ${sink % 1000})`,
);
