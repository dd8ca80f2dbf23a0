/**
 * `make demo`: a local KRaft cluster (controller + brokers in racks zone-a/b/c) with a walproxy
 * sidecar in front of every broker and a real S3 API server (moto) as the WAL store. The same
 * workload goes into two topics: one outside the WAL (stock replication, through the same
 * sidecars) and one in the WAL with the sealing policy's defaults (mode=auto: followers get
 * references while the objects pay for themselves). The report shows what crossed between zones
 * for each, zone pair by zone pair, what still went inline and why, and what each cost, priced
 * from the sidecars' own counters. The WAL arm is measured once the topic's latency-budget group
 * has entered the WAL on every leader, as a topic in use would be (warm-up bursts, not counted).
 *
 * As root (with iproute2 and nft: `make demo` installs them), each broker pod runs in its own
 * network namespace in one of three simulated zones (e2e/src/net/zone-network.ts) and the kernel
 * counts every byte routed from one zone to another. Otherwise everything shares loopback, the
 * sidecars' own counters of the replication hop stand in for the kernel's, and the demo says so.
 */

import { execFileSync } from 'node:child_process';
import { DEFAULT_PRICES, type MeasuredCost, SEALING_DEFAULTS } from '@walproxy/proxy';
import { consumerPerf, producerPerf } from './clients/java-tools.js';
import { createTopic, kafkaClient, underReplicated } from './clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS, type SidecarCounters } from './cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from './cluster/wal-settings.js';
import { type Counted, costSnapshot, countedBetween, priceArms } from './cost/measure.js';
import {
  crossZoneBytes,
  storeBytes,
  trafficSince,
  ZONES,
  type Zone,
  ZoneNetwork,
  type ZoneTraffic,
} from './net/zone-network.js';
import { startMoto } from './s3/moto.js';
import { compareReplicas } from './wal/inspect.js';

const RECORDS = Number(process.env.DEMO_RECORDS ?? 200_000);
const RECORD_SIZE = 512;
const PARTITIONS = 6;
const PHASES = 7;
/** The producer of both arms and of the warm-up: acks=all (producerPerf's default), 5 ms linger, 64 KB batches. */
const PRODUCER_PROPS = { 'linger.ms': 5, 'batch.size': 65_536 };

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const started = Date.now();
let phase = 0;

/** One line per phase, with the time since the demo started. */
function step(what: string): void {
  phase++;
  console.log(`\n[${phase}/${PHASES} ${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${what}`);
}

/** Why the kernel cannot count here, or undefined when it can (root, ip, nft). */
function zoneNetworkMissing(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root, so no network namespaces';
  for (const [command, args, pkg] of [
    ['ip', ['netns', 'list'], 'iproute2'],
    ['nft', ['--version'], 'nftables'],
  ] as const) {
    try {
      execFileSync(command, args, { stdio: 'ignore' });
    } catch {
      return `no \`${command}\` (Debian package ${pkg}; \`make demo\` installs it as root)`;
    }
  }
  return undefined;
}

/** What went inline, summed over the sidecars: leader-side batches by reason, follower fallbacks, produce not copied. */
interface InlineCounts {
  leaderBatches: Record<string, number>;
  followerFallbacks: Record<string, number>;
  produceNotCopied: Record<string, number>;
  referencesSent: number;
  replicationHopBytes: number;
  objects: number;
  objectBytes: number;
}

function add(into: Record<string, number>, from: unknown): void {
  if (typeof from !== 'object' || from === null) return;
  for (const [k, v] of Object.entries(from)) if (typeof v === 'number') into[k] = (into[k] ?? 0) + v;
}

