/**
 * `make demo`: a local KRaft cluster (controller + brokers in racks zone-a/b/c) with a walproxy
 * sidecar in front of every broker and a real S3 API server (moto) as the WAL store. The same
 * workload goes into two topics: one outside the WAL (stock replication, through the same
 * sidecars) and one in the WAL with the sealing policy's defaults (mode=auto: followers get
 * references while the objects pay for themselves). The report shows what crossed between zones
 * for each, and what each cost, priced from the sidecars' own counters.
 *
 * As root (with iproute2 and nft), each broker pod runs in its own network namespace in one of
 * three simulated zones (e2e/src/net/zone-network.ts) and the kernel counts every byte routed from
 * one zone to another. Otherwise everything shares loopback and the sidecars' own counters of the
 * replication hop stand in for it.
 */

import { DEFAULT_PRICES, type MeasuredCost } from '@walproxy/proxy';
import { consumerPerf, producerPerf } from './clients/java-tools.js';
import { createTopic, underReplicated } from './clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS, type SidecarCounters } from './cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from './cluster/wal-settings.js';
import { type Counted, costSnapshot, countedBetween, priceArms } from './cost/measure.js';
import { crossZoneBytes, type Zone, ZoneNetwork, zoneNetworkAvailable } from './net/zone-network.js';
import { startMoto } from './s3/moto.js';
import { compareReplicas } from './wal/inspect.js';

const RECORDS = Number(process.env.DEMO_RECORDS ?? 200_000);
const RECORD_SIZE = 512;
const PARTITIONS = 6;

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

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

/** Bytes that crossed the replication hop: follower fetches in, and the answers as sent out. */
async function replicationHopBytes(cluster: KafkaCluster): Promise<number> {
  const counters: SidecarCounters[] = await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id)));
  return counters.reduce((sum, c) => {
    const l = c.listeners.replication;
    return sum + (l ? l.bytesFromDownstream + l.bytesToDownstream : 0);
  }, 0);
}

async function main(): Promise<void> {
  console.log(
    'walproxy demo: starting an S3 API server (moto) and a stock Apache Kafka cluster with a sidecar per broker…',
  );
  const zones = zoneNetworkAvailable()
    ? ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, RACKS[id] as Zone])))
    : undefined;
  const crossZone = async (c: KafkaCluster) =>
    zones ? crossZoneBytes(zones.traffic()) : await replicationHopBytes(c);
  const moto = await startMoto(zones ? { netns: zones.store.netns, host: zones.store.address } : {});
  const s3 = {
    endpoint: moto.endpoint,
    bucket: 'walproxy-demo',
    prefix: 'wal/',
    walTopicGlob: 'wal-*',
    pid: moto.pid,
  };
  await moto.createBucket(s3.bucket);
  let cluster: KafkaCluster | undefined;
  let failed = false;
  try {
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
      `  clients bootstrap at the sidecars: ${bootstrap}; WAL store: s3://${s3.bucket}/${s3.prefix} at ${s3.endpoint}`,
    );
    console.log(
      zones
        ? '  each broker pod in its own network namespace, one per zone: the kernel counts what crosses zones'
        : '  not root (or no ip/nft): one shared loopback; the sidecars count the replication hop instead',
    );

    const results: Array<{
      label: string;
      topic: string;
      produced: number;
      hop: number;
      mbPerSec: number;
      p99: number;
      counted: Counted;
    }> = [];
    const adminUrls = BROKER_IDS.map((id) => cluster!.adminUrl(id));
    for (const [label, topic] of [
      ['stock replication (no WAL)', 'demo-stock'],
      ['replication through the WAL', 'wal-demo'],
    ] as const) {
      await createTopic(bootstrap, topic, { partitions: PARTITIONS, replicationFactor: 3 });
      const before = await crossZone(cluster);
      const countersBefore = await costSnapshot(adminUrls, zones);
      console.log(
        `\n${label}: producing ${RECORDS} records of ${RECORD_SIZE} B into ${topic} (acks=all, RF=3)…`,
      );
      const run = await producerPerf({
        bootstrap,
        topic,
        records: RECORDS,
        recordSize: RECORD_SIZE,
        props: { 'linger.ms': 5, 'batch.size': 65_536 },
      });
      const differences = await compareReplicas(cluster.workDirDataDirs(), topic, PARTITIONS);
      const consumed = await consumerPerf({ bootstrap, topic, records: RECORDS });
      const hop = (await crossZone(cluster)) - before;
      const counted = countedBetween(countersBefore, await costSnapshot(adminUrls, zones));
      console.log(
        `  ${run.records} records at ${run.mbPerSec.toFixed(1)} MB/s (p99 ${run.p99Ms} ms); consumed ${consumed.records}; replicas ${differences.length === 0 ? 'byte-identical' : `DIFFER: ${differences.join('; ')}`}`,
      );
      results.push({
        label,
        topic,
        produced: run.records * RECORD_SIZE,
        hop,
        mbPerSec: run.mbPerSec,
        p99: run.p99Ms,
        counted,
      });
    }

    const lagging = await underReplicated(
      bootstrap,
      results.map((r) => r.topic),
    );
    const [stock, wal] = results as [(typeof results)[0], (typeof results)[0]];
    const counters = await Promise.all(BROKER_IDS.map((id) => cluster!.sidecarCounters(id)));
    const objects = counters.reduce((n, c) => n + (c.wal?.writer.objectsUploaded ?? 0), 0);
    const objectBytes = counters.reduce((n, c) => n + (c.wal?.writer.bytesUploaded ?? 0), 0);
    console.log(
      zones
        ? '\nwhat crossed between zones (kernel-counted: every byte between broker pods):'
        : '\nwhat crossed the replication hop (follower fetches, sidecar counters):',
    );
    for (const r of results)
      console.log(`  ${r.label.padEnd(30)} ${mb(r.hop).padStart(10)}  for ${mb(r.produced)} produced`);
    const saved = stock.hop - wal.hop;
    console.log(
      `  saved: ${mb(saved)} (${((100 * saved) / stock.hop).toFixed(1)}% of stock), under-replicated partitions: ${lagging.length === 0 ? 'none' : lagging.join(', ')}`,
    );
    console.log(
      `  WAL objects written: ${objects}, ${mb(objectBytes)} (mean ${objects ? (objectBytes / objects / 1000).toFixed(0) : 0} KB)`,
    );
    const priced = priceMeasuredRun(stock.counted, wal.counted);
    console.log(
      `\nwhat it cost, priced from the sidecars' counters (${wal.counted.puts} PUTs, ${wal.counted.gets} GETs, ${wal.counted.sidecarCpuSeconds?.toFixed(1)} sidecar CPU-s in the WAL arm) and ${zones ? "the kernel's" : 'estimated'} cross-zone bytes (${DEFAULT_PRICES.region} prices):`,
    );
    for (const l of priced.lines) console.log(l);
    console.log(
      '  a new latency-budget group replicates inline until its rate shows its objects would pay (10 s); run `walproxy cost --from-metrics <sidecar>/metrics` on your own cluster (docs/cost.md)',
    );
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    await cluster?.stop({ keepLogs: failed });
    await moto.stop();
    zones?.remove();
    console.log('\ncluster and S3 server stopped.');
  }
}

await main();
