import { DEFAULT_PRICES, type ObjectStore, objectEconomics, openObjectStore } from '@walproxy/proxy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerPerf, type ProducerPerfResult, producerPerfAtRate } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { walSidecarEnv, zonalStoreFlags, zoneBucket } from '../src/cluster/wal-settings.js';
import { type Counted, costLine, costSnapshot, countedBetween, priceArms } from '../src/cost/measure.js';
import { type Zone, ZoneNetwork } from '../src/net/zone-network.js';
import { type StoreFront, startStoreFront } from '../src/s3/store-front.js';
import { startVersitygw, type VersitygwServer } from '../src/s3/versitygw.js';
import { compareReplicas } from '../src/wal/inspect.js';

/**
 * Cost-aware replication (issue #14) on the three-zone network: one cluster whose broker pods sit
 * in three simulated zones (the kernel counts every byte between them), a store front with S3
 * Express One Zone-like latency in front of versitygw, and the sealing policy (mode=auto) with a
 * 75 ms latency budget (linger 55 ms) and lowered timers (below). At each rate the same workload
 * runs twice, one after the other: into a topic outside the WAL (stock replication through the
 * same sidecars) and into a mode=auto WAL topic. Each arm is priced from the sidecars' own
 * counters (/metrics: PUTs, GETs, bytes, process CPU) and the kernel's cross-zone bytes, with
 * priceMeasured (docs/cost.md, "What a saving is"):
 *   stock    = the stock arm's cross-zone bytes at the cross-zone price;
 *   walproxy = its store requests, bytes and storage + its own arm's cross-zone bytes + its
 *              sidecars' CPU beyond what they spent relaying the stock arm.
 * The rates are totals over the cluster (6 partitions, 2 led by each broker): per leader a third.
 * The policy's virtual objects are rate per leader × 55 ms, the WAL from 1.5 × break-even ≈ 53 KB:
 * 0.5 MB/s → 9 KB stays inline; 5 MB/s → 92 KB goes through the WAL; 2 MB/s (37 KB on average)
 * may enter it on the producer's bursts, and then pays (its real objects are larger: the
 * producer's requests grow while they wait). 5 MB/s rather than 20: with the WAL this 2-core
 * machine saturated at 7.6 MB/s (a 10 MB/s run reached 7.57 with 3 s of producer queueing), and
 * a rate it cannot carry measures the queue, not the policy. The producer's batch.size is 256 KB:
 * through the WAL the producer's acks=all requests to a broker go one at a time, each waiting
 * ~linger + PUT for its object, and each carries one batch per partition, so Kafka's default
 * 16 KB would cap every request — and every object — at 32 KB (two partitions a broker) and the
 * producer's throughput at 32 KB a round; 256 KB leaves a request room for a round's records at
 * every rate here. Where a cap keeps objects small anyway, the policy learns it from its real
 * objects (docs/cost.md).
 * Latency is printed, not asserted (a benchmark figure: `make bench-cost` writes p99_added_ms
 * beside budget_ms): ProducerPerformance's p50 and p99 (acks=all, per record) of each arm. Per
 * record the WAL adds more than the budget's per-request wait when the producer pipelines
 * requests (max.in.flight 5): the broker takes them one at a time, so a record also waits behind
 * its connection's earlier requests (the run of 2026-12-01 17:16 UTC: p50 +76 ms at 2 MB/s and
 * +83 ms at 5 MB/s against the 75 ms budget).
 *
 * Timers lowered for the run (flags): the rate window to 2 s (the first switch 2 s after the
 * group's first batch instead of 10), the exit delay and the dwell to 5 s (instead of 60 and 30),
 * so that the last phase, back at the lowest rate, shows the switch back to inline.
 */

const BUDGET_MS = 75;
/**
 * Total over the cluster, MB/s, and seconds an arm; the last phase goes back to the first rate.
 * The lowest rate runs longer: the sidecars' CPU-seconds vary by about a second between two runs
 * of the same work (garbage collection), which would otherwise weigh as much as the data.
 */
