/**
 * `make bench-zone-local` (issue #15): what zone-local produce and consume save between zones, and
 * what zone-local produce adds to produce latency. Three zones on one machine (one network
 * namespace per broker pod and one per zone's clients, e2e/src/net/zone-network.ts); one cluster,
 * three arms in the same run, the same workload in each:
 *   stock              clients at the brokers' DIRECT listeners (no sidecar on their path, no zone
 *                      routing), a topic outside the WAL (followers replicate inline: the sidecars
 *                      relay the broker's bytes), rack-aware consumers (KIP-392): stock at its best
 *   replication only   clients at their zone's client ingress (no zone routing), a WAL topic
 *                      (followers replicate by reference), rack-aware consumers
 *   zone-local         clients at their zone's sidecar (zone bootstrap), a zone.local WAL topic
 * Workload per arm: ProducerPerformance in every zone's namespace (BENCH_BYTES in all, 512 B
 * records, acks=all), then ConsumerPerformance in every zone reading the whole topic. Cross-zone
 * bytes are every byte the kernel counted between two zones, the zones' client namespaces
 * included, per produced GB.
 *
 * Latency: a paced ProducerPerformance (BENCH_LATENCY_RATE records/s for BENCH_LATENCY_SECONDS)
 * in zone-a to a topic whose two partitions are led in zone-b and zone-c, so every batch crosses
 * zones (by reference, in the zone-local arm). "Added" (`produce_p50_added_ms`,
 * `produce_p99_added_ms`) is zone-local minus **stock**, what a user pays against not running
 * walproxy (issue #26); zone-local minus replication only (the same WAL, the same durable ack, the
 * only difference the produce path) is written beside it, `…_added_vs_replication_only_ms`. The store is versitygw
 * behind the store front with S3 Express One Zone-like first-byte latency (p50 3 ms, p99 ~15 ms,
 * e2e/src/s3/store-front.ts), for PUTs and GETs alike.
 *
 * Prints a table and writes `.runs/bench/zone-local.json`. Needs root (network namespaces).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { consumerPerf, type ProducerPerfResult, producerPerf } from '../src/clients/java-tools.js';
import { createTopic, withAdmin } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { repoRoot } from '../src/cluster/paths.js';
import { walSidecarEnv, zonalStoreFlags } from '../src/cluster/wal-settings.js';
import { ZONE_PORTS, zoneSidecarFlags } from '../src/cluster/zone-flags.js';
import {
  crossZoneBytesWithClients,
  storeBytes,
  trafficSince,
  ZONES,
  type Zone,
  ZoneNetwork,
  zoneNetworkAvailable,
} from '../src/net/zone-network.js';
import { startStoreFront } from '../src/s3/store-front.js';
import { startVersitygw } from '../src/s3/versitygw.js';

const BYTES = Number(process.env.BENCH_BYTES ?? 3e8);
const RECORD_SIZE = 512;
const RECORDS_PER_ZONE = Math.round(BYTES / RECORD_SIZE / ZONES.length);
const LATENCY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 1_000);
const LATENCY_SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 30);
const PRODUCER_PROPS = { 'linger.ms': 5, 'batch.size': 65_536 };
const PARTITIONS = 6;

const zoneOfBroker = (id: number) => RACKS[id] as Zone;
const brokerIn = (zone: Zone) => BROKER_IDS.find((id) => zoneOfBroker(id) === zone)!;

interface Arm {
  name: 'stock' | 'replication only' | 'zone-local';
  topic: string;
  bootstrap: (zone: Zone) => string;
  rackAwareConsumers: boolean;
}

interface ArmResult {
  name: Arm['name'];
  producedBytes: number;
  crossZoneBytes: number;
  storeBytes: number;
  full: ProducerPerfResult[];
  paced: ProducerPerfResult;
  /** Zone-local arm: where a paced produce's time went, from the sidecars' counters. */
  zoneLocal?: { storeWaitMeanMs: number; storeWaitMaxMs: number; fillMeanMs: number; fillMaxMs: number };
}

interface ZoneProduceCounters {
  references: { storeMsTotal: number; storeCount: number; storeMsMax: number };
  fill: { fillMsTotal: number; requestsFilled: number; requestsRefused: number; fillMsMax: number };
}

async function zoneCounters(cluster: KafkaCluster): Promise<ZoneProduceCounters[]> {
  return Promise.all(
    BROKER_IDS.map(
      async (id) =>
        ((await cluster.sidecarCounters(id)) as unknown as { zone: { produce: ZoneProduceCounters } }).zone
          .produce,
    ),
  );
}

/** Two partitions led in zone-b and zone-c (followers in the other two zones): every zone-a batch crosses zones. */
async function createPacedTopic(bootstrap: string, topic: string): Promise<void> {
  const [b, c, a] = [brokerIn('zone-b'), brokerIn('zone-c'), brokerIn('zone-a')];
  await withAdmin(bootstrap, async (admin) => {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          replicaAssignment: [
            { partition: 0, replicas: [b, c, a] },
            { partition: 1, replicas: [c, a, b] },
          ],
        },
      ],
    });
  });
}

