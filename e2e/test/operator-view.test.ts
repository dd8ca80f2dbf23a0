// The dashboard and the alert rules (proxy/src/telemetry/operator-view), proven against a real
// Prometheus scraping the shared cluster's sidecars: every metric they read is on /metrics, every
// panel query and alert value returns series, and the inline-fallback alert fires while the WAL
// store is frozen.
import {
  ALERTS,
  DASHBOARD_ROWS,
  EXTERNAL_METRICS,
  metricsIn,
  OPTIONAL_METRICS,
  PENDING_METRICS,
  prometheusRulesYaml,
} from '@walproxy/proxy';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { PrometheusServer } from '../src/prometheus/prometheus-server.js';

// A durable-ack topic (wal-settings.ts), so the durable-ack panel has series.
const TOPIC = 'wal-durable-operator-view';
// durable.ack=false (wal-settings.ts): produce does not wait for the store, so replication carries
// on inline while it is frozen.
const OUTAGE_TOPIC = 'wal-nodurable-operator-view';
/** The rate window of the panels ($__rate_interval) and the rules in this test: 30 scrapes. */
const WINDOW = '30s';

const pending = (expr: string) => metricsIn(expr).filter((m) => m in PENDING_METRICS);
/** Series Prometheus cannot have here: from outside the sidecars and not scraped in the e2e. */
const unavailable = (expr: string) =>
  metricsIn(expr).filter((m) => (m in EXTERNAL_METRICS && m !== 'up') || m in OPTIONAL_METRICS);

/** A panel query as Grafana sends it with every sidecar selected. */
function panelPromql(expr: string): string {
  return expr.replaceAll('$__rate_interval', WINDOW).replaceAll('$job', '.+').replaceAll('$instance', '.+');
}

const panelQueries = DASHBOARD_ROWS.flatMap((row) =>
  row.panels.flatMap((panel) =>
    panel.queries.map((q) => ({ what: `panel "${panel.title}" (${q.legend})`, expr: panelPromql(q.expr) })),
  ),
);
const alertValues = ALERTS.map((a) => ({ what: `alert ${a.alert}`, expr: a.value(WINDOW) }));
const checked = [...panelQueries, ...alertValues].filter(
  (q) => pending(q.expr).length === 0 && unavailable(q.expr).length === 0,
);

let prometheus: PrometheusServer | undefined;
let frozen: number | undefined;
afterEach(() => {
  // Whatever happens, the S3 server is not left frozen for the next files.
  if (frozen !== undefined) process.kill(frozen, 'SIGCONT');
  frozen = undefined;
});
afterAll(async () => {
  await prometheus?.stop();
});

/** Produces `rounds` sends of 100 records of 2 kB with acks=all, or until `until` says stop. */
async function produce(topic: string, rounds: number, until?: () => Promise<boolean>): Promise<number> {
  const producer = kafkaClient(inject('cluster').bootstrap).producer({
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  const value = Buffer.alloc(2_000, 'o');
  let sent = 0;
  try {
    for (let i = 0; i < rounds; i++) {
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: 100 }, (_, k) => ({ key: `k${k % 7}`, value })),
      });
      sent++;
      if (until && (await until())) break;
    }
  } finally {
    await producer.disconnect();
  }
  return sent;
}

