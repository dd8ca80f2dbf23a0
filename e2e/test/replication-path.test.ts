import { describe, expect, inject, it } from 'vitest';
import { producerPerf } from '../src/clients/java-tools.js';
import { createTopic, underReplicated } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';
import type { SidecarCounters } from '../src/cluster/kafka-cluster.js';

const TOPIC = 'e2e-replication-path';
const RECORDS = 60_000;
const RECORD_SIZE = 500;

function listenerTotal(
  all: SidecarCounters[],
  match: (listener: string) => boolean,
  field: 'bytesFromUpstream' | 'bytesFromDownstream',
) {
  return all.reduce(
    (sum, c) =>
      sum + Object.entries(c.listeners).reduce((s, [name, l]) => (match(name) ? s + l[field] : s), 0),
    0,
  );
}

function fetchRequests(all: SidecarCounters[], match: (listener: string) => boolean): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of all) {
    for (const [name, l] of Object.entries(c.listeners)) {
      if (!match(name)) continue;
      for (const [key, n] of Object.entries(l.requests))
        if (key.startsWith('Fetch ')) out[key] = (out[key] ?? 0) + n;
    }
  }
  return out;
}

describe('replica fetches through egress and replication ingress', () => {
  it('followers copy every byte follower → egress → replication ingress → leader, and the ISR stays full', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3, replicationFactor: 3 });
    const before = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));

    // When 30 MB are produced with acks=all while the ISR is sampled every 300 ms
    const samples: string[][] = [];
    let producing = true;
    const sampler = (async () => {
      while (producing) {
        samples.push(await underReplicated(cluster.bootstrap, [TOPIC]));
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    const result = await producerPerf({
      bootstrap: cluster.bootstrap,
      topic: TOPIC,
      records: RECORDS,
      recordSize: RECORD_SIZE,
      props: { 'compression.type': 'none', 'linger.ms': 5 },
    }).finally(() => {
      producing = false;
    });
    await sampler;
    expect(result.records).toBe(RECORDS);
    const after = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));

    // Then the replica fetchers went through the egress listeners and the replication ingresses
    const isEgress = (n: string) => n.startsWith('egress-');
    const egressFetches = fetchRequests(after, isEgress);
    const replicationFetches = fetchRequests(after, (n) => n === 'replication');
    expect(Object.keys(egressFetches).length).toBeGreaterThan(0);
    expect(Object.keys(replicationFetches)).toEqual(Object.keys(egressFetches));

    // And both followers of every partition copied every produced byte along that path (RF=3: 2 copies)
    const produced = RECORDS * RECORD_SIZE;
    const viaEgress =
      listenerTotal(after, isEgress, 'bytesFromUpstream') -
      listenerTotal(before, isEgress, 'bytesFromUpstream');
    const viaIngress =
      listenerTotal(after, (n) => n === 'replication', 'bytesFromUpstream') -
      listenerTotal(before, (n) => n === 'replication', 'bytesFromUpstream');
    expect(viaEgress).toBeGreaterThanOrEqual(2 * produced);
    expect(viaIngress).toBeGreaterThanOrEqual(2 * produced);

    // And no sample ever saw a partition out of the ISR
    expect(samples.length).toBeGreaterThan(3);
    expect(samples.filter((s) => s.length > 0)).toEqual([]);
  });
});
