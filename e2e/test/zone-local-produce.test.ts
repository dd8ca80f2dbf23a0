import net from 'node:net';
import {
  crc32c,
  decodeProduceResponse,
  ErrorCode,
  encodeProduceReference,
  encodeProduceRequest,
  encodeRequestHeader,
} from '@walproxy/shared';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerPerf, producerPerf } from '../src/clients/java-tools.js';
import { createTopic, kafkaClient, underReplicated, withAdmin } from '../src/clients/kafkajs.js';
import { runKafkajsJob } from '../src/clients/kafkajs-job.js';
import { kcat, kcatReadAtLeast } from '../src/clients/kcat.js';
import { verifiableProducer } from '../src/clients/verifiable-producer.js';
import { type CounterSnapshot, counterDelta, counterSnapshot } from '../src/cluster/cluster-info.js';
import { BROKER_IDS, KafkaCluster, RACKS, type SidecarCounters } from '../src/cluster/kafka-cluster.js';
import { walSidecarEnv, zonalStoreFlags, zoneBucket } from '../src/cluster/wal-settings.js';
import { ZONE_PORTS, type ZonePeerTls, zonePeerTls, zoneSidecarFlags } from '../src/cluster/zone-flags.js';
import {
  crossZoneBytes,
  crossZoneBytesWithClients,
  crossZonePairs,
  type Endpoint,
  trafficSince,
  ZONES,
  type Zone,
  ZoneNetwork,
  type ZoneTraffic,
} from '../src/net/zone-network.js';
import { startVersitygw, type VersitygwServer } from '../src/s3/versitygw.js';
import { compareReplicas } from '../src/wal/inspect.js';

/**
 * Zone-local produce (issue #15, phase 2) on three simulated zones, clients in a network namespace
 * of each zone, every byte counted by the kernel (zone-network.ts). A zone-aware producer's
 * batches for a leader in another zone are stored in its own zone's bucket by its zone's sidecar,
 * which forwards references; the leader's sidecar fills them from that bucket and the broker gets
 * the producer's bytes. Followers replicate by reference, consumers read the replica of their zone.
 *
 * The stock arm of the 2 % comparison runs in the same run on the same brokers, through their
 * DIRECT listener (advertised as itself: no sidecar on the client path, no zone routing) and on a
 * topic that is not in the WAL (followers replicate inline, the sidecars relay their bytes
 * unchanged): the network path and every byte of stock Kafka, without a second cluster. Its
 * consumers set client.rack (KIP-392), the best stock does, so the comparison is against stock's
 * ⅔ produce + 2 replication per produced byte, not the 3⅓ of rack-unaware consumers.
 */

const PARTITIONS = 6;
const JAVA_RECORDS = 24_000;
const RECORD_SIZE = 512;
const KAFKAJS_MESSAGES = 3_000;
const KAFKAJS_VALUE_BYTES = 1_000;
const KCAT_LINES = 3_000;
const KCAT_LINE_BYTES = 1_000;
const PER_ZONE = JAVA_RECORDS + KAFKAJS_MESSAGES + KCAT_LINES;
/** Producers batch as a throughput-minded producer would; the same settings in both arms. */
const JAVA_PRODUCER = { 'linger.ms': 10, 'batch.size': 131_072 };

let zones: ZoneNetwork | undefined;
let store: VersitygwServer | undefined;
let cluster: KafkaCluster | undefined;
let peerTls: ZonePeerTls | undefined;
let failed = false;

const zoneOfBroker = (id: number) => RACKS[id] as Zone;
const brokerIn = (zone: Zone) => BROKER_IDS.find((id) => zoneOfBroker(id) === zone)!;

