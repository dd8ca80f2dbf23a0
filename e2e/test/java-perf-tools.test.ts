import { describe, expect, inject, it } from 'vitest';
import { consumerPerf, producerPerf } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';

const TOPIC = 'e2e-java-perf';
const RECORDS = 200_000;

function sumRequests(
  counters: Awaited<ReturnType<typeof sidecarCounters>>[],
  listener: (name: string) => boolean,
  api: string,
) {
  let total = 0;
  for (const c of counters) {
    for (const [name, l] of Object.entries(c.listeners)) {
      if (!listener(name)) continue;
      for (const [key, n] of Object.entries(l.requests)) if (key.startsWith(`${api} v`)) total += n;
    }
  }
  return total;
}

describe('Java perf tools through the sidecars', () => {
  it('ProducerPerformance and ConsumerPerformance move every record with the newest Produce and Fetch', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3 });

    // When the Java producer (newest Produce version) writes 200,000 records with acks=all
    const produced = await producerPerf({
      bootstrap: cluster.bootstrap,
      topic: TOPIC,
      records: RECORDS,
      recordSize: 256,
    });
    expect(produced.records).toBe(RECORDS);

    // And the Java consumer (newest Fetch version) reads them back
    const consumed = await consumerPerf({ bootstrap: cluster.bootstrap, topic: TOPIC, records: RECORDS });
    expect(consumed.records).toBe(RECORDS);

    // Then the sidecars' client ingresses saw Produce v13 and consumer Fetch v18 (Kafka 4.1's newest)
    const counters = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));
    const clientRequests = Object.assign({}, ...counters.map((c) => c.listeners.client!.requests)) as Record<
      string,
      number
    >;
    expect(Object.keys(clientRequests)).toEqual(expect.arrayContaining(['Produce v13', 'Fetch v18']));
    expect(sumRequests(counters, (n) => n === 'client', 'Produce')).toBeGreaterThan(0);
  });
});
