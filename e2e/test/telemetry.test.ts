import { afterAll, describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { PrometheusServer } from '../src/prometheus/prometheus-server.js';

const TOPIC = 'wal-telemetry';

/** One sample of a Prometheus text exposition, matched by name and labels. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

let prometheus: PrometheusServer | undefined;
afterAll(async () => {
  await prometheus?.stop();
});

describe('telemetry on the running cluster', () => {
  it('counts referenced bytes on /metrics, and a real Prometheus scrapes them', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3 });
    const producer = kafkaClient(cluster.bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const value = Buffer.alloc(2_000, 't');
    for (let i = 0; i < 20; i++) {
      await producer.send({
        topic: TOPIC,
        acks: -1,
        messages: Array.from({ length: 100 }, (_, k) => ({ key: `k${k % 7}`, value })),
      });
    }
    await producer.disconnect();

    // Every sidecar serves /metrics; leaders of wal-telemetry partitions sent references.
    const texts = await Promise.all(
      Object.values(cluster.adminUrls).map(async (url) => {
        const response = await fetch(`${url}/metrics`);
        expect(response.status).toBe(200);
        return response.text();
      }),
    );
    const referenced = texts.map(
      (t) => sample(t, 'walproxy_replication_bytes_total', { side: 'leader', path: 'referenced' }) ?? 0,
    );
    const filled = texts.map(
      (t) => sample(t, 'walproxy_replication_bytes_total', { side: 'follower', path: 'referenced' }) ?? 0,
    );
    expect(Math.max(...referenced)).toBeGreaterThan(0);
    expect(Math.max(...filled)).toBeGreaterThan(0);
    for (const t of texts) {
      expect(t).toContain('# TYPE walproxy_wal_object_size histogram');
      expect(sample(t, 'walproxy_connections_active', { listener: 'client' })).toBeGreaterThanOrEqual(0);
    }
    const ready = await fetch(`${Object.values(cluster.adminUrls)[0]}/readyz`);
    expect(ready.status).toBe(200);

    // A real Prometheus scrapes two sidecars, and PromQL sees the referenced bytes.
    const targets = Object.values(cluster.adminUrls).slice(0, 2);
    prometheus = await PrometheusServer.start({ targets, scrapeIntervalSeconds: 1 });
    await prometheus.waitForTargetsUp(2);
    const query = 'sum(walproxy_replication_bytes_total{side="leader",path="referenced"})';
    let result: Awaited<ReturnType<PrometheusServer['query']>> = [];
    await prometheus.waitFor(
      async () => {
        result = await prometheus!.query(query);
        return result.length === 1 && result[0]!.value > 0;
      },
      30_000,
      `${query} > 0`,
    );
    console.log(`PromQL ${query} = ${result[0]?.value}`);
    expect(result[0]!.value).toBeGreaterThan(0);
    await prometheus.stop();
    prometheus = undefined;
  });
});
