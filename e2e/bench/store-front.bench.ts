/**
 * What the store front costs, and whether it adds the latency it should. versitygw behind the
 * front; S3ObjectStore (the client walproxy uses) with 8 requests in flight.
 *
 * - CPU: the front's CPU-seconds (from /proc, all threads) per GB forwarded, with no injected
 *   latency, for 400 KB PUTs and 400 KB GETs (about 1 GB each way by default) and for 16 KB
 *   ranged GETs (per-request cost); versitygw's own CPU beside it.
 * - Latency: with the default `s3-express` model, one request at a time, alternating between
 *   versitygw directly and through the front; the percentiles of both show what the front adds.
 *
 * Run (holds the machine-wide lock): flock /tmp/walproxy-e2e.lock npx tsx e2e/bench/store-front.bench.ts [MB]
 */
import { randomBytes } from 'node:crypto';
import { type ObjectStore, openObjectStore } from '@walproxy/proxy';
import { processCpuSeconds, type S3Server } from '../src/s3/s3-server.js';
import { startStoreFront } from '../src/s3/store-front.js';
import { startVersitygw } from '../src/s3/versitygw.js';

const MEGABYTES = Number(process.argv[2] ?? 1024);
const OBJECT_BYTES = 400 * 1024;
const OBJECTS = Math.ceil((MEGABYTES * 1024 * 1024) / OBJECT_BYTES);
const RANGED_GETS = 5_000;
const RANGE = { offset: 100_000, length: 16 * 1024 };
const LATENCY_REQUESTS = 400;
const IN_FLIGHT = 8;
/** Keys are reused (overwritten) so a GB of PUTs does not leave a GB on disk. */
const KEYS = 64;
const BUCKET = 'walproxy-bench';

function open(endpoint: string): ObjectStore {
  return openObjectStore(`s3://${BUCKET}/bench`, {
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    conditionalPut: false,
  });
}

/** Runs `count` calls of `one(i)`, `inFlight` at a time. */
async function run(count: number, one: (i: number) => Promise<void>, inFlight = IN_FLIGHT): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await one(next++);
    }),
  );
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);

async function main(): Promise<void> {
  const server: S3Server = await startVersitygw();
  const front = await startStoreFront({ upstream: server, latency: 'none' });
  const body = randomBytes(OBJECT_BYTES);
  try {
    await server.createBucket(BUCKET);
    const store = open(front.endpoint);
    console.log(
      `store front CPU, versitygw upstream, ${IN_FLIGHT} in flight, ${OBJECTS} objects of ${OBJECT_BYTES} B`,
    );
    console.log(
      '| direction | requests | MB | wall s | front CPU s | front CPU s/GB | front µs/request | versitygw CPU s/GB |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
    const arm = async (
      name: string,
      requests: number,
      bytesEach: number,
      one: (i: number) => Promise<void>,
    ) => {
      const frontBefore = front.cpuSeconds();
      const serverBefore = processCpuSeconds(server.pid);
      const start = performance.now();
      await run(requests, one);
      const wall = (performance.now() - start) / 1000;
      const frontCpu = front.cpuSeconds() - frontBefore;
      const serverCpu = processCpuSeconds(server.pid) - serverBefore;
      const gb = (requests * bytesEach) / 1e9;
      console.log(
        `| ${name} | ${requests} | ${fmt((requests * bytesEach) / 1e6, 0)} | ${fmt(wall, 1)} | ${fmt(frontCpu)} | ${fmt(frontCpu / gb)} | ${fmt((frontCpu / requests) * 1e6, 0)} | ${fmt(serverCpu / gb)} |`,
      );
    };
    // Warm-up: JIT, connections, the keys on disk.
    await run(KEYS, (i) => store.put(`k${i}`, body));
    await run(KEYS, async (i) => void (await store.get(`k${i}`)));
    await arm('PUT 400 KB', OBJECTS, OBJECT_BYTES, (i) => store.put(`k${i % KEYS}`, body));
    await arm('GET 400 KB', OBJECTS, OBJECT_BYTES, async (i) => void (await store.get(`k${i % KEYS}`)));
    await arm('GET 16 KB range', RANGED_GETS, RANGE.length, async (i) => {
      await store.get(`k${i % KEYS}`, RANGE);
    });
    await store.close();
  } finally {
    await front.stop();
  }

  // Latency: a second front with the default model, requests alternating direct / through it.
  const slow = await startStoreFront({ upstream: server });
  try {
    const direct = open(server.endpoint);
    const through = open(slow.endpoint);
    const times = {
      direct: { put: [] as number[], get: [] as number[] },
      front: { put: [] as number[], get: [] as number[] },
    };
    const timed = async (list: number[], call: () => Promise<unknown>) => {
      const start = performance.now();
      await call();
      list.push(performance.now() - start);
    };
    await run(
      LATENCY_REQUESTS,
      async (i) => {
        const key = `k${i % KEYS}`;
        await timed(times.direct.put, () => direct.put(key, body));
        await timed(times.front.put, () => through.put(key, body));
        await timed(times.direct.get, () => direct.get(key, RANGE));
        await timed(times.front.get, () => through.get(key, RANGE));
      },
      1,
    );
    console.log(
      `\nlatency, ms, ${LATENCY_REQUESTS} each, one at a time, alternating, default s3-express model (p50 3, p99 ~14)`,
    );
    console.log('| request | direct p50 | p95 | p99 | front p50 | p95 | p99 |');
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const op of ['put', 'get'] as const) {
      const d = times.direct[op].sort((a, b) => a - b);
      const f = times.front[op].sort((a, b) => a - b);
      const row = (xs: number[]) => [50, 95, 99].map((p) => fmt(percentile(xs, p), 1)).join(' | ');
      console.log(`| ${op === 'put' ? 'PUT 400 KB' : 'GET 16 KB range'} | ${row(d)} | ${row(f)} |`);
    }
    await direct.close();
    await through.close();
  } finally {
    await slow.stop();
    await server.stop();
  }
}

await main();
