/**
 * `make bench` (replication through the object store, issue #5): the same acks=all workload over
 * three simulated zones (one network namespace per broker pod, e2e/src/net/zone-network.ts), in
 * one run, over five arms:
 *   no sidecar     stock Kafka, brokers replicate directly across zones
 *   sidecar        walproxy in every pod, topic not in the WAL: replication passes through inline
 *   wal linger 5   WAL topic, objects sealed after 5 ms (per-topic linger.ms)
 *   wal linger 10  ... 10 ms
 *   wal linger 20  ... 20 ms
 * Per arm: produce throughput and p50/p99 at full speed (BENCH_BYTES, default 1 GB of 512 B
 * records), p50/p99 at a modest fixed rate (where latency is not queueing), kernel-counted bytes
 * between zones per produced GB, follower fill latency (the sidecars' histogram), sidecar CPU
 * seconds per produced GB and peak RSS. The S3 server is moto in its own namespace: its latency
 * is not S3 Express One Zone's. Prints figures only; recorded in docs/benchmarks.md.
 * Needs root (network namespaces).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { type ProducerPerfResult, producerPerf } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { walSidecarEnv } from '../src/cluster/wal-settings.js';
import {
  crossZoneBytes,
  storeBytes,
  trafficSince,
  type Zone,
  ZoneNetwork,
  zoneNetworkAvailable,
} from '../src/net/zone-network.js';
import { startMoto } from '../src/s3/moto.js';

const BYTES = Number(process.env.BENCH_BYTES ?? 1e9);
const RECORD_SIZE = 512;
const RECORDS = Math.round(BYTES / RECORD_SIZE);
/** The fixed-rate latency phase: 2,000 records/s (1 MB/s) for 20 s. */
const LATENCY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 2_000);
const LATENCY_RECORDS = LATENCY_RATE * 20;
const PRODUCER_PROPS = { 'linger.ms': 5, 'batch.size': 65_536 };

interface ArmResult {
  name: string;
  full: ProducerPerfResult;
  paced: ProducerPerfResult;
  producedBytes: number;
  crossZone: number;
  store: number;
  cpuSeconds?: number;
  peakRssMb?: number;
  fill?: { count: number; meanMs: number; p50Ms: string; p99Ms: string };
}

/** utime + stime of a process, in seconds (/proc/<pid>/stat fields 14 and 15, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resets the peak resident set size the kernel tracks for `pid` (proc(5), clear_refs 5). */
function resetPeakRss(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

function peakRssMb(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0) / 1024;
}

/** The follower-side fill histogram's buckets (upper bound ms → cumulative count), all sidecars summed. */
async function fillBuckets(cluster: KafkaCluster): Promise<Map<number, number>> {
  const buckets = new Map<number, number>();
  for (const id of BROKER_IDS) {
    const text = await (await fetch(`${cluster.adminUrl(id)}/metrics`)).text();
    for (const line of text.split('\n')) {
      const m = /^walproxy_fetch_fill_duration\w*_bucket\{.*le="([^"]+)".*\} (\d+(?:\.\d+)?)/.exec(line);
      if (!m) continue;
      const le = m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[1]);
      buckets.set(le, (buckets.get(le) ?? 0) + Number(m[2]));
    }
  }
  return buckets;
}

/** The bucket bound under which fraction `p` of the fills of an arm fell (from bucket deltas). */
function bucketPercentile(before: Map<number, number>, after: Map<number, number>, p: number): string {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const total = (after.get(Number.POSITIVE_INFINITY) ?? 0) - (before.get(Number.POSITIVE_INFINITY) ?? 0);
  if (total <= 0) return '-';
  for (const bound of bounds) {
    const count = (after.get(bound) ?? 0) - (before.get(bound) ?? 0);
    if (count >= p * total) return Number.isFinite(bound) ? `≤ ${bound}` : `> ${bounds.at(-2)}`;
  }
  return '-';
}

async function fillStats(cluster: KafkaCluster): Promise<{ sum: number; count: number }> {
  let sum = 0;
  let count = 0;
  for (const id of BROKER_IDS) {
    const fill = (await cluster.sidecarCounters(id)).wal?.fetchFill as
      | { fillLatencyMs?: { sum: number; count: number } }
      | undefined;
    sum += fill?.fillLatencyMs?.sum ?? 0;
    count += fill?.fillLatencyMs?.count ?? 0;
  }
  return { sum, count };
}