async function inlineCounts(cluster: KafkaCluster): Promise<InlineCounts> {
  const all: SidecarCounters[] = await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id)));
  const counts: InlineCounts = {
    leaderBatches: {},
    followerFallbacks: {},
    produceNotCopied: {},
    referencesSent: 0,
    replicationHopBytes: 0,
    objects: 0,
    objectBytes: 0,
  };
  for (const c of all) {
    add(counts.leaderBatches, c.wal?.fetchStrip?.inline);
    add(counts.followerFallbacks, c.wal?.fetchFill?.fallbacks);
    const p = c.wal?.produce;
    add(counts.produceNotCopied, {
      inlineMode: p?.batchesNotCopiedInlineMode,
      belowBreakEven: c.wal?.writer.batchesAbandoned,
      storeDegraded: p?.batchesNotCopiedStoreDegraded,
      unknownTopicIds: p?.unknownTopicIds,
      unsupportedVersions: p?.unsupportedVersions,
      batchesNotCopied: p?.batchesNotCopied,
    });
    counts.referencesSent += Number(c.wal?.fetchStrip?.referencesSent ?? 0);
    const l = c.listeners.replication;
    counts.replicationHopBytes += l ? l.bytesFromDownstream + l.bytesToDownstream : 0;
    counts.objects += c.wal?.writer.objectsUploaded ?? 0;
    counts.objectBytes += c.wal?.writer.bytesUploaded ?? 0;
  }
  return counts;
}

function minus(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]));
}

function countsSince(before: InlineCounts, after: InlineCounts): InlineCounts {
  return {
    leaderBatches: minus(after.leaderBatches, before.leaderBatches),
    followerFallbacks: minus(after.followerFallbacks, before.followerFallbacks),
    produceNotCopied: minus(after.produceNotCopied, before.produceNotCopied),
    referencesSent: after.referencesSent - before.referencesSent,
    replicationHopBytes: after.replicationHopBytes - before.replicationHopBytes,
    objects: after.objects - before.objects,
    objectBytes: after.objectBytes - before.objectBytes,
  };
}

/** `reason n, reason n` of the non-zero counts, or "none". */
function reasons(counts: Record<string, number>): string {
  const nonZero = Object.entries(counts).filter(([, n]) => n > 0);
  return nonZero.length === 0 ? 'none' : nonZero.map(([k, n]) => `${k} ${n}`).join(', ');
}

interface ArmResult {
  label: string;
  topic: string;
  produced: number;
  mbPerSec: number;
  p99: number;
  /** Bytes between zones: the kernel's counters, or the sidecars' replication hop on loopback. */
  crossZone: number;
  traffic?: ZoneTraffic;
  inline: InlineCounts;
  /** The sidecars' /metrics and the kernel's counters over the arm, for priceMeasuredRun. */
  counted: Counted;
}

/**
 * What the run cost, priced from the sidecars' own counters (issue #14; docs/cost.md, "What a
 * saving is"): each arm's PUTs, GETs, bytes and the sidecars' process CPU from their /metrics,
 * and what crossed between zones (the kernel's count, or the sidecars' estimate on loopback).
 * walproxy's replication — its store requests and bytes, its cross-zone bytes, its sidecars' CPU
 * beyond what they spent relaying the stock arm — against the stock arm's cross-zone transfer.
 */
function priceMeasuredRun(stock: Counted, wal: Counted): { cost: MeasuredCost; lines: string[] } {
  const cost = priceArms(stock, wal, { prices: DEFAULT_PRICES, layout: { replicationFactor: 3, zones: 3 } });
  const usd = (n: number) => `$${n.toFixed(5)}`;
  const month = (n: number) => `$${((n * 30 * 24 * 3600) / wal.durationSec).toFixed(2)}`;
  const lines = [
    `  stock replication, cross-zone: ${usd(cost.stockUsd)} (${month(cost.stockUsd)} a month at this rate)`,
    ...cost.walproxy.map((l) => `    ${l.item}: ${usd(l.usd)}`),
    `  walproxy's replication: ${usd(cost.walproxyUsd)} (${month(cost.walproxyUsd)} a month)`,
    `    relaying, as any proxy in front of the broker (the stock arm's ${stock.sidecarCpuSeconds?.toFixed(1)} CPU-s; not in the saving): ${usd(cost.proxyUsd)}`,
    `  saved: ${usd(cost.savedUsd)} = ${(100 * cost.savedFraction).toFixed(1)} % of stock (${month(cost.savedUsd)} a month); net of relaying ${usd(cost.netSavedUsd)}`,
  ];
  return { cost, lines };
}

