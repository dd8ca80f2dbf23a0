import { describe, expect, inject, it } from 'vitest';
import { consumerPerf, javaProtocolVersions, producerPerf } from '../src/clients/java-tools.js';
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

    // Then the sidecars' client ingresses saw the Java client's newest Produce and consumer Fetch
    // (Kafka 4.1+: v13 and v18; 4.0: v12 and v17; 3.9: v11 and v17)
    const expected = javaProtocolVersions(cluster.kafkaVersion);
    const counters = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));
    const seen = (listener: string) =>
      Object.keys(Object.assign({}, ...counters.map((c) => c.listeners[listener]?.requests ?? {})))
        .filter((key) => /^(Produce|Fetch) v/.test(key))
        .sort();
    console.info(
      `[java-perf-tools] Kafka ${cluster.kafkaVersion}: client ingress ${seen('client').join(', ')}; replication ingress ${seen('replication').join(', ')}`,
    );
    expect(seen('client')).toEqual(
      expect.arrayContaining([`Produce v${expected.produce}`, `Fetch v${expected.fetch}`]),
    );
    expect(sumRequests(counters, (n) => n === 'client', 'Produce')).toBeGreaterThan(0);
    // And the followers' replica fetchers reached the replication ingresses with the Fetch version
    // of the cluster's metadata.version (v17 on 3.9/4.0, v18 from 4.1)
    expect(seen('replication')).toContain(`Fetch v${expected.replicaFetch}`);
  });
});