async function runArm(
  name: string,
  cluster: KafkaCluster,
  zones: ZoneNetwork,
  topic: string,
): Promise<ArmResult> {
  const bootstrap = cluster.bootstrap();
  await createTopic(bootstrap, topic, { partitions: 6 });
  await createTopic(bootstrap, `${topic}-paced`, { partitions: 6 });
  const sidecarPids = [...cluster.sidecars.values()].map((s) => s.pid!).filter(Boolean);
  for (const pid of sidecarPids) resetPeakRss(pid);
  const cpuBefore = sidecarPids.reduce((n, pid) => n + cpuSeconds(pid), 0);
  const trafficBefore = zones.traffic();
  const fillBefore = cluster.withSidecars ? await fillStats(cluster) : undefined;
  const bucketsBefore = cluster.withSidecars ? await fillBuckets(cluster) : undefined;

  const full = await producerPerf({
    bootstrap,
    topic,
    records: RECORDS,
    recordSize: RECORD_SIZE,
    props: PRODUCER_PROPS,
    timeoutMs: 1_800_000,
  });
  const paced = await producerPerf({
    bootstrap,
    topic: `${topic}-paced`,
    records: LATENCY_RECORDS,
    recordSize: RECORD_SIZE,
    throughput: LATENCY_RATE,
    props: PRODUCER_PROPS,
  });
  // Let the followers catch up before the counters are read.
  await new Promise((r) => setTimeout(r, 5_000));

  const traffic = trafficSince(trafficBefore, zones.traffic());
  const producedBytes = (RECORDS + LATENCY_RECORDS) * RECORD_SIZE;
  const result: ArmResult = {
    name,
    full,
    paced,
    producedBytes,
    crossZone: crossZoneBytes(traffic),
    store: storeBytes(traffic),
  };
  if (sidecarPids.length > 0) {
    result.cpuSeconds = sidecarPids.reduce((n, pid) => n + cpuSeconds(pid), 0) - cpuBefore;
    result.peakRssMb = Math.max(...sidecarPids.map(peakRssMb));
  }
  if (fillBefore && bucketsBefore) {
    const after = await fillStats(cluster);
    const bucketsAfter = await fillBuckets(cluster);
    const count = after.count - fillBefore.count;
    result.fill = {
      count,
      meanMs: count > 0 ? (after.sum - fillBefore.sum) / count : 0,
      p50Ms: bucketPercentile(bucketsBefore, bucketsAfter, 0.5),
      p99Ms: bucketPercentile(bucketsBefore, bucketsAfter, 0.99),
    };
  }
  console.error(
    `${name}: ${full.mbPerSec} MB/s (p50 ${full.p50Ms} / p99 ${full.p99Ms} ms); paced p50 ${paced.p50Ms} / p99 ${paced.p99Ms} ms; cross-zone ${(result.crossZone / 1e6).toFixed(1)} MB`,
  );
  return result;
}

async function main(): Promise<void> {
  if (!zoneNetworkAvailable()) throw new Error('the replication benchmark needs root, ip and nft');
  const zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, RACKS[id] as Zone])));
  const results: ArmResult[] = [];
  let version = '';
  try {
    const moto = await startMoto({ netns: zones.store.netns, host: zones.store.address });
    try {
      for (const id of BROKER_IDS) await moto.createBucket(`walproxy-${RACKS[id]}`);
      const stock = await KafkaCluster.start({ zones, sidecars: false, jvmProfile: 'throughput' });
      version = stock.version;
      try {
        results.push(await runArm('no sidecar', stock, zones, 'bench-stock'));
      } finally {
        await stock.stop();
      }
      const endpoint = moto.endpoint;
      const walproxy = await KafkaCluster.start({
        zones,
        jvmProfile: 'throughput',
        sidecarEnv: walSidecarEnv(),
        sidecarArgs: (id) => [
          `--wal-store-url=s3://walproxy-${RACKS[id]}/wal`,
          '--wal-read-store-url=s3://walproxy-zone-*/wal',
          `--s3-endpoint=${endpoint}`,
          '--s3-force-path-style=true',
          '--wal-topic=wal-*',
          // Through the WAL whatever its objects cost: the arms measure the WAL at fixed lingers.
          '--topic-config=wal-*:mode=wal',
          ...[5, 10, 20].map((ms) => `--topic-config=wal-linger${ms}-*:linger.ms=${ms}`),
        ],
      });
      try {
        results.push(await runArm('sidecar, not in the WAL', walproxy, zones, 'bench-plain'));
        for (const ms of [5, 10, 20])
          results.push(await runArm(`wal, linger ${ms} ms`, walproxy, zones, `wal-linger${ms}-bench`));
      } finally {
        await walproxy.stop();
      }
    } finally {
      await moto.stop();
    }
  } finally {
    zones.remove();
  }

  const gb = (r: ArmResult) => r.producedBytes / 1e9;
  const stock = results[0]!;
  console.log(
    `Kafka ${version}; per arm ${(RECORDS * RECORD_SIZE) / 1e9} GB of ${RECORD_SIZE} B records at full speed + ${LATENCY_RECORDS} records at ${LATENCY_RATE}/s; acks=all, RF=3, 6 partitions, producer linger 5 ms / batch 64 KB; three zones (network namespaces), S3 = moto in its own namespace`,
  );
  console.log(
    `| arm | MB/s | p50 / p99 ms (full speed) | p50 / p99 ms (${((LATENCY_RATE * RECORD_SIZE) / 1e6).toFixed(1)} MB/s) | cross-zone MB per GB | vs stock | store MB per GB | fill mean ms (p50 / p99) | sidecar CPU s per GB | sidecar peak RSS MB |`,
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const perGb = r.crossZone / 1e6 / gb(r);
    const stockPerGb = stock.crossZone / 1e6 / gb(stock);
    console.log(
      `| ${r.name} | ${r.full.mbPerSec.toFixed(1)} | ${r.full.p50Ms} / ${r.full.p99Ms} | ${r.paced.p50Ms} / ${r.paced.p99Ms} | ${perGb.toFixed(1)} | ${((100 * perGb) / stockPerGb).toFixed(2)} % | ${(r.store / 1e6 / gb(r)).toFixed(0)} | ${r.fill && r.fill.count > 0 ? `${r.fill.meanMs.toFixed(1)} (${r.fill.p50Ms} / ${r.fill.p99Ms})` : '-'} | ${r.cpuSeconds !== undefined ? (r.cpuSeconds / gb(r)).toFixed(1) : '-'} | ${r.peakRssMb !== undefined ? r.peakRssMb.toFixed(0) : '-'} |`,
    );
  }
}

await main();