/**
 * One record to every partition of a mode=auto topic: each leader's sealing policy then knows
 * the topic's latency-budget group, whose first decision waits --wal-mode-rate-window-ms after
 * its first batch, as a topic already in use would have it. Returns when that was.
 */
async function announce(bootstrap: string, topic: string): Promise<number> {
  const producer = kafkaClient(bootstrap, 'walproxy-demo').producer();
  await producer.connect();
  try {
    await producer.send({
      topic,
      messages: Array.from({ length: PARTITIONS }, (_, partition) => ({ partition, value: 'hello' })),
    });
  } finally {
    await producer.disconnect();
  }
  return Date.now();
}

/** Records per warm-up burst of the WAL arm's topic, and the most bursts before measuring anyway. */
const WARM_UP_RECORDS = 6_000;
const WARM_UP_BURSTS = 6;

/** How many leaders' sealing policies replicate the topic's latency-budget group through the WAL. */
async function leadersInWal(cluster: KafkaCluster): Promise<number> {
  const all = await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id)));
  return all.filter((c) =>
    c.wal?.sealing?.some((g) => g.budgetMs === SEALING_DEFAULTS.latencyBudgetMs && g.mode === 'wal'),
  ).length;
}

/**
 * A topic in use has its latency-budget group in the WAL already. A group that has only just
 * started carrying data replicates inline until three of its objects in a row have shown that
 * they pay (--wal-mode-enter-after-objects): on this workload each leader's first round of
 * requests (five in flight, ~0.7 MB) and more go inline, which would be a third of a
 * 20,000-record arm or more, and varies with the machine's speed; at ~2 MB/s per leader and a
 * 30 ms linger the objects are near the entry size (53 KB), so entry may take a burst or two.
 * So the arm is measured from when every leader's policy has put the group in the WAL: bursts of
 * the same workload, not counted, until then (at most WARM_UP_BURSTS; the arm is measured either
 * way and the report says how many leaders were in the WAL).
 */
async function warmUp(cluster: KafkaCluster, bootstrap: string, topic: string): Promise<void> {
  let bursts = 0;
  let inWal = await leadersInWal(cluster);
  while (inWal < BROKER_IDS.length && bursts < WARM_UP_BURSTS) {
    bursts++;
    await producerPerf({
      bootstrap,
      topic,
      records: WARM_UP_RECORDS,
      recordSize: RECORD_SIZE,
      props: PRODUCER_PROPS,
    });
    inWal = await leadersInWal(cluster);
  }
  console.log(
    `  warm-up (not counted): ${bursts} burst${bursts === 1 ? '' : 's'} of ${WARM_UP_RECORDS} records; the topic's latency-budget group replicates through the WAL on ${inWal} of ${BROKER_IDS.length} leaders (a new group stays inline until its objects have shown they pay)`,
  );
}

