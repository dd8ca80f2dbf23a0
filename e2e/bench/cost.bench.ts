/**
 * `make bench-cost` (issue #14): what cost-aware replication costs and saves, as measured, at 0.1,
 * 1, 5 and 10 MB/s per broker (issue #26: 5 MB/s is what this machine carries without saturating
 * stock; 30 MB/s reached ~12 and measured the saturated machine, not the policy). Three zones (a network namespace per broker pod, the kernel counts
 * what crosses), a store front with S3 Express One Zone-like latency in front of versitygw, and
 * every partition led by broker 1, so that one sidecar seals at the whole rate ("per broker").
 * At each rate, interleaved arm by arm: a topic outside the WAL (stock replication through the
 * same sidecars) and mode=auto WAL topics with latency budgets of 25 and 50 ms (the sealing
 * policy decides WAL or inline, and when to seal), in BENCH_ROUNDS rounds that run the arms
 * forward, then backward (ABC CBA…), so that drift of the shared machine (the first runs after a
 * start are slower) falls on every arm alike; before the first rate, a warm-up run on a topic of
 * its own. The rounds of an arm are priced as one (their counts summed); two rounds of the stock
 * arm priced against each other give the noise floor of the saving. Each arm is priced from the sidecars' own
 * counters and the kernel's byte counts (e2e/src/cost/measure.ts: walproxy's replication — store,
 * cross-zone residue, the WAL path's CPU beyond the stock arm's — against the stock arm's
 * cross-zone bytes), scaled to a 30-day month at the rate reached. Latency added: the WAL arm's
 * ProducerPerformance p50 / p99 (acks=all, per record) minus the stock arm's.
 *
 * Writes `.runs/bench/cost.json`: {"rates": [{"mbps_per_broker", "object_bytes_p50",
 * "saved_fraction", "p99_added_ms", "budget_ms", "objects", "puts"}, ...]}, one row per rate and
 * budget (objects: new objects in the buckets, puts: the sidecars' upload attempts; both 0 below
 * break-even, where the policy stores nothing), the rate
 * being the one reached (p99 added: the mean over rounds of each round's difference), and
 * "stock_noise_floor": [{"mbps_per_broker", "saved_fraction"}] (stock priced against stock, each round
 * with its own sidecar CPU, the lower of the two ways). Prints
 * figures; asserts nothing. Needs root. BENCH_SECONDS (default 20) per arm and round,
 * BENCH_RATES (default 0.1,1,5,10), BENCH_ROUNDS (default 2), BENCH_WARMUP_SECONDS (default 10).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  DEFAULT_CPU,
  DEFAULT_PRICES,
  type ObjectStore,
  objectEconomics,
  openObjectStore,
  SEALING_DEFAULTS,
  steadyState,
} from '@walproxy/proxy';
import { type ProducerPerfResult, producerPerfAtRate } from '../src/clients/java-tools.js';
import { withAdmin } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { repoRoot } from '../src/cluster/paths.js';
import { walSidecarEnv, zonalStoreFlags, zoneBucket } from '../src/cluster/wal-settings.js';
import {
  type Counted,
  costLine,
  costSnapshot,
  countedBetween,
  priceArms,
  sumCounted,
} from '../src/cost/measure.js';
import { type Zone, ZoneNetwork } from '../src/net/zone-network.js';
import { startStoreFront } from '../src/s3/store-front.js';
import { startVersitygw } from '../src/s3/versitygw.js';
import { runStamp } from './run-stamp.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 10);
const RATES = (process.env.BENCH_RATES ?? '0.1,1,5,10').split(',').map(Number);
const BUDGETS = [25, 50] as const;
const RECORD_SIZE = 1_000;
const PARTITIONS = 6;
const LEADER = 1;
const PRODUCER_PROPS = { 'linger.ms': 5, 'batch.size': 65_536 };
const MONTH = 30 * 24 * 3600;

/** One arm's run in one round. */
interface Run {
  perf: ProducerPerfResult;
  counted: Counted;
  objectBytes: number[];
}

/** An arm's rounds at one rate. */
interface Arm {
  name: string;
  runs: Run[];
}