beforeAll(async () => {
  zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, zoneOfBroker(id)])), { zoneClients: true });
  // versitygw, not moto: the zone-local arm stores every remote-leader batch before the producer
  // is answered, a burst of small PUTs from three sidecars that queues in moto (slowest write 83–90
  // ms here, 37–72 with versitygw). One CI run measured 3.5 % instead of the usual ~1 %, without
  // saying where (the 2 % assertion's message does now); a store write past the zone-local store
  // timeout would do it (the sidecar then rightly sends bytes across zones until its store probe
  // answers), and that is a store fault, which store-faults-zones.test.ts covers, not this file.
  store = await startVersitygw({ netns: zones.store.netns, host: zones.store.address });
  for (const id of BROKER_IDS) await store.createBucket(zoneBucket(RACKS[id]!));
  const endpoint = store.endpoint;
  const network = zones;
  // The zone ingress takes only peer sidecars authenticated by mutual TLS.
  const peers = zonePeerTls((pod) => network.pod(pod).address);
  peerTls = peers;
  cluster = await KafkaCluster.start({
    zones,
    sidecarEnv: walSidecarEnv(),
    sidecarArgs: (id) => [
      ...zonalStoreFlags(RACKS[id]!, endpoint),
      '--wal-topic=zl-*',
      // Through the WAL whatever its objects cost (the sealing policy would keep small runs inline).
      '--topic-config=zl-*:mode=wal',
      '--topic-config=zl-*:zone.local=true',
      ...zoneSidecarFlags(id, (pod) => network.pod(pod).address),
      ...peers.flags(id),
    ],
  });
}, 180_000);

afterAll(async () => {
  try {
    await cluster?.stop({ keepLogs: failed || process.env.WALPROXY_KEEP_LOGS === '1' });
    await store?.stop();
  } finally {
    zones?.remove();
    peerTls?.remove();
  }
}, 60_000);