async function main(): Promise<void> {
  console.log('walproxy demo: stock Apache Kafka, a walproxy sidecar per broker, an S3 API server (moto)');
  const missing = zoneNetworkMissing();
  step(
    missing
      ? `one shared loopback (${missing}): the sidecars count the replication hop instead of the kernel counting zones`
      : 'three zones: a network namespace per broker pod, the kernel counts every byte between zones',
  );
  const zones = missing
    ? undefined
    : ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, RACKS[id] as Zone])));
  let cluster: KafkaCluster | undefined;
  let moto: Awaited<ReturnType<typeof startMoto>> | undefined;
  let failed = false;
  try {
    step('starting the S3 API server (moto) and the cluster: a controller, 3 brokers, 3 sidecars…');
    moto = await startMoto(zones ? { netns: zones.store.netns, host: zones.store.address } : {});
    const s3 = { endpoint: moto.endpoint, bucket: 'walproxy-demo', prefix: 'wal/', walTopicGlob: 'wal-*' };
    await moto.createBucket(s3.bucket);
    cluster = await KafkaCluster.start({
      ...(zones ? { zones } : {}),
      sidecars: true,
      // The demo's WAL topic under the sealing policy, as a deployment runs by default.
      sidecarArgs: () => walSidecarArgs(s3, ['--topic-config=wal-demo:mode=auto']),
      sidecarEnv: walSidecarEnv(),
    });
    const bootstrap = cluster.bootstrap();
    console.log(
      `  Kafka ${cluster.version}; brokers ${BROKER_IDS.map((id) => `${id} in ${RACKS[id]}`).join(', ')}`,
    );
    console.log(
      `  clients bootstrap at the sidecars: ${bootstrap}; WAL store s3://${s3.bucket}/${s3.prefix} at ${s3.endpoint}`,
    );

    const results: ArmResult[] = [];
    const adminUrls = BROKER_IDS.map((id) => cluster!.adminUrl(id));
    await createTopic(bootstrap, 'wal-demo', { partitions: PARTITIONS, replicationFactor: 3 });
    const announced = await announce(bootstrap, 'wal-demo');
    for (const [label, topic] of [
      ['stock replication (no WAL)', 'demo-stock'],
      ['replication through the WAL', 'wal-demo'],
    ] as const) {
      step(
        `${label}: ${RECORDS} records of ${RECORD_SIZE} B into ${topic} (acks=all, RF=3, ${PARTITIONS} partitions)…`,
      );
      if (topic === 'wal-demo') {
        // The stock arm usually outlasts the sealing policy's first wait; if it did not, the rest.
        const wait = announced + SEALING_DEFAULTS.rateWindowMs - Date.now();
        if (wait > 0) {
          console.log(
            `  waiting ${(wait / 1000).toFixed(1)} s: a new latency-budget group replicates inline for its first ${SEALING_DEFAULTS.rateWindowMs / 1000} s (--wal-mode-rate-window-ms)`,
          );
          await new Promise((r) => setTimeout(r, wait));
        }
        await warmUp(cluster, bootstrap, topic);
      } else {
        await createTopic(bootstrap, topic, { partitions: PARTITIONS, replicationFactor: 3 });
      }
      const trafficBefore = zones?.traffic();
      const countsBefore = await inlineCounts(cluster);
      const countersBefore = await costSnapshot(adminUrls, zones);
      const run = await producerPerf({
        bootstrap,
        topic,
        records: RECORDS,
        recordSize: RECORD_SIZE,
        props: PRODUCER_PROPS,
      });
      const differences = await compareReplicas(cluster.workDirDataDirs(), topic, PARTITIONS);
      const consumed = await consumerPerf({ bootstrap, topic, records: RECORDS });
      const traffic = zones && trafficBefore ? trafficSince(trafficBefore, zones.traffic()) : undefined;
      const inline = countsSince(countsBefore, await inlineCounts(cluster));
      const counted = countedBetween(countersBefore, await costSnapshot(adminUrls, zones));
      console.log(
        `  ${run.records} records at ${run.mbPerSec.toFixed(1)} MB/s (p99 ${run.p99Ms} ms); consumed ${consumed.records}; replicas ${differences.length === 0 ? 'byte-identical' : `DIFFER: ${differences.join('; ')}`}`,
      );
      results.push({
        label,
        topic,
        produced: run.records * RECORD_SIZE,
        mbPerSec: run.mbPerSec,
        p99: run.p99Ms,
        crossZone: traffic ? crossZoneBytes(traffic) : inline.replicationHopBytes,
        ...(traffic ? { traffic } : {}),
        inline,
        counted,
      });
    }
    const [stock, wal] = results as [ArmResult, ArmResult];

    step(
      zones
        ? 'what crossed between zones (kernel-counted: every IP byte between broker pods, both arms)'
        : 'what crossed the replication hop (sidecar counters: follower fetches and their answers)',
    );
    const col = (s: string) => s.padStart(14);
    console.log(`  ${''.padEnd(22)}${col(stock.label.split(' ')[0]!)}${col('WAL')}`);
    if (stock.traffic && wal.traffic) {
      for (const from of ZONES) {
        for (const to of ZONES) {
          if (from === to) continue;
          console.log(
            `  ${`${from} → ${to}`.padEnd(22)}${col(mb(stock.traffic.bytes[from][to]))}${col(mb(wal.traffic.bytes[from][to]))}`,
          );
        }
      }
      console.log(
        `  ${'zones ↔ object store'.padEnd(22)}${col(mb(storeBytes(stock.traffic)))}${col(mb(storeBytes(wal.traffic)))}  (zone-local with S3 Express One Zone)`,
      );
    }
    console.log(
      `  ${'total between zones'.padEnd(22)}${col(mb(stock.crossZone))}${col(mb(wal.crossZone))}  for ${mb(wal.produced)} produced each`,
    );
    const saved = stock.crossZone - wal.crossZone;
    const lagging = await underReplicated(
      bootstrap,
      results.map((r) => r.topic),
    );
    console.log(
      `  saved: ${mb(saved)} (${((100 * saved) / stock.crossZone).toFixed(1)}% of stock); under-replicated partitions: ${lagging.length === 0 ? 'none' : lagging.join(', ')}`,
    );
    console.log(
      `  WAL objects written: ${wal.inline.objects}, ${mb(wal.inline.objectBytes)} (mean ${wal.inline.objects ? (wal.inline.objectBytes / wal.inline.objects / 1000).toFixed(0) : 0} KB); references sent: ${wal.inline.referencesSent}`,
    );

    step('what went inline, and why (sidecar counters, all topics, during each arm)');
    for (const r of results) {
      console.log(`  ${r.label}:`);
      console.log(`    leader side, batches sent inline by reason: ${reasons(r.inline.leaderBatches)}`);
      console.log(
        `    follower side, fills that fell back by reason: ${reasons(r.inline.followerFallbacks)}`,
      );
      console.log(`    produce data not copied to the WAL: ${reasons(r.inline.produceNotCopied)}`);
    }
    console.log(
      '  topicNotInWal: topics without the WAL (the stock arm, the metadata topic, __consumer_offsets); groupInline: batches of a mode=auto topic while its latency-budget group replicates inline (its objects would not pay); notInWal: batches of a WAL topic missing from the WAL (a fallback, or an object abandoned below break-even); unknownTopic: the sidecar had not yet looked the topic up; control: transaction markers; inlineMode, belowBreakEven: what the sealing policy kept out of the store',
    );

    step(
      `what it cost, priced from the sidecars' counters (${wal.counted.puts} PUTs, ${wal.counted.gets} GETs, ${wal.counted.sidecarCpuSeconds?.toFixed(1)} sidecar CPU-s in the WAL arm) and ${zones ? "the kernel's" : 'estimated'} cross-zone bytes (${DEFAULT_PRICES.region} prices)`,
    );
    const priced = priceMeasuredRun(stock.counted, wal.counted);
    for (const l of priced.lines) console.log(l);
    console.log(
      '  run `walproxy cost --from-metrics <sidecar>/metrics` on your own cluster, `walproxy cost --throughput-mbps <your rate>` for a rate (docs/cost.md)',
    );
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    await cluster?.stop({ keepLogs: failed });
    await moto?.stop();
    zones?.remove();
    console.log(`\ncluster and S3 server stopped (${((Date.now() - started) / 1000).toFixed(0)} s).`);
  }
}

await main();