const PHASES = [
  { mbps: 0.5, seconds: 30 },
  { mbps: 2, seconds: 20 },
  { mbps: 5, seconds: 20 },
  { mbps: 0.5, seconds: 30 },
] as const;
/** `mbps:seconds,…` to run other phases (diagnosis); the assertions expect the four above. */
const PLAN = process.env.COST_E2E_PHASES
  ? process.env.COST_E2E_PHASES.split(',').map((p) => {
      const [mbps, seconds] = p.split(':').map(Number) as [number, number];
      return { mbps, seconds };
    })
  : PHASES;
const RECORD_SIZE = 1_000;
const PARTITIONS = 6;
const WAL_TOPIC = 'cost-auto';
const STOCK_TOPIC = 'plain-stock';
/**
 * Two runs of the same stock workload do not cross exactly the same bytes (the number of fetch
 * round trips varies with timing) nor spend the same CPU; where the policy keeps a rate inline the
 * two arms are the same replication, so they are compared within this share of the stock cost.
 */
const NOISE = 0.03;

let zones: ZoneNetwork | undefined;
let versitygw: VersitygwServer | undefined;
let front: StoreFront | undefined;
let cluster: KafkaCluster | undefined;
let failed = false;

beforeAll(async () => {
  zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, RACKS[id] as Zone])));
  versitygw = await startVersitygw({ netns: zones.store.netns, host: zones.store.address });
  front = await startStoreFront({
    upstream: versitygw,
    netns: zones.store.netns,
    host: zones.store.address,
    latency: 's3-express',
  });
  for (const id of BROKER_IDS) await front.createBucket(zoneBucket(RACKS[id]!));
  const endpoint = front.endpoint;
  cluster = await KafkaCluster.start({
    zones,
    sidecarEnv: walSidecarEnv(),
    sidecarArgs: (id) => [
      ...zonalStoreFlags(RACKS[id]!, endpoint),
      `--wal-topic=cost-*`,
      `--wal-latency-budget-ms=${BUDGET_MS}`,
      '--wal-mode-rate-window-ms=2000',
      '--wal-mode-exit-after-ms=5000',
      '--wal-mode-min-dwell-ms=5000',
    ],
  });
}, 240_000);

afterAll(async () => {
  try {
    await cluster?.stop({ keepLogs: failed || process.env.WALPROXY_KEEP_LOGS === '1' });
    await front?.stop();
    await versitygw?.stop();
  } finally {
    zones?.remove();
  }
}, 60_000);

/** Every WAL object's size, by key, in the zones' buckets (read from versitygw, behind the front). */
async function objectSizes(stores: ObjectStore[]): Promise<Map<string, number>> {
  const sizes = new Map<string, number>();
  for (const store of stores)
    for await (const o of store.list('')) sizes.set(`${store.url}/${o.key}`, o.size);
  return sizes;
}

interface Arm {
  counted: Counted;
  perf: ProducerPerfResult;
}

interface Phase {
  mbps: number;
  stock: Arm;
  walproxy: Arm;
  objectBytes: number[];
  switches: { toWal: number; toInline: number };
  notCopiedInline: number;
}

/** The WAL counters of every sidecar (/counters), flattened to `writer.sealedByLinger`-like keys and summed. */
async function walCounters(c: KafkaCluster): Promise<Record<string, number>> {
  const sum: Record<string, number> = {};
  const add = (prefix: string, value: unknown) => {
    if (typeof value === 'number') sum[prefix] = (sum[prefix] ?? 0) + value;
    else if (typeof value === 'object' && value !== null)
      for (const [k, v] of Object.entries(value)) add(prefix ? `${prefix}.${k}` : k, v);
  };
  for (const id of BROKER_IDS) {
    const wal = (await c.sidecarCounters(id)).wal;
    add('', { writer: wal?.writer, produce: wal?.produce, strip: wal?.fetchStrip });
  }
  return sum;
}

