import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerPerf, producerPerf } from '../src/clients/java-tools.js';
import { createTopic, kafkaClient, withAdmin } from '../src/clients/kafkajs.js';
import { runKafkajsJob } from '../src/clients/kafkajs-job.js';
import { kcat, kcatReadAtLeast } from '../src/clients/kcat.js';
import { BROKER_IDS, KafkaCluster, RACKS } from '../src/cluster/kafka-cluster.js';
import { walSidecarEnv, zonalStoreFlags, zoneBucket } from '../src/cluster/wal-settings.js';
import { ZONE_PORTS, zoneSidecarFlags } from '../src/cluster/zone-flags.js';
import {
  crossZoneBytes,
  type Endpoint,
  trafficSince,
  ZONES,
  type Zone,
  ZoneNetwork,
  type ZoneTraffic,
} from '../src/net/zone-network.js';
import { type MotoServer, startMoto } from '../src/s3/moto.js';
import { compareReplicas } from '../src/wal/inspect.js';

/**
 * Zone-local routing (issue #15; phase 2's zone-local produce in zone-local-produce.test.ts, also
 * on for this file's workload topic, so that the Kafka releases of `make e2e-compat` run it) on three simulated
 * zones: one network namespace per broker pod, and one per zone for that zone's clients, each on
 * a subnet of its own routed through the fabric, so the kernel counts what every zone's clients
 * exchange with every zone (zone-network.ts). Clients bootstrap at their zone's sidecar and are
 * given, for every node, the zone egress on that sidecar: what they send and read stays in their
 * zone, and consumers read from the replica in their zone (the sidecar supplies the rack id).
 *
 * The zone listeners live in the pods' own namespaces, so their fixed ports (above the ephemeral
 * range) cannot collide with another run.
 */

const PARTITIONS = 6;
const JAVA_RECORDS = 10_000;
const RECORD_SIZE = 512;
const KAFKAJS_MESSAGES = 3_000;
const KAFKAJS_VALUE_BYTES = 500;
const KCAT_LINES = 2_000;
const PER_ZONE = JAVA_RECORDS + KAFKAJS_MESSAGES + KCAT_LINES;

let zones: ZoneNetwork | undefined;
let moto: MotoServer | undefined;
let cluster: KafkaCluster | undefined;
let failed = false;

const zoneOfBroker = (id: number) => RACKS[id] as Zone;

beforeAll(async () => {
  zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, zoneOfBroker(id)])), { zoneClients: true });
  moto = await startMoto({ netns: zones.store.netns, host: zones.store.address });
  for (const id of BROKER_IDS) await moto.createBucket(zoneBucket(RACKS[id]!));
  const endpoint = moto.endpoint;
  const network = zones;
  cluster = await KafkaCluster.start({
    zones,
    sidecarEnv: walSidecarEnv(),
    sidecarArgs: (id) => [
      ...zonalStoreFlags(RACKS[id]!, endpoint),
      '--wal-topic=wal-*',
      // Through the WAL whatever its objects cost (the sealing policy would keep small runs inline).
      '--topic-config=wal-*:mode=wal',
      // Phase 2: the workload's topic is produced zone-locally (references between sidecars).
      '--topic-config=wal-zone-local:zone.local=true',
      ...zoneSidecarFlags(id, (pod) => network.pod(pod).address),
      // A test rig: no TLS between the sidecars. This file's bound on the bytes the pods exchange
      // across zones was measured without it, and TLS adds a record header and tag to every
      // replication round trip: with mTLS the produce phase measured 4.18 MB between pods (20.3 %
      // of the producers' bytes, over the 20 % bound), without it 1.25 MB. zone-local-produce and
      // security run the zone ingress with mutual TLS.
      '--zone-ingress-unauthenticated=true',
    ],
  });
}, 180_000);

afterAll(async () => {
  try {
    await cluster?.stop({ keepLogs: failed || process.env.WALPROXY_KEEP_LOGS === '1' });
    await moto?.stop();
  } finally {
    zones?.remove();
  }
}, 60_000);

