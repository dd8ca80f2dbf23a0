/**
 * `make demo`: a local KRaft cluster (controller + brokers in racks zone-a/b/c) with a walproxy
 * sidecar in front of every broker and a real S3 API server (moto) as the WAL store. The same
 * workload goes into two topics: one replicated the stock way (mode=inline) and one replicated
 * through the WAL (followers get references and read the bytes from the store). The report shows
 * what crossed between zones for each.
 *
 * As root (with iproute2 and nft), each broker pod runs in its own network namespace in one of
 * three simulated zones (e2e/src/net/zone-network.ts) and the kernel counts every byte routed from
 * one zone to another. Otherwise everything shares loopback and the sidecars' own counters of the
 * replication hop stand in for it.
 */

import { computeCost, DEFAULT_PRICES } from '@walproxy/proxy';
import { consumerPerf, producerPerf } from './clients/java-tools.js';
import { createTopic, underReplicated } from './clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS, type SidecarCounters } from './cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from './cluster/wal-settings.js';
import { crossZoneBytes, type Zone, ZoneNetwork, zoneNetworkAvailable } from './net/zone-network.js';
import { startMoto } from './s3/moto.js';
import { compareReplicas } from './wal/inspect.js';

const RECORDS = Number(process.env.DEMO_RECORDS ?? 200_000);
const RECORD_SIZE = 512;
const PARTITIONS = 6;

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

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
      sidecarArgs: () => walSidecarArgs(s3),
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
    }> = [];
    for (const [label, topic] of [
      ['stock replication (inline)', 'wal-inline-demo'],
      ['replication through the WAL', 'wal-demo'],
    ] as const) {
      await createTopic(bootstrap, topic, { partitions: PARTITIONS, replicationFactor: 3 });
      const before = await crossZone(cluster);
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
    // What a month at this run's rate would cost, with `walproxy cost`'s model and price table,
    // and the cross-zone residue this run measured.
    const cost = computeCost(
      {
        throughputBytesPerSec: wal.mbPerSec * 1e6,
        replicationFactor: 3,
        zones: 3,
        lingerMs: 10,
        objectBytes: 400_000,
        brokers: BROKER_IDS.length,
        retentionSec: 3_600,
        residualFraction: wal.hop / stock.hop,
      },
      DEFAULT_PRICES,
    );
    console.log(
      `\nat this run's rate (${wal.mbPerSec.toFixed(1)} MB/s) for a month (\`walproxy cost\`): stock replication $${cost.stockUsd.toFixed(2)}, walproxy $${cost.walproxyUsd.toFixed(2)}, saved $${cost.savedUsd.toFixed(2)}`,
    );
    if (cost.breakEvenBytesPerSec !== undefined) {
      console.log(
        `  break-even at these settings (10 ms linger, 400 KB objects, 3 brokers): ${(cost.breakEvenBytesPerSec / 1e6).toFixed(1)} MB/s; below it the PUTs of small objects cost more than the transfer they save (a longer --wal-linger-ms lowers it)`,
      );
    }
    console.log('  run `walproxy cost --throughput-mbps <your rate>` for your own figures (docs/cost.md)');
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
