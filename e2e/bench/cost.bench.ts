/**
 * `make bench-cost` (issue #14): what cost-aware replication costs and saves, as measured, at 0.1,
 * 1, 10 and 30 MB/s per broker. Three zones (a network namespace per broker pod, the kernel counts
 * what crosses), a store front with S3 Express One Zone-like latency in front of versitygw, and
 * every partition led by broker 1, so that one sidecar seals at the whole rate ("per broker").
 * At each rate, interleaved arm by arm: a topic outside the WAL (stock replication through the
 * same sidecars), then mode=auto WAL topics with latency budgets of 25 and 50 ms (the sealing
 * policy decides WAL or inline, and when to seal). Each arm is priced from the sidecars' own
 * counters and the kernel's byte counts (e2e/src/cost/measure.ts: walproxy's replication — store,
 * cross-zone residue, the WAL path's CPU beyond the stock arm's — against the stock arm's
 * cross-zone bytes), scaled to a 30-day month at the rate reached. Latency added: the WAL arm's
 * ProducerPerformance p50 / p99 (acks=all, per record) minus the stock arm's.
 *
 * Writes `.runs/bench/cost.json`: {"rates": [{"mbps_per_broker", "object_bytes_p50",
 * "saved_fraction", "p99_added_ms", "budget_ms"}, ...]}, one row per rate and budget, the rate
 * being the one reached. Prints figures; asserts nothing. Needs root. BENCH_SECONDS (default 20)
 * per arm, BENCH_RATES (default 0.1,1,10,30).
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
import { type ProducerPerfResult, producerPerf } from '../src/clients/java-tools.js';
import { withAdmin } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { repoRoot } from '../src/cluster/paths.js';
import { walSidecarEnv, zonalStoreFlags, zoneBucket } from '../src/cluster/wal-settings.js';
import { type Counted, costLine, costSnapshot, countedBetween, priceArms } from '../src/cost/measure.js';
import { type Zone, ZoneNetwork } from '../src/net/zone-network.js';
import { startStoreFront } from '../src/s3/store-front.js';
import { startVersitygw } from '../src/s3/versitygw.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const RATES = (process.env.BENCH_RATES ?? '0.1,1,10,30').split(',').map(Number);
const BUDGETS = [25, 50] as const;
const RECORD_SIZE = 1_000;
const PARTITIONS = 6;
const LEADER = 1;
const PRODUCER_PROPS = { 'linger.ms': 5, 'batch.size': 65_536 };
const MONTH = 30 * 24 * 3600;

interface Arm {
  name: string;
  perf: ProducerPerfResult;
  counted: Counted;
  objectBytes: number[];
}

interface Row {
  mbps_per_broker: number;
  object_bytes_p50: number;
  saved_fraction: number;
  p99_added_ms: number;
  budget_ms: number;
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
    const results = new Map<number, Map<string, Arm>>();
    for (const rate of RATES) {
      const byArm = new Map<string, Arm>();
      for (const arm of arms) {
        const topic = topicOf(arm, rate);
        await createLedTopic(bootstrap, topic);
        const objectsBefore = await objectSizes(stores);
        const before = await costSnapshot(adminUrls, zones);
        const records = Math.round((rate * 1e6 * SECONDS) / RECORD_SIZE);
        const perf = await producerPerf({
          bootstrap,
          topic,
          records,
          recordSize: RECORD_SIZE,
          throughput: (rate * 1e6) / RECORD_SIZE,
          props: PRODUCER_PROPS,
          timeoutMs: 20 * SECONDS * 1000,
        });
        await new Promise((r) => setTimeout(r, 1_000));
        const counted = countedBetween(before, await costSnapshot(adminUrls, zones));
        const objectsAfter = await objectSizes(stores);
        const objectBytes = [...objectsAfter].filter(([k]) => !objectsBefore.has(k)).map(([, s]) => s);
        byArm.set(arm, { name: arm, perf, counted, objectBytes });
        console.error(
          `[bench] ${rate} MB/s ${arm}: ${perf.mbPerSec} MB/s, p50/p99 ${perf.p50Ms}/${perf.p99Ms} ms, ${(counted.crossZoneBytes! / 1e6).toFixed(2)} MB cross-zone, ${counted.puts} PUTs, ${counted.sidecarCpuSeconds?.toFixed(1)} CPU-s`,
        );
      }
      results.set(rate, byArm);
    }

    const rows: Row[] = [];
    const economics = objectEconomics(DEFAULT_PRICES, { replicationFactor: 3, zones: 3 });
    console.log(
      `Kafka ${cluster.version}; ${SECONDS} s an arm (stock, then mode=auto at budgets ${BUDGETS.join(' and ')} ms), 1 KB records, acks=all, RF 3, ${PARTITIONS} partitions all led by broker ${LEADER}; three zones; store front (S3 Express-like latency) over versitygw; priced with ${DEFAULT_PRICES.source.split(';')[0]}`,
    );
    console.log(
      '| MB/s per broker (asked → reached) | arm | object size p50 | PUTs/s | stock $/month | walproxy $/month (store / cross-zone / WAL CPU) | relaying CPU $/month | saved | p50 / p99 added ms | steady-state prediction |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const [rate, byArm] of results) {
      const stock = byArm.get('stock')!;
      for (const budget of BUDGETS) {
        const arm = byArm.get(`wal ${budget} ms`)!;
        const cost = priceArms(stock.counted, arm.counted);
        const perMonth = (usd: number) => (usd * MONTH) / arm.counted.durationSec;
        const line = (key: string) =>
          [...cost.walproxy, ...cost.proxy].filter((l) => l.key === key).reduce((n, l) => n + l.usd, 0);
        const store =
          line('put_requests') + line('upload') + line('get_requests') + line('retrieval') + line('storage');
        const reached = arm.perf.mbPerSec * 1.048576;
        const predicted = steadyState(economics, budget, reached * 1e6);
        rows.push({
          mbps_per_broker: Number(reached.toFixed(2)),
          object_bytes_p50: p50(arm.objectBytes),
          saved_fraction: Number(cost.savedFraction.toFixed(4)),
          p99_added_ms: arm.perf.p99Ms - stock.perf.p99Ms,
          budget_ms: budget,
        });
        console.log(
          `| ${rate} → ${reached.toFixed(2)} | auto, ${budget} ms | ${(p50(arm.objectBytes) / 1000).toFixed(0)} KB (${arm.objectBytes.length}) | ${(arm.counted.puts / arm.counted.durationSec).toFixed(1)} | ${perMonth(cost.stockUsd).toFixed(2)} | ${perMonth(cost.walproxyUsd).toFixed(2)} (${perMonth(store).toFixed(2)} / ${perMonth(line('cross_zone')).toFixed(2)} / ${perMonth(line('cpu_wal')).toFixed(2)}) | ${perMonth(cost.proxyUsd).toFixed(2)} | ${(100 * cost.savedFraction).toFixed(1)} % | ${arm.perf.p50Ms - stock.perf.p50Ms} / ${arm.perf.p99Ms - stock.perf.p99Ms} | ${predicted.mode}, ${(predicted.objectBytes / 1000).toFixed(0)} KB, ${(100 * predicted.savedFraction).toFixed(1)} % |`,
        );
        console.error(`[bench]   ${rate} MB/s, ${budget} ms: ${costLine(cost)}`);
      }
    }
    // The WAL path's CPU per GB where the WAL carried the bytes: what DEFAULT_CPU should say.
    for (const [rate, byArm] of results) {
      const stock = byArm.get('stock')!;
      for (const budget of BUDGETS) {
        const arm = byArm.get(`wal ${budget} ms`)!;
        const gb = arm.counted.referencedBytes / 2 / 1e9;
        if (gb < 0.05) continue;
        const wal = (arm.counted.sidecarCpuSeconds ?? 0) - (stock.counted.sidecarCpuSeconds ?? 0);
        const produced = (arm.perf.records * RECORD_SIZE) / 1e9;
        console.log(
          `WAL CPU at ${rate} MB/s, ${budget} ms: ${(wal / gb).toFixed(1)} s per GB referenced to both followers (${arm.counted.sidecarCpuSeconds?.toFixed(1)} − ${stock.counted.sidecarCpuSeconds?.toFixed(1)} CPU-s for ${gb.toFixed(2)} GB); relaying ${((stock.counted.sidecarCpuSeconds ?? 0) / produced).toFixed(1)} s per GB produced (stock arm); the model's defaults ${DEFAULT_CPU.walSecondsPerGb.toFixed(1)} / ${DEFAULT_CPU.proxySecondsPerGb}`,
        );
      }
    }
    console.log(
      `sealing policy: linger = budget − ${SEALING_DEFAULTS.storeLatency.putMs} − ${SEALING_DEFAULTS.storeLatency.getMs} − ${SEALING_DEFAULTS.timerSlackMs} ms; break-even ${Math.round(economics.breakEvenObjectBytes!)} B, the WAL from ${Math.round(economics.breakEvenObjectBytes! * SEALING_DEFAULTS.walAtBreakEvenMultiple)} B`,
    );
    const out = path.join(repoRoot(), '.runs', 'bench', 'cost.json');
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, `${JSON.stringify({ rates: rows }, null, 2)}\n`);
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