function zoneBootstrap(zone: Zone): string {
  return `${zones!.pod(brokerIn(zone)).address}:${ZONE_PORTS.bootstrap}`;
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(2)} MB`;

/** Bytes between `zone`'s client namespace and `other`, both directions. */
function clientBytes(traffic: ZoneTraffic, zone: Zone, other: Endpoint): number {
  const clients: Endpoint = `clients-${zone}`;
  return traffic.bytes[clients][other] + traffic.bytes[other][clients];
}

interface ZoneProduceCounters {
  references: {
    requestsReferenced: number;
    batchesReferenced: number;
    bytesReferenced: number;
    batchesAsBytes: Record<string, number>;
    fallbacksStarted: number;
    storeMsMax: number;
  };
  fill: { requestsFilled: number; batchesFilled: number; requestsRefused: number };
}

async function zoneProduceCounters(c: KafkaCluster): Promise<ZoneProduceCounters[]> {
  return Promise.all(
    BROKER_IDS.map(
      async (id) =>
        ((await c.sidecarCounters(id)) as unknown as { zone: { produce: ZoneProduceCounters } }).zone.produce,
    ),
  );
}

/** Bytes the leader sides relayed inline in follower fetches between two snapshots, by reason. */
function fetchInlineBytesByReason(before: CounterSnapshot, after: CounterSnapshot): Record<string, number> {
  const byReason = (c: SidecarCounters) =>
    (c.wal?.fetchStrip?.inlineBytesByReason ?? {}) as Record<string, number>;
  const reasons = new Set(Object.values(after).flatMap((c) => Object.keys(byReason(c))));
  const delta: Record<string, number> = {};
  for (const reason of reasons) {
    const bytes = counterDelta(before, after, (c) => byReason(c)[reason]);
    if (bytes !== 0) delta[reason] = bytes;
  }
  return delta;
}

/** Each sidecar's store degradations between two snapshots (WAL topics inline, zone-local produce as bytes meanwhile). */
function storeDegradations(before: CounterSnapshot, after: CounterSnapshot): number[] {
  const degradations = (c: SidecarCounters) =>
    (c as unknown as { store?: { degradations?: number } }).store?.degradations;
  return BROKER_IDS.map((id) => counterDelta(before, after, degradations, [id]));
}

const sum = (counters: ZoneProduceCounters[], pick: (c: ZoneProduceCounters) => number) =>
  counters.reduce((n, c) => n + pick(c), 0);

/**
 * One arm of the workload from every zone's client namespace: the Java perf producer, kafkajs and
 * kcat produce, then ConsumerPerformance, kafkajs and kcat in every zone read the whole topic.
 */
async function workload(
  topic: string,
  bootstrapOf: (zone: Zone) => string,
  consumerRack: boolean,
): Promise<{ produce: ZoneTraffic; whole: ZoneTraffic }> {
  const start = zones!.traffic();
  for (const zone of ZONES) {
    const netns = zones!.zoneClients(zone).netns;
    const bootstrap = bootstrapOf(zone);
    const tag = zone.replace('-', '');
    await producerPerf({
      bootstrap,
      topic,
      records: JAVA_RECORDS,
      recordSize: RECORD_SIZE,
      props: { ...JAVA_PRODUCER, 'client.id': `perf-${zone}` },
      netns,
    });
    const js = await runKafkajsJob(
      {
        kind: 'produce',
        bootstrap,
        clientId: `kafkajs-${zone}`,
        topic,
        messages: KAFKAJS_MESSAGES,
        valueBytes: KAFKAJS_VALUE_BYTES,
        prefix: `kafkajs_${tag}`,
      },
      { netns },
    );
    expect(js.produced).toBe(KAFKAJS_MESSAGES);
    const lines = Array.from({ length: KCAT_LINES }, (_, i) =>
      `k${i % 5}:kcat_${tag}-${i}-`.padEnd(KCAT_LINE_BYTES, 'c'),
    ).join('\n');
    const produced = await kcat(
      ['-b', bootstrap, '-t', topic, '-P', '-K', ':', '-X', 'acks=all'],
      `${lines}\n`,
      {
        netns,
      },
    );
    expect(produced.code, produced.stderr).toBe(0);
  }
  const produce = trafficSince(start, zones!.traffic());
  // Every replica has every batch before anyone reads.
  expect(await compareReplicas(cluster!.workDirDataDirs(), topic, PARTITIONS)).toEqual([]);
  // And every follower is in the ISR again (both arms): a leader names a consumer's zone replica
  // as its read replica (KIP-392) only while that replica is in sync, else it serves the consumer
  // itself, across zones. A follower the produce left behind on this shared machine is printed.
  const lagging = await underReplicated(cluster!.bootstrap(), [topic]);
  if (lagging.length > 0) {
    console.log(`${topic}: before reading, out of the ISR: ${lagging.join('; ')}`);
    await waitFor(
      async () => ((await underReplicated(cluster!.bootstrap(), [topic])).length === 0 ? true : undefined),
      60_000,
    );
  }

  const total = PER_ZONE * ZONES.length;
  for (const zone of ZONES) {
    const netns = zones!.zoneClients(zone).netns;
    const bootstrap = bootstrapOf(zone);
    const rack: Record<string, string> = consumerRack ? { 'client.rack': zone } : {};
    const java = await consumerPerf({
      bootstrap,
      topic,
      records: total,
      group: `perf-${topic}-${zone}`,
      props: rack,
      netns,
    });
    expect(java.records).toBe(total);
    const js = await runKafkajsJob(
      {
        kind: 'consume',
        bootstrap,
        clientId: `kafkajs-consumer-${zone}`,
        topic,
        groupId: `kafkajs-${topic}-${zone}`,
        expected: total,
        timeoutMs: 120_000,
        ...(consumerRack ? { rackId: zone } : {}),
      },
      { netns },
    );
    expect(js.read).toBe(total);
    const read = await kcat(
      [
        '-b',
        bootstrap,
        '-t',
        topic,
        '-C',
        '-e',
        '-o',
        'beginning',
        '-q',
        '-f',
        '%s\\n',
        ...(consumerRack ? ['-X', `client.rack=${zone}`] : []),
      ],
      '',
      { netns, timeoutMs: 180_000 },
    );
    expect(read.code, read.stderr).toBe(0);
    expect(read.stdout.split('\n').filter((l) => l !== '').length).toBe(total);
  }
  return { produce, whole: trafficSince(start, zones!.traffic()) };
}

describe('zone-local produce across three zones (clients in a namespace of each zone)', () => {
  it('moves at most 2 % of what stock Kafka moves between zones for the same workload: produce, replication and consume', async () => {
    failed = true;
    const c = cluster!;
    await createTopic(c.bootstrap(), 'stock-workload', { partitions: PARTITIONS });
    await createTopic(c.bootstrap(), 'zl-workload', { partitions: PARTITIONS });

    // Given the stock path: every zone's clients at the brokers' DIRECT listeners, a topic
    // replicated inline, rack-aware consumers
    const stock = await workload('stock-workload', () => c.directBootstrap(), true);
    // And the zone-local path: the same clients at their zone's sidecar, a zone.local WAL topic,
    // consumers that set no rack
    const before = await zoneProduceCounters(c);
    const snapshotBefore = await counterSnapshot(c, BROKER_IDS);
    const local = await workload('zl-workload', zoneBootstrap, false);
    const after = await zoneProduceCounters(c);
    const snapshotAfter = await counterSnapshot(c, BROKER_IDS);

    const stockBytes = crossZoneBytesWithClients(stock.whole);
    const localBytes = crossZoneBytesWithClients(local.whole);
    const producedBytes =
      ZONES.length *
      (JAVA_RECORDS * RECORD_SIZE + KAFKAJS_MESSAGES * KAFKAJS_VALUE_BYTES + KCAT_LINES * KCAT_LINE_BYTES);
    console.log(
      `kernel, every byte between zones (pods and clients), ${mb(producedBytes)} produced: stock ${mb(stockBytes)} (produce phase ${mb(crossZoneBytesWithClients(stock.produce))}), zone-local ${mb(localBytes)} (produce phase ${mb(crossZoneBytesWithClients(local.produce))}, pods only ${mb(crossZoneBytes(local.whole))}) = ${((100 * localBytes) / stockBytes).toFixed(2)} %`,
    );
    const referenced =
      sum(after, (z) => z.references.bytesReferenced) - sum(before, (z) => z.references.bytesReferenced);
    console.log(
      `zone-local produce: ${mb(referenced)} of batches sent as references; as bytes by reason: ${JSON.stringify(
        after.map((z) => z.references.batchesAsBytes),
      )}`,
    );

    // Where the zone-local arm's cross-zone bytes went, phase by phase and pod pair by pod pair,
    // and which follower fetches leaders answered with bytes: printed, and in the 2 % assertion's
    // message, so a run that misses it says why.
    const whereLocalBytesWent = `produce phase ${JSON.stringify(crossZonePairs(local.produce))}; whole ${JSON.stringify(
      crossZonePairs(local.whole),
    )}; follower fetches answered inline, bytes by reason ${JSON.stringify(
      fetchInlineBytesByReason(snapshotBefore, snapshotAfter),
    )}; produce batches sent as bytes, by reason, and the slowest store write, per zone ${JSON.stringify(
      after.map((z) => ({
        asBytes: Object.fromEntries(Object.entries(z.references.batchesAsBytes).filter(([, n]) => n > 0)),
        storeMsMax: Math.round(z.references.storeMsMax),
      })),
    )}; store degradations per sidecar ${JSON.stringify(storeDegradations(snapshotBefore, snapshotAfter))}`;
    console.log(`zone-local arm, cross-zone bytes: ${whereLocalBytesWent}`);

    // Then stock moved what it always does (⅔ of the produce to other zones' leaders, 2 replicas)
    expect(stockBytes).toBeGreaterThan(2.4 * producedBytes);
    // And zone-local moved at most 2 % of that
    expect(localBytes, whereLocalBytesWent).toBeLessThanOrEqual(0.02 * stockBytes);
    // And the producers' batches went by reference, every one filled, none refused
    expect(referenced).toBeGreaterThan(0.5 * producedBytes);
    expect(sum(after, (z) => z.fill.requestsRefused)).toBe(0);
    expect(sum(after, (z) => z.references.fallbacksStarted)).toBe(0);
    // And no zone's clients exchanged a byte with another zone
    for (const zone of ZONES) {
      for (const other of ZONES.filter((z) => z !== zone)) {
        expect(clientBytes(local.whole, zone, other), `clients-${zone} <-> ${other}`).toBe(0);
      }
    }
    failed = false;
  });

  it('delivers exactly once from idempotent and transactional producers, to read_committed readers and a rebalancing group, in order per partition', async () => {
    failed = true;
    const c = cluster!;
    const topic = 'zl-exactly-once';
    await createTopic(c.bootstrap(), topic, { partitions: PARTITIONS });
    const before = await zoneProduceCounters(c);
    // Given an idempotent kafkajs producer in zone-a and a transactional one in zone-b, both at
    // their zone's sidecar, committing every other transaction and aborting the rest
    const [idempotent, transactional] = await Promise.all([
      runKafkajsJob(
        {
          kind: 'produce',
          bootstrap: zoneBootstrap('zone-a'),
          clientId: 'zl-idempotent',
          topic,
          messages: 6_000,
          valueBytes: 300,
          prefix: 'idem',
        },
        { netns: zones!.zoneClients('zone-a').netns },
      ),
      runKafkajsJob(
        {
          kind: 'transactions',
          bootstrap: zoneBootstrap('zone-b'),
          clientId: 'zl-transactional',
          topic,
          transactionalId: 'zl-txn',
          transactions: 20,
          perTransaction: 150,
          prefix: 'txn',
        },
        { netns: zones!.zoneClients('zone-b').netns },
      ),
    ]);
    const expected = new Set([
      ...Array.from({ length: idempotent.produced! }, (_, i) => `idem-${i}-`.padEnd(300, 'v')),
      ...transactional.committed!,
    ]);
    expect(transactional.aborted).toBe(10 * 150);

    // When a read_committed reader in zone-c reads the topic (its zone's replica, whose high
    // watermark may trail the leader's for a moment: read until every record is there, bounded)
    const read = await kcatReadAtLeast(
      [
        '-b',
        zoneBootstrap('zone-c'),
        '-t',
        topic,
        '-C',
        '-e',
        '-o',
        'beginning',
        '-q',
        '-X',
        'isolation.level=read_committed',
        '-f',
        '%p %s\n',
      ],
      expected.size,
      { netns: zones!.zoneClients('zone-c').netns, timeoutMs: 120_000 },
    );
    expect(read.code, read.stderr).toBe(0);
    // Then it sees every idempotent and committed record exactly once, nothing aborted, and each
    // producer's records in the order it sent them, partition by partition
    const values = read.lines;
    const seen = new Map<string, number>();
    const partitionsRead = new Set<number>();
    const last = new Map<string, number>();
    let outOfOrder = 0;
    for (const line of values) {
      const [partition, value] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
      partitionsRead.add(Number(partition));
      seen.set(value, (seen.get(value) ?? 0) + 1);
      const match = /^(\w+)-(\d+)-/.exec(value)!;
      const key = `${partition}/${match[1]}`;
      if ((last.get(key) ?? -1) >= Number(match[2])) outOfOrder++;
      last.set(key, Number(match[2]));
    }
    expect([...seen.values()].filter((n) => n > 1).length).toBe(0);
    expect(seen.size).toBe(expected.size);
    expect([...expected].filter((v) => !seen.has(v)).slice(0, 5)).toEqual([]);
    expect(outOfOrder).toBe(0);

    // And a consumer group in zone-c whose second member joins midway (a rebalance) reads every
    // committed record, in order on each member
    const group = await runKafkajsJob(
      {
        kind: 'group-rebalance',
        bootstrap: zoneBootstrap('zone-c'),
        clientId: 'zl-group',
        topic,
        groupId: 'zl-exactly-once-group',
        expected: expected.size,
        joinAfter: 2_000,
        timeoutMs: 120_000,
      },
      { netns: zones!.zoneClients('zone-c').netns },
    );
    expect(group.distinct).toBe(expected.size);
    expect(group.outOfOrder).toBe(0);
    expect(group.generations![0]).toBeGreaterThanOrEqual(2);
    expect(group.generations![1]).toBeGreaterThanOrEqual(1);

    // And the producers' batches went by reference (transactional ones included)
    const after = await zoneProduceCounters(c);
    expect(sum(after, (z) => z.references.batchesReferenced)).toBeGreaterThan(
      sum(before, (z) => z.references.batchesReferenced) + 20,
    );
    // (seven keys over six partitions: murmur2 may send none to a partition, whose logs are then
    // rightly empty; every partition a record was read from must hold identical batches)
    const unread = Array.from({ length: PARTITIONS }, (_, p) => p).filter((p) => !partitionsRead.has(p));
    expect(await compareReplicas(c.workDirDataDirs(), topic, PARTITIONS, { mayBeEmpty: unread })).toEqual([]);
    failed = false;
  });

  it('loses no acknowledged record when a partition leader is killed with SIGKILL under zone-local load, and the producer recovers by itself', async () => {
    failed = true;
    const c = cluster!;
    const topic = 'zl-failover';
    const total = 40_000;
    await createTopic(c.bootstrap(), topic, { partitions: 3, configs: { 'min.insync.replicas': '2' } });
    // The victim leads a partition from another zone than the producer's: its batches go by reference
    const producerZone: Zone = 'zone-a';
    let victim = -1;
    for (let p = 0; p < 3 && victim < 0; p++) {
      const leader = await leaderOf(c, topic, p);
      if (zoneOfBroker(leader) !== producerZone) victim = leader;
    }
    expect(victim).toBeGreaterThan(0);
    const before = await zoneProduceCounters(c);

    // Given Kafka's VerifiableProducer (idempotent, acks=all) in zone-a at its zone's sidecar
    const producing = verifiableProducer({
      bootstrap: zoneBootstrap(producerZone),
      topic,
      maxMessages: total,
      throughput: 2_500,
      netns: zones!.zoneClients(producerZone).netns,
    });
    // When the victim is killed under load, and restarted a while later
    await new Promise((r) => setTimeout(r, 6_000));
    await c.stopBroker(victim, 'SIGKILL');
    await waitFor(async () => {
      const leaders = await Promise.all([0, 1, 2].map((p) => leaderOf(c, topic, p).catch(() => -1)));
      return leaders.every((l) => l >= 0 && l !== victim) ? true : undefined;
    }, 30_000);
    await new Promise((r) => setTimeout(r, 4_000));
    await c.startBroker(victim);
    const result = await producing;
    console.log(
      `failover: killed broker ${victim}; ${result.acknowledged.length} acknowledged, ${result.failed.length} failed sends`,
    );
    // Then the producer finished by itself, most of its records acknowledged
    expect(result.code, result.stderr.slice(-3000)).toBe(0);
    expect(result.acknowledged.length).toBeGreaterThan(total / 2);
    // And every send has its outcome: values "0".."total-1", each acknowledged or failed, once
    const outcomes = new Map<string, number>();
    for (const value of [...result.acknowledged.map((a) => a.value), ...result.failed])
      outcomes.set(value, (outcomes.get(value) ?? 0) + 1);
    const sent = Array.from({ length: total }, (_, i) => String(i));
    expect(sent.filter((v) => outcomes.get(v) !== 1).slice(0, 10)).toEqual([]);
    expect(outcomes.size).toBe(total);
    // And the restarted broker caught up, so every replica holds all the topic will hold
    await waitFor(
      async () => ((await underReplicated(c.bootstrap(), [topic])).length === 0 ? true : undefined),
      90_000,
    );
    // And every acknowledged record is in the topic exactly once, and no failed one is in it
    // (from the producer's zone's replica: read until at least every acknowledged record is there)
    const consumed = await kcatReadAtLeast(
      ['-b', zoneBootstrap(producerZone), '-t', topic, '-C', '-e', '-o', 'beginning', '-q', '-f', '%s\n'],
      result.acknowledged.length,
      { netns: zones!.zoneClients(producerZone).netns, timeoutMs: 120_000 },
    );
    expect(consumed.code, consumed.stderr).toBe(0);
    const seen = new Map<string, number>();
    for (const value of consumed.stdout.split('\n'))
      if (value !== '') seen.set(value, (seen.get(value) ?? 0) + 1);
    expect(result.acknowledged.filter((a) => !seen.has(a.value)).slice(0, 10)).toEqual([]);
    expect([...seen].filter(([, n]) => n > 1).slice(0, 10)).toEqual([]);
    expect(result.failed.filter((v) => seen.has(v)).slice(0, 10)).toEqual([]);
    // And the load went by reference, before and after the kill
    const after = await zoneProduceCounters(c);
    expect(sum(after, (z) => z.references.batchesReferenced)).toBeGreaterThan(
      sum(before, (z) => z.references.batchesReferenced),
    );
    // And every replica is identical
    expect(await compareReplicas(c.workDirDataDirs(), topic, 3)).toEqual([]);
    failed = false;
  });

  it('leaves a client with no zone, and one that ignores the rewritten addresses, working as before', async () => {
    failed = true;
    const c = cluster!;
    const topic = 'zl-other-clients';
    await createTopic(c.bootstrap(), topic, { partitions: 3 });
    const sendAndRead = async (kafka: ReturnType<typeof kafkaClient>, prefix: string) => {
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: 300 }, (_, i) => ({ key: `k${i % 3}`, value: `${prefix}-${i}` })),
      });
      await producer.disconnect();
    };
    // Given a client with no zone, in the test runner's namespace, at the client ingresses
    await sendAndRead(kafkaClient(c.bootstrap(), 'no-zone'), 'nozone');
    // And a client that names zone-b in its client.id, so that it is given zone-b's sidecar for
    // every node, but dials each node's client ingress whatever address it is given (a client
    // with hard-coded broker addresses)
    const ignoring = new Kafka({
      clientId: 'ignoring,walproxy_az=zone-b',
      brokers: [`${c.podAddress(1)}:${c.ports.sidecarClient(1)}`],
      logLevel: logLevel.NOTHING,
      socketFactory: ({ host, port, onConnect }) => {
        const node = port - ZONE_PORTS.egressBase;
        const to = BROKER_IDS.includes(node as 1 | 2 | 3)
          ? { host: c.podAddress(node), port: c.ports.sidecarClient(node) }
          : { host, port };
        const socket = net.connect(to, onConnect);
        socket.setKeepAlive(true, 60_000);
        return socket;
      },
    });
    const rewrittenBefore = (await c.sidecarCounters(1)) as unknown as {
      zone: { clientIngress: { metadataRewritten: number } };
    };
    await sendAndRead(ignoring, 'ignoring');
    const rewrittenAfter = (await c.sidecarCounters(1)) as unknown as {
      zone: { clientIngress: { metadataRewritten: number } };
    };
    expect(rewrittenAfter.zone.clientIngress.metadataRewritten).toBeGreaterThan(
      rewrittenBefore.zone.clientIngress.metadataRewritten,
    );
    // Then both produced and read everything
    const read = await kcat([
      '-b',
      c.bootstrap(),
      '-t',
      topic,
      '-C',
      '-e',
      '-o',
      'beginning',
      '-q',
      '-f',
      '%s\n',
    ]);
    const values = read.stdout.split('\n').filter((l) => l !== '');
    expect(values.filter((v) => v.startsWith('nozone-')).length).toBe(300);
    expect(values.filter((v) => v.startsWith('ignoring-')).length).toBe(300);
    failed = false;
  });

  it('refuses a reference at a broker reached without walproxy: INVALID_RECORD, nothing appended', async () => {
    failed = true;
    const c = cluster!;
    // Given a reference as a zone sidecar forwards it, sent straight to a broker's DIRECT listener
    const topic = 'zl-unfilled';
    await createTopic(c.bootstrap(), topic, { partitions: 1 });
    const leader = await leaderOf(c, topic, 0);
    const produced = magicV2Batch('a record nobody may append');
    const reference = encodeProduceReference(produced, {
      store: 's3://walproxy-zone-a/wal',
      objectKey: 'wal/none.wal',
      position: 0,
      objectSize: produced.length,
    });
    const answer = await produceRaw(c.podAddress(leader), c.ports.brokerDirect(leader), topic, reference);
    console.log(`a broker's answer to an unfilled reference: ${JSON.stringify(answer)}`);
    // Then the broker refuses it as a corrupt record batch (its magic is not 2), and its log is empty
    expect(answer.errorCode).toBe(ErrorCode.CORRUPT_MESSAGE);
    const offsets = await withAdmin(c.bootstrap(), (admin) => admin.fetchTopicOffsets(topic));
    expect(offsets.map((o) => o.high)).toEqual(['0']);
    failed = false;
  });
});

