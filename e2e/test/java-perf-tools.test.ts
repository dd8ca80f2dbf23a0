import { describe, expect, inject, it } from 'vitest';
import { consumerPerf, javaProtocolVersions, producerPerf } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import {
  type CounterSnapshot,
  counterDelta,
  counterSnapshot,
  walPublishingIdle,
} from '../src/cluster/cluster-info.js';

const TOPIC = 'e2e-java-perf';
const RECORDS = 200_000;
const RECORD_SIZE = 256;

/** Requests per "Api vN" that reached one listener of every sidecar between two snapshots (only those that did). */
function requestsBetween(
  before: CounterSnapshot,
  after: CounterSnapshot,
  listener: string,
): Record<string, number> {
  const keys = new Set(
    Object.values(after).flatMap((c) => Object.keys(c.listeners[listener]?.requests ?? {})),
  );
  const out: Record<string, number> = {};
  for (const key of keys) {
    const n = counterDelta(before, after, (c) => c.listeners[listener]?.requests[key]);
    if (n > 0) out[key] = n;
  }
  return out;
}

/** The share of the requests of one API (`prefix`, 'Produce v') that came in version `key`. */
function shareOf(requests: Record<string, number>, prefix: string, key: string): number {
  const all = Object.entries(requests)
    .filter(([k]) => k.startsWith(prefix))
    .reduce((sum, [, n]) => sum + n, 0);
  return all === 0 ? 0 : (requests[key] ?? 0) / all;
}

describe('Java perf tools through the sidecars', () => {
  it('ProducerPerformance and ConsumerPerformance move every record with the newest Produce and Fetch', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3 });
    // Counted from here: the shared cluster's counters hold every file that ran before, and the
    // sidecars' own metadata producers (kafkajs, through the client listeners) may still be
    // publishing what the file before wrote to the WAL
    await walPublishingIdle(cluster);
    const beforeProduce = await counterSnapshot(cluster);

    // When the Java producer (newest Produce version) writes 200,000 records with acks=all
    const produced = await producerPerf({
      bootstrap: cluster.bootstrap,
      topic: TOPIC,
      records: RECORDS,
      recordSize: RECORD_SIZE,
    });
    expect(produced.records).toBe(RECORDS);
    const afterProduce = await counterSnapshot(cluster);

    // And the Java consumer (newest Fetch version) reads them back
    const consumed = await consumerPerf({ bootstrap: cluster.bootstrap, topic: TOPIC, records: RECORDS });
    expect(consumed.records).toBe(RECORDS);
    const afterConsume = await counterSnapshot(cluster);

    // Then the sidecars' client ingresses carried this producer's records in the Java client's
    // newest Produce, and this consumer's reads in its newest Fetch
    // (Kafka 4.1+: v13 and v18; 4.0: v12 and v17; 3.9: v11 and v17)
    const expected = javaProtocolVersions(cluster.kafkaVersion);
    const producing = requestsBetween(beforeProduce, afterProduce, 'client');
    const consuming = requestsBetween(afterProduce, afterConsume, 'client');
    const replicating = requestsBetween(beforeProduce, afterProduce, 'replication');
    console.info(
      `[java-perf-tools] Kafka ${cluster.kafkaVersion}: while producing, client ingress ${JSON.stringify(producing)}, replication ingress ${JSON.stringify(replicating)}; while consuming, client ingress ${JSON.stringify(consuming)}`,
    );
    // (a share, not "the only version": the sidecars' own kafkajs metadata producers and a Java
    // client's request sent before it knew a new topic's id (Produce v12 on 4.1+) are other
    // clients' choices, seen once in CI; a sidecar capping the version would leave the newest 0 %)
    const produceKey = `Produce v${expected.produce}`;
    expect(producing[produceKey]).toBeGreaterThan(0);
    expect(shareOf(producing, 'Produce v', produceKey), JSON.stringify(producing)).toBeGreaterThanOrEqual(
      0.95,
    );
    const fromProducer = counterDelta(
      beforeProduce,
      afterProduce,
      (c) => c.listeners.client?.bytesFromDownstream,
    );
    expect(fromProducer).toBeGreaterThanOrEqual(RECORDS * RECORD_SIZE);
    const fetchKey = `Fetch v${expected.fetch}`;
    expect(consuming[fetchKey]).toBeGreaterThan(0);
    expect(shareOf(consuming, 'Fetch v', fetchKey), JSON.stringify(consuming)).toBeGreaterThanOrEqual(0.95);
    const toConsumer = counterDelta(afterProduce, afterConsume, (c) => c.listeners.client?.bytesToDownstream);
    expect(toConsumer).toBeGreaterThanOrEqual(RECORDS * RECORD_SIZE);
    // And the followers' replica fetchers replicated them through the replication ingresses with
    // the Fetch version of the cluster's metadata.version (v17 on 3.9/4.0, v18 from 4.1)
    expect(replicating[`Fetch v${expected.replicaFetch}`]).toBeGreaterThan(0);
    const replicated = counterDelta(
      beforeProduce,
      afterProduce,
      (c) => c.listeners.replication?.bytesToDownstream,
    );
    // (acks=all: both followers of each partition had every record before it was acknowledged)
    expect(replicated).toBeGreaterThanOrEqual(2 * RECORDS * RECORD_SIZE);
  });
});