/** What changed between two walCounters readings, the non-zero keys only. */
function changed(before: Record<string, number>, after: Record<string, number>): string {
  return Object.entries(after)
    .map(([k, v]) => [k, v - (before[k] ?? 0)] as const)
    .filter(([k, d]) => d !== 0 && !/Bytes$|bytes|Ms/.test(k))
    .map(([k, d]) => `${k} ${d}`)
    .join(', ');
}

/** Mode switches and inline-mode bytes summed over the sidecars' /metrics. */
async function policyCounters(c: KafkaCluster): Promise<{ toWal: number; toInline: number; inline: number }> {
  let toWal = 0;
  let toInline = 0;
  let inline = 0;
  for (const id of BROKER_IDS) {
    const text = await (await fetch(`${c.adminUrl(id)}/metrics`)).text();
    for (const line of text.split('\n')) {
      const value = Number(line.split(' ').at(-1));
      if (line.startsWith('walproxy_wal_mode_switches_total{') && line.includes('to="wal"')) toWal += value;
      if (line.startsWith('walproxy_wal_mode_switches_total{') && line.includes('to="inline"'))
        toInline += value;
      if (line.startsWith('walproxy_produce_not_copied_bytes_total{reason="inline_mode"}')) inline += value;
    }
  }
  return { toWal, toInline, inline };
}

