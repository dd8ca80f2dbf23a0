/**
 * `make bench` (WAL writer, issue #4): the same Java perf producer workload, acks=all, RF=3,
 * interleaved in one run on one cluster over four paths:
 *   direct          no sidecar on the client path (DIRECT listener)
 *   sidecar         through the sidecars, topic not in the WAL
 *   wal             WAL topic, durable ack off (response as soon as the broker answers)
 *   wal+durable     WAL topic, durable ack on (response held until the object is stored)
 * and, for the WAL arms, the objects written in each run: count, size distribution, PUTs/s.
 * The S3 server is moto on loopback: its latency is not S3 Express One Zone's.
 * Prints figures only; recorded in docs/benchmarks.md.
 */
import { parseWalObjectKey } from '@walproxy/proxy';
import { type ProducerPerfResult, producerPerf } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { startMoto } from '../src/s3/moto.js';
import { openE2eStore } from '../src/wal/inspect.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const RECORDS = Number(process.env.BENCH_RECORDS ?? 600_000);
const RECORD_SIZE = 512;
/** Records/s cap: 40,000 x 512 B = 20.5 MB/s, the issue's rate. */
const RATE = Number(process.env.BENCH_RATE ?? 40_000);
const LINGER_MS = Number(process.env.BENCH_WAL_LINGER_MS ?? 10);

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );

async function main(): Promise<void> {
  const moto = await startMoto();
  const s3 = {
    endpoint: moto.endpoint,
    bucket: 'walproxy-bench',
    prefix: 'wal/',
    walTopicGlob: 'wal-*',
    pid: moto.pid,
  };
  await moto.createBucket(s3.bucket);
  const cluster = await KafkaCluster.start({
    sidecars: true,
    jvmProfile: 'throughput',
    sidecarArgs: () =>
      walSidecarArgs(s3, [`--wal-linger-ms=${LINGER_MS}`, '--topic-config=wal-fast-*:durable.ack=false']),
    sidecarEnv: walSidecarEnv(),
  });
  const store = openE2eStore(s3);
  try {
    const arms = [
      { name: 'direct', bootstrap: cluster.directBootstrap(), topic: 'plain-direct' },
      { name: 'sidecar', bootstrap: cluster.bootstrap(), topic: 'plain-sidecar' },
      { name: 'wal', bootstrap: cluster.bootstrap(), topic: 'wal-fast' },
      { name: 'wal+durable', bootstrap: cluster.bootstrap(), topic: 'wal-durable' },
    ];
    const results = new Map<
      string,
      { runs: ProducerPerfResult[]; objects: number[]; putsPerSec: number[] }
    >();
    for (const arm of arms) results.set(arm.name, { runs: [], objects: [], putsPerSec: [] });
    // One warm-up run per path so the JIT and the page cache are warm for every measured run.
    for (let round = -1; round < ROUNDS; round++) {
      for (const arm of arms) {
        const topic = `${arm.topic}-${round + 1}`;
        await createTopic(cluster.directBootstrap(), topic, { partitions: 6 });
        const started = Date.now();
        const run = await producerPerf({
          bootstrap: arm.bootstrap,
          topic,
          records: round < 0 ? RECORDS / 4 : RECORDS,
          recordSize: RECORD_SIZE,
          throughput: RATE,
          props: { 'linger.ms': 5, 'batch.size': 65_536 },
        });
        const ended = Date.now();
        if (round < 0) continue;
        const r = results.get(arm.name)!;
        r.runs.push(run);
        if (arm.name.startsWith('wal')) {
          // Objects of this run: key timestamps inside its window (one arm runs at a time).
          const sizes: number[] = [];
          for await (const o of store.list('')) {
            const created = parseWalObjectKey(o.key)?.createdAtMs ?? 0;
            if (created >= started && created <= ended + 1_000) sizes.push(o.size);
          }
          r.objects.push(...sizes);
          r.putsPerSec.push(sizes.length / ((ended - started) / 1000));
        }
        console.error(
          `round ${round + 1} ${arm.name}: ${run.mbPerSec} MB/s, p50 ${run.p50Ms} ms, p99 ${run.p99Ms} ms`,
        );
      }
    }
    const walled = [...results.values()].reduce((n, r) => n + r.objects.length, 0);
    console.log(
      `Kafka ${cluster.version}; ${ROUNDS} interleaved rounds of ${RECORDS} x ${RECORD_SIZE} B at <= ${RATE} rec/s (${((RATE * RECORD_SIZE) / 1e6).toFixed(1)} MB/s), acks=all, RF=3, 6 partitions; WAL linger ${LINGER_MS} ms, target 400 KB; S3 = moto on loopback (medians over rounds)`,
    );
    console.log(
      '| path | MB/s | p50 ms | p99 ms | p99.9 ms | WAL objects | object size p10 / p50 / p90 (KB) | PUTs/s |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    for (const [name, r] of results) {
      const sizes = [...r.objects].sort((a, b) => a - b);
      const kb = (n: number) => (n / 1000).toFixed(0);
      console.log(
        `| ${name} | ${median(r.runs.map((x) => x.mbPerSec)).toFixed(1)} | ${median(r.runs.map((x) => x.p50Ms))} | ${median(r.runs.map((x) => x.p99Ms))} | ${median(r.runs.map((x) => x.p999Ms))} | ${sizes.length || '-'} | ${sizes.length ? `${kb(percentile(sizes, 0.1))} / ${kb(percentile(sizes, 0.5))} / ${kb(percentile(sizes, 0.9))}` : '-'} | ${r.putsPerSec.length ? median(r.putsPerSec).toFixed(0) : '-'} |`,
      );
    }
    const counters = await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id)));
    const uploaded = counters.reduce((n, c) => n + (c.wal?.writer.bytesUploaded ?? 0), 0);
    console.log(
      `WAL bytes uploaded in all: ${(uploaded / 1e9).toFixed(2)} GB in ${walled} objects (measured runs)`,
    );
  } finally {
    await cluster.stop();
    await moto.stop();
  }
}

await main();