async function runArm(arm: Arm, cluster: KafkaCluster, zones: ZoneNetwork): Promise<ArmResult> {
  await createTopic(cluster.bootstrap(), arm.topic, { partitions: PARTITIONS });
  const before = zones.traffic();
  const full: ProducerPerfResult[] = [];
  for (const zone of ZONES) {
    full.push(
      await producerPerf({
        bootstrap: arm.bootstrap(zone),
        topic: arm.topic,
        records: RECORDS_PER_ZONE,
        recordSize: RECORD_SIZE,
        props: { ...PRODUCER_PROPS, 'client.id': `bench-${zone}` },
        netns: zones.zoneClients(zone).netns,
        timeoutMs: 1_800_000,
      }),
    );
  }
  const total = RECORDS_PER_ZONE * ZONES.length;
  for (const zone of ZONES) {
    const consumed = await consumerPerf({
      bootstrap: arm.bootstrap(zone),
      topic: arm.topic,
      records: total,
      group: `bench-${arm.topic}-${zone}`,
      props: arm.rackAwareConsumers ? { 'client.rack': zone } : {},
      netns: zones.zoneClients(zone).netns,
      timeoutMs: 1_800_000,
    });
    if (consumed.records !== total)
      throw new Error(`${arm.name}: ${zone} consumed ${consumed.records} of ${total}`);
  }
  // Followers and the metadata topic settle before the counters are read.
  await new Promise((r) => setTimeout(r, 3_000));
  const traffic = trafficSince(before, zones.traffic());

  const pacedTopic = `${arm.topic}-paced`;
  await createPacedTopic(cluster.bootstrap(), pacedTopic);
  const countersBefore = cluster.withSidecars ? await zoneCounters(cluster) : undefined;
  const paced = await producerPerf({
    bootstrap: arm.bootstrap('zone-a'),
    topic: pacedTopic,
    records: LATENCY_RATE * LATENCY_SECONDS,
    recordSize: RECORD_SIZE,
    throughput: LATENCY_RATE,
    props: { ...PRODUCER_PROPS, 'client.id': 'bench-paced' },
    netns: zones.zoneClients('zone-a').netns,
  });
  const result: ArmResult = {
    name: arm.name,
    producedBytes: total * RECORD_SIZE,
    crossZoneBytes: crossZoneBytesWithClients(traffic),
    storeBytes: storeBytes(traffic),
    full,
    paced,
  };
  if (arm.name === 'zone-local' && countersBefore) {
    const after = await zoneCounters(cluster);
    const delta = (pick: (c: ZoneProduceCounters) => number) =>
      after.reduce((n, c) => n + pick(c), 0) - countersBefore.reduce((n, c) => n + pick(c), 0);
    const stores = delta((c) => c.references.storeCount);
    const fills = delta((c) => c.fill.requestsFilled);
    result.zoneLocal = {
      storeWaitMeanMs: stores > 0 ? delta((c) => c.references.storeMsTotal) / stores : 0,
      storeWaitMaxMs: Math.max(...after.map((c) => c.references.storeMsMax)),
      fillMeanMs: fills > 0 ? delta((c) => c.fill.fillMsTotal) / fills : 0,
      fillMaxMs: Math.max(...after.map((c) => c.fill.fillMsMax)),
    };
  }
  console.error(
    `${arm.name}: cross-zone ${(result.crossZoneBytes / 1e6).toFixed(1)} MB for ${(result.producedBytes / 1e6).toFixed(0)} MB produced; paced p50 ${paced.p50Ms} / p99 ${paced.p99Ms} ms`,
  );
  return result;
}