describe('cost-aware replication across three zones', () => {
  it('costs at most what stock replication costs at every rate, saves at 5 MB/s, and loses nothing', async () => {
    failed = true;
    const c = cluster!;
    const bootstrap = c.bootstrap();
    const adminUrls = BROKER_IDS.map((id) => c.adminUrl(id));
    const stores = BROKER_IDS.map((id) =>
      openObjectStore(`s3://walproxy-${RACKS[id]}/wal`, {
        endpoint: versitygw!.endpoint,
        forcePathStyle: true,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      }),
    );
    await createTopic(bootstrap, WAL_TOPIC, { partitions: PARTITIONS });
    await createTopic(bootstrap, STOCK_TOPIC, { partitions: PARTITIONS });
    const phases: Phase[] = [];
    let produced = 0;
    try {
      for (const { mbps, seconds } of PLAN) {
        const arms: Partial<Record<'stock' | 'walproxy', Arm>> = {};
        const objectsBefore = await objectSizes(stores);
        const policyBefore = await policyCounters(c);
        for (const [arm, topic] of [
          ['stock', STOCK_TOPIC],
          ['walproxy', WAL_TOPIC],
        ] as const) {
          const records = Math.round((mbps * 1e6 * seconds) / RECORD_SIZE);
          const before = await costSnapshot(adminUrls, zones);
          const walBefore = await walCounters(c);
          const perf = await producerPerfAtRate({
            bootstrap,
            topic,
            mbps,
            seconds,
            recordSize: RECORD_SIZE,
            props: { 'linger.ms': 5, 'batch.size': 262_144 },
            timeoutFactor: 6,
          });
          expect(perf.records).toBe(records);
          produced += arm === 'walproxy' ? records : 0;
          // acks=all: every record is on every follower; what the fetchers send after is idle polling.
          await new Promise((r) => setTimeout(r, 1_000));
          arms[arm] = { counted: countedBetween(before, await costSnapshot(adminUrls, zones)), perf };
          if (arm === 'walproxy')
            console.log(`  WAL counters, walproxy arm: ${changed(walBefore, await walCounters(c))}`);
        }
        const objectsAfter = await objectSizes(stores);
        const policyAfter = await policyCounters(c);
        const phase: Phase = {
          mbps,
          stock: arms.stock!,
          walproxy: arms.walproxy!,
          objectBytes: [...objectsAfter]
            .filter(([key]) => !objectsBefore.has(key))
            .map(([, size]) => size)
            .sort((a, b) => a - b),
          switches: {
            toWal: policyAfter.toWal - policyBefore.toWal,
            toInline: policyAfter.toInline - policyBefore.toInline,
          },
          notCopiedInline: policyAfter.inline - policyBefore.inline,
        };
        phases.push(phase);
        const cost = priceArms(phase.stock.counted, phase.walproxy.counted);
        const w = phase.walproxy;
        const s = phase.stock;
        console.log(
          `${mbps} MB/s total (${(mbps / 3).toFixed(2)} per leader), ${seconds} s an arm: stock arm ${s.perf.mbPerSec} MB/s p50/p99 ${s.perf.p50Ms}/${s.perf.p99Ms} ms, ${(s.counted.crossZoneBytes! / 1e6).toFixed(2)} MB cross-zone, ${s.counted.sidecarCpuSeconds?.toFixed(2)} CPU-s; walproxy arm ${w.perf.mbPerSec} MB/s p50/p99 ${w.perf.p50Ms}/${w.perf.p99Ms} ms, ${(w.counted.crossZoneBytes! / 1e6).toFixed(2)} MB cross-zone, ${w.counted.sidecarCpuSeconds?.toFixed(2)} CPU-s, ${w.counted.puts} PUTs, ${phase.objectBytes.length} objects (p50 ${phase.objectBytes[Math.floor(phase.objectBytes.length / 2)] ?? 0} B), ${(phase.notCopiedInline / 1e6).toFixed(2)} MB not copied (inline mode), switches to WAL ${phase.switches.toWal}, to inline ${phase.switches.toInline}; added p50 ${w.perf.p50Ms - s.perf.p50Ms} ms, p99 ${w.perf.p99Ms - s.perf.p99Ms} ms (budget ${BUDGET_MS})`,
        );
        console.log(`  ${costLine(cost)}`);
      }
    } finally {
      for (const store of stores) await store.close();
    }

    for (const phase of phases) {
      const cost = priceArms(phase.stock.counted, phase.walproxy.counted);
      // Then at every rate the priced walproxy replication costs no more than stock replication
      // of the same workload (within the two arms' measurement noise where both replicate inline)
      expect(cost.crossZoneMeasured && cost.cpuMeasured).toBe(true);
      expect(cost.walproxyUsd, `${phase.mbps} MB/s: ${costLine(cost)}`).toBeLessThanOrEqual(
        cost.stockUsd * (1 + NOISE),
      );
    }
    const [low, , high, back] = phases as [Phase, Phase, Phase, Phase];
    // And at the lowest rate nothing reached the store that did not pay for itself. The groups
    // stay inline there, but a burst may lift one into the WAL for a few seconds, and what it then
    // uploads is above break-even, the rest abandoned (CI rehearsal of 2026-12-02 04:47 UTC: one
    // leader in the WAL for 3.7 s, 2 objects uploaded, p50 49.6 KB, 32 abandoned; 0 PUTs in the
    // runs before). The cost check above holds at this rate either way.
    const breakEven = objectEconomics(DEFAULT_PRICES, { replicationFactor: 3, zones: 3 })
      .breakEvenObjectBytes!;
    expect(low.objectBytes.filter((bytes) => bytes < breakEven)).toEqual([]);
    // And at 5 MB/s the groups went through the WAL (they may have entered it at 2 MB/s already)
    // and saved a good part of the stock cost (43–44 % in two runs of 2026-12-01; ~90–110 KB
    // objects save ~50 % at these prices: docs/cost.md)
    expect(high.walproxy.counted.puts).toBeGreaterThan(0);
    expect(priceArms(high.stock.counted, high.walproxy.counted).savedFraction).toBeGreaterThan(0.25);
    // And back at the lowest rate the groups left the WAL again
    expect(back.switches.toInline).toBeGreaterThanOrEqual(1);

    // And nothing was lost: every record is in both topics, every replica byte-identical to its leader
    const consumed = await consumerPerf({ bootstrap, topic: WAL_TOPIC, records: produced });
    expect(consumed.records).toBe(produced);
    expect(await compareReplicas(c.workDirDataDirs(), WAL_TOPIC, PARTITIONS)).toEqual([]);
    expect(await compareReplicas(c.workDirDataDirs(), STOCK_TOPIC, PARTITIONS)).toEqual([]);
    failed = false;
  });
});
