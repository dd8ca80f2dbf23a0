import { afterAll, describe, expect, inject, it } from 'vitest';
import { consumerPerf, producerPerf } from '../src/clients/java-tools.js';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { kcat } from '../src/clients/kcat.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';
import { portPlan } from '../src/cluster/ports.js';
import { NftPortCounter } from '../src/net/nft-counter.js';
import { compareReplicas } from '../src/wal/inspect.js';

const PARTITIONS = 6;
const JAVA_RECORDS = 440_000;
const RECORD_SIZE = 512;
const KAFKAJS_MESSAGES = 20_000;
const KCAT_LINES = 5_000;

let counter: NftPortCounter | undefined;
afterAll(() => counter?.remove());

/** Java perf producer + kafkajs + kcat into one topic: ≥ 240 MB, and the number of records. */
async function workload(bootstrap: string, topic: string): Promise<number> {
  await producerPerf({
    bootstrap,
    topic,
    records: JAVA_RECORDS,
    recordSize: RECORD_SIZE,
    props: { 'linger.ms': 5, 'batch.size': 65_536 },
  });
  const producer = kafkaClient(bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const value = Buffer.alloc(1_000, 'v');
  for (let i = 0; i < KAFKAJS_MESSAGES; i += 1_000) {
    await producer.send({
      topic,
      acks: -1,
      messages: Array.from({ length: 1_000 }, (_, k) => ({ key: `k${(i + k) % 11}`, value })),
    });
  }
  await producer.disconnect();
  const lines = Array.from({ length: KCAT_LINES }, (_, i) => `key-${i % 5}:kcat-${i}`).join('\n');
  const produced = await kcat(
    ['-b', bootstrap, '-t', topic, '-P', '-K', ':', '-X', 'acks=all'],
    `${lines}\n`,
  );
  if (produced.code !== 0) throw new Error(produced.stderr);
  return JAVA_RECORDS + KAFKAJS_MESSAGES + KCAT_LINES;
}

describe('replication through the WAL', () => {
  it('cuts the kernel-counted replication bytes by at least 98% against inline, with byte-identical replicas', async () => {
    const cluster = inject('cluster');
    const plan = portPlan(cluster.ports.base);
    // The cross-zone hop is egress -> replication ingress: count every byte to and from the
    // replication ingresses, in the kernel.
    counter = NftPortCounter.create(
      `e2e_${cluster.ports.base}`,
      [1, 2, 3].map((id) => plan.sidecarReplication(id)),
    );

    const crossZone: Record<string, number> = {};
    const records: Record<string, number> = {};
    for (const [mode, topic] of [
      ['inline', 'wal-inline-replication'],
      ['wal', 'wal-replication'],
    ] as const) {
      await createTopic(cluster.bootstrap, topic, { partitions: PARTITIONS });
      const before = counter.bytes();
      records[topic] = await workload(cluster.bootstrap, topic);
      // Every replica has every batch before the counter is read again.
      expect(await compareReplicas(cluster.dataDirs, topic, PARTITIONS)).toEqual([]);
      crossZone[mode] = counter.bytes() - before;
    }
    const counters = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));
    console.log(
      `replication bytes through the replication ingresses (kernel): inline ${(crossZone.inline! / 1e6).toFixed(1)} MB, wal ${(crossZone.wal! / 1e6).toFixed(1)} MB = ${((100 * crossZone.wal!) / crossZone.inline!).toFixed(2)}%`,
    );
    console.log(
      JSON.stringify(
        counters.map((c) => ({ broker: c.brokerId, ...(c.wal as Record<string, unknown> | undefined) })),
      ),
    );

    // Then references replaced at least 98% of the bytes stock replication sends across zones
    expect(crossZone.inline!).toBeGreaterThan(2 * JAVA_RECORDS * RECORD_SIZE);
    expect(crossZone.wal!).toBeLessThanOrEqual(0.02 * crossZone.inline!);

    // And consumers read every record of both topics, from the leaders and, rack-aware, from followers
    for (const topic of Object.keys(records)) {
      const fromLeaders = await consumerPerf({
        bootstrap: cluster.bootstrap,
        topic,
        records: records[topic]!,
      });
      expect(fromLeaders.records).toBe(records[topic]);
    }
    const consumer = kafkaClient(cluster.bootstrap).consumer({
      groupId: 'wal-replication-rack',
      rackId: 'zone-b',
      maxBytes: 8 << 20,
    });
    await consumer.connect();
    await consumer.subscribe({ topic: 'wal-replication', fromBeginning: true });
    let read = 0;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`rack-aware consumer read ${read} of ${records['wal-replication']}`)),
        120_000,
      );
      void consumer.run({
        eachBatch: async ({ batch }) => {
          read += batch.messages.length;
          if (read >= records['wal-replication']!) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
    await consumer.disconnect();
    expect(read).toBe(records['wal-replication']);
  });
});