async function main(): Promise<void> {
  if (!zoneNetworkAvailable()) throw new Error('the zone-local benchmark needs root, ip and nft');
  const zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, zoneOfBroker(id)])), {
    zoneClients: true,
  });
  const results: ArmResult[] = [];
  let version = '';
  try {
    const gateway = await startVersitygw({ netns: zones.store.netns, host: zones.store.address });
    const front = await startStoreFront({
      upstream: gateway,
      netns: zones.store.netns,
      host: zones.store.address,
      latency: 's3-express',
    });
    try {
      for (const zone of ZONES) await front.createBucket(`walproxy-${zone}`);
      const cluster = await KafkaCluster.start({
        zones,
        jvmProfile: 'throughput',
        sidecarEnv: walSidecarEnv(),
        sidecarArgs: (id) => [
          ...zonalStoreFlags(RACKS[id]!, front.endpoint),
          '--wal-topic=wal-*',
          '--wal-topic=zl-*',
          // Replication through the WAL in both WAL arms, whatever its objects cost: the arms
          // compare zone-local produce with replication only, not the sealing policy's choice.
          '--topic-config=wal-*:mode=wal',
          '--topic-config=zl-*:mode=wal',
          '--topic-config=zl-*:zone.local=true',
          ...zoneSidecarFlags(id, (pod) => zones.pod(pod).address),
          // A test rig: no TLS between the sidecars, so the figures stay comparable with those
          // measured before the zone ingress required it (docs/benchmarks.md).
          '--zone-ingress-unauthenticated=true',
        ],
      });
      version = cluster.version;
      const clientIngress = (zone: Zone) =>
        `${cluster.podAddress(brokerIn(zone))}:${cluster.ports.sidecarClient(brokerIn(zone))}`;
      const arms: Arm[] = [
        {
          name: 'stock',
          topic: 'bench-stock',
          bootstrap: () => cluster.directBootstrap(),
          rackAwareConsumers: true,
        },
        { name: 'replication only', topic: 'wal-bench', bootstrap: clientIngress, rackAwareConsumers: true },
        {
          name: 'zone-local',
          topic: 'zl-bench',
          bootstrap: (zone) => `${zones.pod(brokerIn(zone)).address}:${ZONE_PORTS.bootstrap}`,
          rackAwareConsumers: false,
        },
      ];
      try {
        for (const arm of arms) results.push(await runArm(arm, cluster, zones));
      } finally {
        await cluster.stop();
      }
    } finally {
      await front.stop();
      await gateway.stop();
    }
  } finally {
    zones.remove();
  }

  const perGb = (r: ArmResult) => r.crossZoneBytes / (r.producedBytes / 1e9);
  const [stock, replication, local] = results as [ArmResult, ArmResult, ArmResult];
  const mbps = (r: ArmResult) => (r.full.reduce((n, f) => n + f.mbPerSec, 0) / r.full.length).toFixed(1);
  console.log(
    `Kafka ${version}; per arm ${(stock.producedBytes / 1e9).toFixed(2)} GB of ${RECORD_SIZE} B records from three zones (acks=all, linger 5 ms, batch 64 KB), read by a consumer in each zone; paced: ${LATENCY_RATE} records/s for ${LATENCY_SECONDS} s from zone-a to leaders in zone-b and zone-c; store: versitygw behind the S3 Express-like store front`,
  );
  console.log(
    '| arm | cross-zone MB per produced GB | vs stock | store MB per GB | producer MB/s (mean of zones) | paced p50 / p99 ms |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(
      `| ${r.name} | ${(perGb(r) / 1e6).toFixed(1)} | ${((100 * perGb(r)) / perGb(stock)).toFixed(2)} % | ${(r.storeBytes / 1e6 / (r.producedBytes / 1e9)).toFixed(0)} | ${mbps(r)} | ${r.paced.p50Ms} / ${r.paced.p99Ms} |`,
    );
  }
  const added = {
    p50: local.paced.p50Ms - stock.paced.p50Ms,
    p99: local.paced.p99Ms - stock.paced.p99Ms,
    p50VsReplication: local.paced.p50Ms - replication.paced.p50Ms,
    p99VsReplication: local.paced.p99Ms - replication.paced.p99Ms,
  };
  console.log(
    `produce latency added by zone-local produce against stock: p50 ${added.p50} ms, p99 ${added.p99} ms (goal ≤ 10 / ≤ 25: ${added.p50 <= 10 && added.p99 <= 25 ? 'met' : 'not met'}); against replication only: p50 ${added.p50VsReplication} ms, p99 ${added.p99VsReplication} ms`,
  );
  if (local.zoneLocal) {
    const z = local.zoneLocal;
    console.log(
      `where it goes (paced phase): the producer's zone sidecar waits ${z.storeWaitMeanMs.toFixed(1)} ms on average for its PUT (max ${z.storeWaitMaxMs.toFixed(0)}), the leader's sidecar ${z.fillMeanMs.toFixed(1)} ms for its GET (max ${z.fillMaxMs.toFixed(0)})`,
    );
  }
  const out = path.join(repoRoot(), '.runs', 'bench');
  mkdirSync(out, { recursive: true });
  writeFileSync(
    path.join(out, 'zone-local.json'),
    `${JSON.stringify(
      {
        stock_cross_zone_bytes_per_gb: Math.round(perGb(stock)),
        replication_only_cross_zone_bytes_per_gb: Math.round(perGb(replication)),
        zone_local_cross_zone_bytes_per_gb: Math.round(perGb(local)),
        produce_p99_added_ms: added.p99,
        produce_p50_added_ms: added.p50,
        produce_p99_added_vs_replication_only_ms: added.p99VsReplication,
        produce_p50_added_vs_replication_only_ms: added.p50VsReplication,
        kafka_version: version,
        produced_bytes_per_arm: stock.producedBytes,
        paced: Object.fromEntries(
          results.map((r) => [r.name, { p50_ms: r.paced.p50Ms, p99_ms: r.paced.p99Ms }]),
        ),
        ...(local.zoneLocal ? { zone_local_time: local.zoneLocal } : {}),
      },
      null,
      2,
    )}\n`,
  );
}

await main();