/** A magic v2 batch of one record's worth of bytes, as a producer lays the header out. */
function magicV2Batch(records: string): Buffer {
  const body = Buffer.from(records);
  const b = Buffer.alloc(61 + body.length);
  b.writeInt32BE(b.length - 12, 8);
  b.writeInt32BE(-1, 12);
  b.writeInt8(2, 16);
  b.writeBigInt64BE(-1n, 43);
  b.writeInt16BE(-1, 51);
  b.writeInt32BE(-1, 53);
  b.writeInt32BE(1, 57);
  body.copy(b, 61);
  b.writeUInt32BE(crc32c(b.subarray(21)), 17);
  return b;
}

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function leaderOf(c: KafkaCluster, topic: string, partition: number): Promise<number> {
  return withAdmin(c.bootstrap(), async (admin) => {
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    return metadata.topics[0]!.partitions.find((p) => p.partitionId === partition)!.leader;
  });
}

/** Sends one Produce v9 (acks=-1) with `records` for partition 0 and returns the partition's answer. */
async function produceRaw(
  host: string,
  port: number,
  topic: string,
  records: Buffer,
): Promise<{ errorCode: number; errorMessage: string | null | undefined }> {
  const header = encodeRequestHeader({ apiKey: 0, apiVersion: 9, correlationId: 1, clientId: 'raw' });
  const body = encodeProduceRequest(
    {
      transactionalId: null,
      acks: -1,
      timeoutMs: 10_000,
      topicData: [{ name: topic, partitionData: [{ index: 0, records }] }],
    },
    9,
  );
  const size = Buffer.alloc(4);
  size.writeInt32BE(header.length + body.length, 0);
  const socket = net.connect({ host, port });
  const response = await new Promise<Buffer>((resolve, reject) => {
    let data = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      if (data.length >= 4 && data.length >= 4 + data.readInt32BE(0)) resolve(data);
    });
    socket.on('error', reject);
    socket.write(Buffer.concat([size, header, body]));
  });
  socket.destroy();
  const decoded = decodeProduceResponse(response.subarray(4 + 5), 9);
  const { errorCode, errorMessage } = decoded.responses[0]!.partitionResponses[0]!;
  return { errorCode, errorMessage };
}