/** The zone bootstrap of the broker pod in `zone`. */
function zoneBootstrap(zone: Zone): string {
  const id = BROKER_IDS.find((b) => zoneOfBroker(b) === zone)!;
  return `${zones!.pod(id).address}:${ZONE_PORTS.bootstrap}`;
}

/** Bytes between `zone`'s client namespace and the endpoint, both directions. */
function clientBytes(traffic: ZoneTraffic, zone: Zone, other: Endpoint): number {
  const clients: Endpoint = `clients-${zone}`;
  return traffic.bytes[clients][other] + traffic.bytes[other][clients];
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(2)} MB`;

/** What each zone's clients exchanged with each endpoint, one line per zone. */
function clientSummary(traffic: ZoneTraffic): string {
  return ZONES.map(
    (zone) =>
      `clients-${zone}: ${(['zone-a', 'zone-b', 'zone-c', 'store', 'controller'] as const)
        .map((to) => `${to} ${mb(clientBytes(traffic, zone, to))}`)
        .join(', ')}`,
  ).join('\n');
}

async function sidecarZoneStats(c: KafkaCluster): Promise<Array<Record<string, Record<string, number>>>> {
  return Promise.all(
    BROKER_IDS.map(
      async (id) =>
        (await c.sidecarCounters(id)) as unknown as { zone: Record<string, Record<string, number>> },
    ),
  ).then((all) => all.map((counters) => counters.zone));
}

describe('zone-local routing across three zones (clients in a namespace of each zone)', () => {
  it("keeps every client's bytes in its own zone, and consumers read the replica of their zone", async () => {
    failed = true;
    const c = cluster!;
    const topic = 'wal-zone-local';
    await createTopic(c.bootstrap(), topic, { partitions: PARTITIONS });
    const start = zones!.traffic();

    // Given producers in every zone — the Java perf producer, kafkajs and kcat — each bootstrapping
    // at its zone's sidecar
    for (const zone of ZONES) {
      const netns = zones!.zoneClients(zone).netns;
      const bootstrap = zoneBootstrap(zone);
      await producerPerf({
        bootstrap,
        topic,
        records: JAVA_RECORDS,
        recordSize: RECORD_SIZE,
        props: { 'linger.ms': 5, 'client.id': `perf-producer-${zone}` },
        netns,
      });
      const produced = await runKafkajsJob(
        {
          kind: 'produce',
          bootstrap,
          clientId: `kafkajs-${zone}`,
          topic,
          messages: KAFKAJS_MESSAGES,
          valueBytes: KAFKAJS_VALUE_BYTES,
          prefix: `kafkajs_${zone.replace('-', '')}`,
        },
        { netns },
      );
      expect(produced.produced).toBe(KAFKAJS_MESSAGES);
      const lines = Array.from(
        { length: KCAT_LINES },
        (_, i) => `k${i % 5}:kcat_${zone.replace('-', '')}-${i}`,
      ).join('\n');
      const kcatProduced = await kcat(
        ['-b', bootstrap, '-t', topic, '-P', '-K', ':', '-X', 'acks=all'],
        `${lines}\n`,
        {
          netns,
        },
      );
      expect(kcatProduced.code, kcatProduced.stderr).toBe(0);
    }
    const produced = trafficSince(start, zones!.traffic());
    // Every replica has every batch before anyone reads.
    expect(await compareReplicas(c.workDirDataDirs(), topic, PARTITIONS)).toEqual([]);

    // When consumers in every zone — ConsumerPerformance, kafkajs and kcat, none setting a rack —
    // read the whole topic from their zone's sidecar
    const beforeConsume = zones!.traffic();
    const total = PER_ZONE * ZONES.length;
    for (const zone of ZONES) {
      const netns = zones!.zoneClients(zone).netns;
      const bootstrap = zoneBootstrap(zone);
      const java = await consumerPerf({ bootstrap, topic, records: total, group: `perf-${zone}`, netns });
      expect(java.records).toBe(total);
      const js = await runKafkajsJob(
        {
          kind: 'consume',
          bootstrap,
          clientId: `kafkajs-consumer-${zone}`,
          topic,
          groupId: `kafkajs-${zone}`,
          expected: total,
          timeoutMs: 120_000,
        },
        { netns },
      );
      expect(js.read).toBe(total);
      // Every zone's kafkajs and kcat records, and the Java producers' (no '-' in their values)
      expect(js.prefixes).toEqual({
        ...Object.fromEntries(ZONES.map((z) => [`kafkajs_${z.replace('-', '')}`, KAFKAJS_MESSAGES])),
        ...Object.fromEntries(ZONES.map((z) => [`kcat_${z.replace('-', '')}`, KCAT_LINES])),
        other: JAVA_RECORDS * ZONES.length,
      });
      const read = await kcat(
        ['-b', bootstrap, '-t', topic, '-C', '-e', '-o', 'beginning', '-q', '-f', '%s\\n'],
        '',
        {
          netns,
          timeoutMs: 180_000,
        },
      );
      expect(read.code, read.stderr).toBe(0);
      expect(read.stdout.split('\n').filter((l) => l !== '').length).toBe(total);
    }
    const consumed = trafficSince(beforeConsume, zones!.traffic());
    const whole = trafficSince(start, zones!.traffic());
    console.log(
      `kernel, produce phase: pods across zones ${mb(crossZoneBytes(produced))}\n${clientSummary(produced)}`,
    );
    console.log(
      `kernel, consume phase: pods across zones ${mb(crossZoneBytes(consumed))}\n${clientSummary(consumed)}`,
    );

    // Then no zone's clients sent or received a single byte to or from another zone, the store or
    // the controller: every connection went to their zone's sidecar
    for (const zone of ZONES) {
      for (const other of [...ZONES.filter((z) => z !== zone), 'store', 'controller'] as const) {
        expect(clientBytes(whole, zone, other), `clients-${zone} <-> ${other}`).toBe(0);
      }
    }
    // And producers' batches did not cross zones either: the pods exchanged a fraction of what the
    // producers sent (references, answers, replication round trips, the WAL index: 9.5 % with this
    // workload's small batches, on 4.4) where forwarding bytes puts two thirds of it between zones
    const sentByProducers = ZONES.reduce((n, zone) => n + produced.bytes[`clients-${zone}`][zone], 0);
    expect(sentByProducers).toBeGreaterThan(PER_ZONE * ZONES.length * 400);
    expect(crossZoneBytes(produced)).toBeLessThan(0.2 * sentByProducers);
    // And consumers read from the replica in their zone: what the brokers' pods sent each other
    // while 9 consumers read the topic is a small fraction of what the consumers received
    const delivered = ZONES.reduce((sum, zone) => sum + consumed.bytes[zone][`clients-${zone}`], 0);
    expect(delivered).toBeGreaterThan(9 * PER_ZONE * ZONES.length * 400);
    expect(crossZoneBytes(consumed)).toBeLessThan(0.05 * delivered);

    // And the sidecars routed by zone: Metadata rewritten, rack ids supplied, and the WAL still
    // copied the batches that reached their leader through the zone ingress
    const stats = await sidecarZoneStats(c);
    for (const zone of stats) {
      expect(zone.zoneListeners!.metadataRewritten).toBeGreaterThan(0);
      expect(zone.zoneListeners!.fetchRackIdsSet).toBeGreaterThan(0);
    }
    const references = await Promise.all(BROKER_IDS.map((id) => c.sidecarCounters(id)));
    expect(
      references.reduce(
        (sum, counters) =>
          sum +
          Number((counters.wal?.fetchStrip as { referencesSent?: number } | undefined)?.referencesSent ?? 0),
        0,
      ),
    ).toBeGreaterThan(0);
    failed = false;
  });

  it('leaves a client with no zone exactly as today: stock addresses, produce and consume', async () => {
    failed = true;
    const c = cluster!;
    const topic = 'zone-no-zone';
    await createTopic(c.bootstrap(), topic, { partitions: 3 });
    const before = await sidecarZoneStats(c);
    // Given a kafkajs client in the test runner's namespace, bootstrapping at the client ingresses
    const brokers = await withAdmin(c.bootstrap(), async (admin) => (await admin.describeCluster()).brokers);
    // Then it is told the brokers' own advertised addresses
    expect(brokers.map((b) => `${b.nodeId}@${b.host}:${b.port}`).sort()).toEqual(
      BROKER_IDS.map((id) => `${id}@${c.podAddress(id)}:${c.ports.sidecarClient(id)}`),
    );
    // And it produces and consumes as before
    const producer = kafkaClient(c.bootstrap()).producer({ idempotent: true });
    await producer.connect();
    await producer.send({
      topic,
      acks: -1,
      messages: Array.from({ length: 200 }, (_, i) => ({ value: `v${i}` })),
    });
    await producer.disconnect();
    const read = await kcat(['-b', c.bootstrap(), '-t', topic, '-C', '-e', '-o', 'beginning', '-q']);
    expect(read.stdout.split('\n').filter((l) => l !== '').length).toBe(200);
    // And no client ingress rewrote anything for it
    const after = await sidecarZoneStats(c);
    for (const [i, zone] of after.entries()) {
      expect(zone.clientIngress!.metadataRewritten).toBe(before[i]!.clientIngress!.metadataRewritten);
      expect(zone.clientIngress!.describeClusterRewritten).toBe(0);
    }
    failed = false;
  });

  it("routes a client whose client.id names its zone through any sidecar's client ingress", async () => {
    failed = true;
    const c = cluster!;
    const topic = 'zone-hinted';
    await createTopic(c.bootstrap(), topic, { partitions: 3 });
    // Given a kcat in zone-b that names zone-b in its client.id and bootstraps at zone-a's client ingress
    const netns = zones!.zoneClients('zone-b').netns;
    const zoneA = BROKER_IDS.find((id) => zoneOfBroker(id) === 'zone-a')!;
    const bootstrap = `${c.podAddress(zoneA)}:${c.ports.sidecarClient(zoneA)}`;
    const hint = ['-X', 'client.id=kcat,walproxy_az=zone-b'];
    const before = zones!.traffic();
    // When it produces and reads back 2 MB
    const lines = Array.from({ length: 2_000 }, (_, i) => `${i}-${'x'.repeat(1_000)}`).join('\n');
    const produced = await kcat(
      ['-b', bootstrap, ...hint, '-t', topic, '-P', '-X', 'acks=all'],
      `${lines}\n`,
      {
        netns,
      },
    );
    expect(produced.code, produced.stderr).toBe(0);
    // It reads zone-b's replica (KIP-392): read until every record is visible there (bounded)
    const read = await kcatReadAtLeast(
      ['-b', bootstrap, ...hint, '-t', topic, '-C', '-e', '-o', 'beginning', '-q'],
      2_000,
      { netns },
    );
    expect(read.lines.length).toBe(2_000);
    const traffic = trafficSince(before, zones!.traffic());
    console.log(`kernel, hinted client:\n${clientSummary(traffic)}`);
    // Then only the bootstrap exchange went to zone-a; the data went through zone-b's sidecar
    expect(clientBytes(traffic, 'zone-b', 'zone-b')).toBeGreaterThan(4_000_000);
    expect(clientBytes(traffic, 'zone-b', 'zone-a')).toBeGreaterThan(0);
    expect(clientBytes(traffic, 'zone-b', 'zone-a')).toBeLessThan(100_000);
    expect(clientBytes(traffic, 'zone-b', 'zone-c')).toBe(0);
    failed = false;
  });
});