describe('the operator view on the running cluster', () => {
  beforeAll(async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3 });
    await createTopic(cluster.bootstrap, OUTAGE_TOPIC, { partitions: 3 });
    // The rules exactly as shipped, over this test's window and with a `for` of seconds.
    prometheus = await PrometheusServer.start({
      targets: Object.values(cluster.adminUrls),
      scrapeIntervalSeconds: 1,
      rules: [prometheusRulesYaml({ window: WINDOW, for: '5s' })],
    });
    await prometheus.waitForTargetsUp(3);
    // A workload through every path the panels show: produce, uploads, held fetches, fills.
    await produce(TOPIC, 30);
  });

  it('finds every metric a panel or an alert reads on the sidecars’ /metrics, except the pending ones', async () => {
    const cluster = inject('cluster');
    const texts = await Promise.all(
      Object.values(cluster.adminUrls).map(async (url) => (await fetch(`${url}/metrics`)).text()),
    );
    const exported = new Set(
      texts.flatMap((t) =>
        t
          .split('\n')
          .filter((line) => line && !line.startsWith('#'))
          .map((line) => line.split(/[{ ]/)[0]!),
      ),
    );
    const read = new Set([...panelQueries, ...alertValues].flatMap((q) => metricsIn(q.expr)));
    const missing = [...read].filter(
      (m) =>
        !(m in PENDING_METRICS) && !(m in EXTERNAL_METRICS) && !(m in OPTIONAL_METRICS) && !exported.has(m),
    );
    expect(missing, 'read by the dashboard or the rules, not on /metrics').toEqual([]);
    // A pending metric that landed is removed from PENDING_METRICS (then this test checks it).
    const landed = Object.keys(PENDING_METRICS).filter((m) => exported.has(m));
    expect(landed, 'on /metrics now: remove from PENDING_METRICS').toEqual([]);
    console.log(
      `operator view: ${read.size} metrics read, ${[...read].filter((m) => exported.has(m)).length} on /metrics; ` +
        `pending (skipped): ${Object.entries(PENDING_METRICS)
          .map(([m, why]) => `${m} — ${why}`)
          .join('; ')}`,
    );
  });

  it('answers every panel query and alert value with series from the real Prometheus', async () => {
    // Given a few scrapes after the workload (rates need two samples in the window)
    const empty = new Set(checked.map((q) => q.what));
    await prometheus!
      .waitFor(
        async () => {
          for (const q of checked) {
            if (!empty.has(q.what)) continue;
            if ((await prometheus!.query(q.expr)).length > 0) empty.delete(q.what);
          }
          return empty.size === 0;
        },
        60_000,
        'every query returns series',
      )
      .catch(() => undefined);
    // Then none is empty
    expect(
      checked.filter((q) => empty.has(q.what)).map((q) => `${q.what}: ${q.expr}`),
      'queries without series',
    ).toEqual([]);
    const skipped = [...panelQueries, ...alertValues].filter((q) => !checked.includes(q));
    console.log(
      `operator view: ${checked.length} queries returned series; skipped ${skipped.length} reading pending or external metrics: ${skipped.map((q) => q.what).join(', ')}`,
    );
  });

  it('fires WalproxyInlineFallback while the WAL store is frozen, and not before', async () => {
    const cluster = inject('cluster');
    // Given the cluster healthy: the inline-fallback alert neither pending nor firing
    const before = await prometheus!.alerts();
    expect(before.filter((a) => a.labels.alertname === 'WalproxyInlineFallback')).toEqual([]);

    // When the S3 server is frozen (SIGSTOP: requests hang, as in a zone outage) while producers
    // keep writing a WAL topic, for at most 120 s
    process.kill(cluster.s3.pid, 'SIGSTOP');
    frozen = cluster.s3.pid;
    const started = Date.now();
    const firing = async () => {
      const now = await prometheus!.alerts();
      return ['WalproxyInlineFallback', 'WalproxyStoreUnhealthy'].every((name) =>
        now.some((a) => a.labels.alertname === name && a.state === 'firing'),
      );
    };
    await produce(OUTAGE_TOPIC, 2_000, async () => (await firing()) || Date.now() - started > 120_000);
    const alerts = await prometheus!.alerts();
    process.kill(cluster.s3.pid, 'SIGCONT');
    frozen = undefined;
    console.log(
      `operator view: store frozen; after ${((Date.now() - started) / 1000).toFixed(0)} s alerts: ${alerts
        .map((a) => `${a.labels.alertname}{instance=${a.labels.instance}} ${a.state} (${a.value})`)
        .join(', ')}`,
    );

    // Then the inline-fallback alert fires for a leader of the topic, with its annotations
    const fallback = alerts.filter(
      (a) => a.labels.alertname === 'WalproxyInlineFallback' && a.state === 'firing',
    );
    expect(fallback.length).toBeGreaterThan(0);
    expect(fallback[0]!.labels.severity).toBe('warning');
    expect(fallback[0]!.annotations.summary).toContain(fallback[0]!.labels.instance!);
    // And so does the store-health alert: the sidecars judged the store unusable (an upload
    // outstanding past --wal-degrade-after-ms) and stopped copying this topic's batches, so no
    // upload is retried for it meanwhile (durable ack is off)
    expect(alerts.some((a) => a.labels.alertname === 'WalproxyStoreUnhealthy' && a.state === 'firing')).toBe(
      true,
    );

    // And once the store is back, the sidecars are ready again (the next files need the store)
    await prometheus!.waitFor(
      async () => {
        const ready = await Promise.all(
          Object.values(cluster.adminUrls).map(async (url) => (await fetch(`${url}/readyz`)).status === 200),
        );
        return ready.every(Boolean);
      },
      60_000,
      'sidecars ready after the store thawed',
    );
  });
});