const mean = (xs: readonly number[]) => xs.reduce((n, x) => n + x, 0) / xs.length;
/** The arm's rounds priced as one run. */
const countedOf = (arm: Arm) => sumCounted(arm.runs.map((r) => r.counted));
const objectBytesOf = (arm: Arm) => arm.runs.flatMap((r) => r.objectBytes);
const mbPerSecOf = (arm: Arm) => mean(arm.runs.map((r) => r.perf.mbPerSec));
/** Round by round (each WAL run against the same round's stock run), averaged. */
const addedMs = (arm: Arm, stock: Arm, pick: (p: ProducerPerfResult) => number) =>
  Math.round(mean(arm.runs.map((r, i) => pick(r.perf) - pick(stock.runs[i]!.perf))));

interface Row {
  mbps_per_broker: number;
  object_bytes_p50: number;
  saved_fraction: number;
  p99_added_ms: number;
  budget_ms: number;
  /** New objects in the buckets, and the sidecars' upload attempts, in the arm's rounds. */
  objects: number;
  puts: number;
}

/** Every partition led by `LEADER`, followed by the other two brokers. */
async function createLedTopic(bootstrap: string, topic: string): Promise<void> {
  const others = BROKER_IDS.filter((id) => id !== LEADER);
  await withAdmin(bootstrap, async (admin) => {
    await admin.createTopics({
      topics: [
        {
          topic,
          replicaAssignment: Array.from({ length: PARTITIONS }, (_, partition) => ({
            partition,
            replicas: [LEADER, ...(partition % 2 === 0 ? others : [...others].reverse())],
          })),
        },
      ],
      waitForLeaders: false,
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
      const partitions = metadata?.topics[0]?.partitions ?? [];
      if (partitions.length === PARTITIONS && partitions.every((p) => p.leader === LEADER)) return;
      if (Date.now() > deadline) throw new Error(`${topic}: partitions not led by broker ${LEADER}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });
}

async function objectSizes(stores: ObjectStore[]): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  for (const store of stores)
    for await (const o of store.list('')) sizes.set(`${store.url}/${o.key}`, o.size);
  return sizes;
}

const p50 = (xs: number[]) =>
  xs.length === 0 ? 0 : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const run = runStamp();
  const zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, RACKS[id] as Zone])));
  let cluster: KafkaCluster | undefined;
  const versitygw = await startVersitygw({ netns: zones.store.netns, host: zones.store.address });
  const front = await startStoreFront({
    upstream: versitygw,
    netns: zones.store.netns,
    host: zones.store.address,
    latency: 's3-express',
  });
  const stores = BROKER_IDS.map((id) =>
    openObjectStore(`s3://walproxy-${RACKS[id]}/wal`, {
      endpoint: versitygw.endpoint,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    }),
  );
  try {
    for (const id of BROKER_IDS) await front.createBucket(zoneBucket(RACKS[id]!));
    cluster = await KafkaCluster.start({
      zones,
      jvmProfile: 'throughput',
      sidecarEnv: walSidecarEnv(),
      sidecarArgs: (id) => [
        ...zonalStoreFlags(RACKS[id]!, front.endpoint),
        '--wal-topic=cost*',
        ...BUDGETS.map((b) => `--topic-config=cost${b}-*:latency.budget.ms=${b}`),
      ],
    });
    const bootstrap = cluster.bootstrap();
    const adminUrls = BROKER_IDS.map((id) => cluster!.adminUrl(id));
    const arms = ['stock', ...BUDGETS.map((b) => `wal ${b} ms`)];
    const topicOf = (arm: string, rate: number) =>
      arm === 'stock' ? `plain-${rate}` : `cost${arm.split(' ')[1]}-${rate}`;
    // The first runs after a start are slower (JIT, page cache, the first metadata): not an arm's.
    if (WARMUP_SECONDS > 0) {
      await createLedTopic(bootstrap, 'plain-warmup');
      const warmupRate = RATES[0] ?? 1;
      await producerPerfAtRate({
        bootstrap,
        topic: 'plain-warmup',
        mbps: warmupRate,
        seconds: WARMUP_SECONDS,
        recordSize: RECORD_SIZE,
        props: PRODUCER_PROPS,
      });
    }
    const results = new Map<number, Map<string, Arm>>();
    for (const rate of RATES) {
      const byArm = new Map<string, Arm>(arms.map((arm) => [arm, { name: arm, runs: [] }]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const arm of round % 2 === 0 ? arms : [...arms].reverse()) {
          const topic = `${topicOf(arm, rate)}-r${round}`;
          await createLedTopic(bootstrap, topic);
          const objectsBefore = await objectSizes(stores);
          const before = await costSnapshot(adminUrls, zones);
          const perf = await producerPerfAtRate({
            bootstrap,
            topic,
            mbps: rate,
            seconds: SECONDS,
            recordSize: RECORD_SIZE,
            props: PRODUCER_PROPS,
          });
          await new Promise((r) => setTimeout(r, 1_000));
          const counted = countedBetween(before, await costSnapshot(adminUrls, zones));
          const objectsAfter = await objectSizes(stores);
          const objectBytes = [...objectsAfter].filter(([k]) => !objectsBefore.has(k)).map(([, s]) => s);
          byArm.get(arm)!.runs.push({ perf, counted, objectBytes });
          console.error(
            `[bench] ${rate} MB/s round ${round} ${arm}: ${perf.mbPerSec} MB/s, p50/p99 ${perf.p50Ms}/${perf.p99Ms} ms, ${(counted.crossZoneBytes! / 1e6).toFixed(2)} MB cross-zone, ${counted.puts} PUTs, ${counted.sidecarCpuSeconds?.toFixed(1)} CPU-s`,
          );
        }
      }
      results.set(rate, byArm);
    }

    const rows: Row[] = [];
    const economics = objectEconomics(DEFAULT_PRICES, { replicationFactor: 3, zones: 3 });
    console.log(
      `Kafka ${cluster.version}; ${SECONDS} s an arm and round, ${ROUNDS} round(s) forward then backward (stock and mode=auto at budgets ${BUDGETS.join(' and ')} ms), ${WARMUP_SECONDS} s warm-up, 1 KB records, acks=all, RF 3, ${PARTITIONS} partitions all led by broker ${LEADER}; three zones; store front (S3 Express-like latency) over versitygw; priced with ${DEFAULT_PRICES.source.split(';')[0]}`,
    );
    console.log(
      '| MB/s per broker (asked → reached) | arm | object size p50 | PUTs/s | stock $/month | walproxy $/month (store / cross-zone / WAL CPU) | relaying CPU $/month | saved | p50 / p99 added ms | steady-state prediction |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const [rate, byArm] of results) {
      const stock = byArm.get('stock')!;
      for (const budget of BUDGETS) {
        const arm = byArm.get(`wal ${budget} ms`)!;
        const armCounted = countedOf(arm);
        const cost = priceArms(countedOf(stock), armCounted);
        const perMonth = (usd: number) => (usd * MONTH) / armCounted.durationSec;
        const line = (key: string) =>
          [...cost.walproxy, ...cost.proxy].filter((l) => l.key === key).reduce((n, l) => n + l.usd, 0);
        const store =
          line('put_requests') + line('upload') + line('get_requests') + line('retrieval') + line('storage');
        const reached = mbPerSecOf(arm) * 1.048576;
        const predicted = steadyState(economics, budget, reached * 1e6);
        const objectBytes = objectBytesOf(arm);
        const p99Added = addedMs(arm, stock, (p) => p.p99Ms);
        rows.push({
          mbps_per_broker: Number(reached.toFixed(2)),
          object_bytes_p50: p50(objectBytes),
          saved_fraction: Number(cost.savedFraction.toFixed(4)),
          p99_added_ms: p99Added,
          budget_ms: budget,
          objects: objectBytes.length,
          puts: armCounted.puts,
        });
        console.log(
          `| ${rate} → ${reached.toFixed(2)} | auto, ${budget} ms | ${(p50(objectBytes) / 1000).toFixed(0)} KB (${objectBytes.length}) | ${(armCounted.puts / armCounted.durationSec).toFixed(1)} | ${perMonth(cost.stockUsd).toFixed(2)} | ${perMonth(cost.walproxyUsd).toFixed(2)} (${perMonth(store).toFixed(2)} / ${perMonth(line('cross_zone')).toFixed(2)} / ${perMonth(line('cpu_wal')).toFixed(2)}) | ${perMonth(cost.proxyUsd).toFixed(2)} | ${(100 * cost.savedFraction).toFixed(1)} % | ${addedMs(arm, stock, (p) => p.p50Ms)} / ${p99Added} | ${predicted.mode}, ${(predicted.objectBytes / 1000).toFixed(0)} KB, ${(100 * predicted.savedFraction).toFixed(1)} % |`,
        );
        console.error(`[bench]   ${rate} MB/s, ${budget} ms: ${costLine(cost)}`);
      }
    }
    // What separates two runs of the same stock replication: the saving's noise floor at each rate.
    const noiseFloor: { mbps_per_broker: number; saved_fraction: number }[] = [];
    if (ROUNDS >= 2) {
      console.log(
        "\nNoise floor: the stock arm of one round priced against the other (the same workload twice), each way, each round with its own sidecar CPU (priced as the WAL arms are: CPU beyond the reference round's, never below zero):",
      );
      console.log(
        '| MB/s per broker | cross-zone MB, round 0 / round 1 | sidecar CPU-s, round 0 / round 1 | "saved", round 1 vs 0 / 0 vs 1 | p50 / p99 ms, round 0 / round 1 |',
      );
      console.log('|---|---|---|---:|---|');
      for (const [rate, byArm] of results) {
        const [first, second] = byArm.get('stock')!.runs;
        const forward = priceArms(first!.counted, second!.counted);
        const backward = priceArms(second!.counted, first!.counted);
        // The lower of the two: how far below zero two runs of the same replication price.
        const floor = Math.min(forward.savedFraction, backward.savedFraction);
        noiseFloor.push({ mbps_per_broker: rate, saved_fraction: Number(floor.toFixed(4)) });
        console.log(
          `| ${rate} | ${(first!.counted.crossZoneBytes! / 1e6).toFixed(2)} / ${(second!.counted.crossZoneBytes! / 1e6).toFixed(2)} | ${first!.counted.sidecarCpuSeconds?.toFixed(1)} / ${second!.counted.sidecarCpuSeconds?.toFixed(1)} | ${(100 * forward.savedFraction).toFixed(1)} / ${(100 * backward.savedFraction).toFixed(1)} % | ${first!.perf.p50Ms} / ${second!.perf.p50Ms}, ${first!.perf.p99Ms} / ${second!.perf.p99Ms} |`,
        );
      }
    }
    // The WAL path's CPU per GB where the WAL carried the bytes: what DEFAULT_CPU should say.
    for (const [rate, byArm] of results) {
      const stock = countedOf(byArm.get('stock')!);
      for (const budget of BUDGETS) {
        const arm = byArm.get(`wal ${budget} ms`)!;
        const counted = countedOf(arm);
        const gb = counted.referencedBytes / 2 / 1e9;
        if (gb < 0.05) continue;
        const wal = (counted.sidecarCpuSeconds ?? 0) - (stock.sidecarCpuSeconds ?? 0);
        const produced =
          (byArm.get('stock')!.runs.reduce((n, r) => n + r.perf.records, 0) * RECORD_SIZE) / 1e9;
        console.log(
          `WAL CPU at ${rate} MB/s, ${budget} ms: ${(wal / gb).toFixed(1)} s per GB referenced to both followers (${counted.sidecarCpuSeconds?.toFixed(1)} − ${stock.sidecarCpuSeconds?.toFixed(1)} CPU-s for ${gb.toFixed(2)} GB); relaying ${((stock.sidecarCpuSeconds ?? 0) / produced).toFixed(1)} s per GB produced (stock arm); the model's defaults ${DEFAULT_CPU.walSecondsPerGb.toFixed(1)} / ${DEFAULT_CPU.proxySecondsPerGb}`,
        );
      }
    }
    console.log(
      `sealing policy: linger = budget − ${SEALING_DEFAULTS.storeLatency.putMs} − ${SEALING_DEFAULTS.storeLatency.getMs} − ${SEALING_DEFAULTS.timerSlackMs} ms; break-even ${Math.round(economics.breakEvenObjectBytes!)} B, the WAL from ${Math.round(economics.breakEvenObjectBytes! * SEALING_DEFAULTS.walAtBreakEvenMultiple)} B`,
    );
    const out = path.join(repoRoot(), '.runs', 'bench', 'cost.json');
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, `${JSON.stringify({ run, rates: rows, stock_noise_floor: noiseFloor }, null, 2)}\n`);
    console.log(`written: ${out}`);
  } finally {
    for (const store of stores) await store.close();
    await cluster?.stop();
    await front.stop();
    await versitygw.stop();
    zones.remove();
  }
}

await main();
