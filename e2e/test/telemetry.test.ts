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

/** Every sidecar's /metrics text, by broker id. */
async function scrape(adminUrls: Record<number, string>): Promise<Record<number, string>> {
  const entries = await Promise.all(
    Object.entries(adminUrls).map(async ([id, url]) => {
      const response = await fetch(`${url}/metrics`);
      expect(response.status).toBe(200);
      return [Number(id), await response.text()] as const;
    }),
  );
  return Object.fromEntries(entries);
}

/** One sample summed over every sidecar's exposition (absent counts as 0). */
function total(texts: Record<number, string>, name: string, labels: Record<string, string>): number {
  return Object.values(texts).reduce((n, t) => n + (sample(t, name, labels) ?? 0), 0);
}

const REPLICATION = 'walproxy_replication_bytes_total';
const LEADER_REFERENCED = { side: 'leader', path: 'referenced' };
const LEADER_INLINE = { side: 'leader', path: 'inline' };
const FOLLOWER_REFERENCED = { side: 'follower', path: 'referenced' };
const SENDS = 20;
const MESSAGES_PER_SEND = 100;
const VALUE_BYTES = 2_000;

describe('telemetry on the running cluster', () => {
  it('counts the referenced bytes of this run on /metrics, and a real Prometheus sees them grow', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3 });
    // Given a real Prometheus scraping every sidecar, and what it and /metrics say before this
    // run (the shared cluster's counters hold every file that ran before)
    prometheus = await PrometheusServer.start({
      targets: Object.values(cluster.adminUrls),
      scrapeIntervalSeconds: 1,
    });
    await prometheus.waitForTargetsUp(Object.keys(cluster.adminUrls).length);
    const query = `sum(${REPLICATION}{side="leader",path="referenced"})`;
    const before = await scrape(cluster.adminUrls);
    const referencedBefore = total(before, REPLICATION, LEADER_REFERENCED);
    let seen = 0;
    await prometheus.waitFor(
      async () => {
        const result = await prometheus!.query(query);
        seen = result[0]?.value ?? 0;
        return seen === referencedBefore;
      },
      30_000,
      `${query} = ${referencedBefore} before the run`,
    );

    // When an idempotent producer writes 4 MB of values with acks=all (followers have every batch
    // before each send returns)
    const producer = kafkaClient(cluster.bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const value = Buffer.alloc(VALUE_BYTES, 't');
    for (let i = 0; i < SENDS; i++) {
      await producer.send({
        topic: TOPIC,
        acks: -1,
        messages: Array.from({ length: MESSAGES_PER_SEND }, (_, k) => ({ key: `k${k % 7}`, value })),
      });
    }
    await producer.disconnect();
    const after = await scrape(cluster.adminUrls);

    // Then /metrics counted this run's replication: every batch to two followers, as references or
    // inline, at least the values' bytes; and the followers filled exactly what the leaders referenced
    const referenced = total(after, REPLICATION, LEADER_REFERENCED) - referencedBefore;
    const inline = total(after, REPLICATION, LEADER_INLINE) - total(before, REPLICATION, LEADER_INLINE);
    const filled =
      total(after, REPLICATION, FOLLOWER_REFERENCED) - total(before, REPLICATION, FOLLOWER_REFERENCED);
    console.log(
      `[telemetry] this run: leaders referenced ${referenced} B and sent ${inline} B inline; followers filled ${filled} B`,
    );
    expect(referenced).toBeGreaterThan(0);
    expect(referenced + inline).toBeGreaterThanOrEqual(2 * SENDS * MESSAGES_PER_SEND * VALUE_BYTES);
    expect(filled).toBe(referenced);
    for (const t of Object.values(after)) {
      expect(t).toContain('# TYPE walproxy_wal_object_size histogram');
      expect(sample(t, 'walproxy_connections_active', { listener: 'client' })).toBeGreaterThanOrEqual(0);
    }
    const ready = await fetch(`${Object.values(cluster.adminUrls)[0]}/readyz`);
    expect(ready.status).toBe(200);

    // And PromQL sees the same growth
    const referencedAfter = referencedBefore + referenced;
    await prometheus.waitFor(
      async () => {
        const result = await prometheus!.query(query);
        seen = result[0]?.value ?? 0;
        return result.length === 1 && seen === referencedAfter;
      },
      30_000,
      `${query} = ${referencedAfter} after the run (last seen ${seen})`,
    );
    console.log(`PromQL ${query}: ${referencedBefore} before, ${seen} after`);
    await prometheus.stop();
    prometheus = undefined;
  });
});
