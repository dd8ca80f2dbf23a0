// The gauges and counters the replication-health rules read (alert-rules.test.ts runs the rules):
// under-replicated partitions from the Metadata the sidecar reads, the seconds until its loaded
// certificates expire, and TLS handshakes to a peer that failed.
import { readFileSync } from 'node:fs';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { issueCert, makeCa, removeDir, tempDir } from '../../../e2e/src/tls/certs.js';
import type { PartitionHealth } from '../../src/metadata/partition-health.js';
import { Telemetry, type TelemetrySources } from '../../src/telemetry/index.js';
import { earliestNotAfterMs } from '../../src/telemetry/replication-health.js';
import { fakeSources, silentLog } from './fixtures.js';

const DAY_S = 86_400;
const dir = tempDir();
afterAll(() => removeDir(dir));
const ca = makeCa(dir);
const fresh = issueCert(ca, { cn: 'kafka-1' });
const expired = issueCert(ca, { cn: 'kafka-old', expired: true });

let current: Telemetry | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
});

async function collect(sources: TelemetrySources): Promise<Map<string, MetricData>> {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  current = new Telemetry({ sources, log: silentLog, metricReaders: [reader] });
  current.start();
  await reader.forceFlush();
  const out = new Map<string, MetricData>();
  for (const rm of exporter.getMetrics())
    for (const sm of rm.scopeMetrics) for (const m of sm.metrics) out.set(m.descriptor.name, m);
  return out;
}

function points(
  metric: MetricData | undefined,
): Array<{ attributes: Record<string, unknown>; value: number }> {
  return (metric?.dataPoints ?? []).map((dp) => ({ attributes: dp.attributes, value: dp.value as number }));
}

describe('replication-health metrics', () => {
  it('exports the under-replicated partitions of the last refresh, and nothing before one', async () => {
    // Given a sidecar whose topic-id lookups have not answered yet
    const fake = fakeSources();
    let health: PartitionHealth | undefined;
    fake.sources.wal!.partitions = () => health;
    const before = await collect(fake.sources);
    // Then there is no value to alert on (0 would say "all in sync" without knowing)
    expect(points(before.get('walproxy.partitions.under_replicated'))).toEqual([]);
    await current!.stop();
    // When a refresh saw 2 of its 5 led partitions out of the ISR
    health = { led: 5, underReplicated: 2 };
    const after = await collect(fake.sources);
    expect(points(after.get('walproxy.partitions.under_replicated'))).toEqual([{ attributes: {}, value: 2 }]);
  });

  it('exports the seconds until the earliest certificate of each loaded file expires, negative once expired', async () => {
    // Given a peer-client identity whose cert file holds a 30-day certificate, and a client
    // ingress whose chain also holds an expired one
    const fake = fakeSources();
    const now = Date.now();
    fake.sources.tls = () => [
      { name: 'peer client', cert: readFileSync(fresh.certPath), ca: readFileSync(ca.certPath) },
      {
        name: 'client ingress',
        cert: Buffer.concat([readFileSync(fresh.certPath), readFileSync(expired.certPath)]),
      },
    ];
    const m = await collect(fake.sources);
    const byLabels = new Map(
      points(m.get('walproxy.tls.certificate.expiry.seconds')).map((p) => [
        `${p.attributes.tls}/${p.attributes.file}`,
        p.value,
      ]),
    );
    // Then one series per file, labelled by identity and file
    expect([...byLabels.keys()].sort()).toEqual([
      'client ingress/cert',
      'peer client/ca',
      'peer client/cert',
    ]);
    // The 30-day certificates (openssl -days 30, issued moments ago): between 29 and 30 days left
    for (const key of ['peer client/cert', 'peer client/ca']) {
      expect(byLabels.get(key)!, key).toBeGreaterThan(29 * DAY_S);
      expect(byLabels.get(key)!, key).toBeLessThanOrEqual(30 * DAY_S + (Date.now() - now) / 1000);
    }
    // The chain's earliest certificate counts: the expired one, a day in 2020
    expect(byLabels.get('client ingress/cert')!).toBeLessThan(-365 * DAY_S);
  });

  it('reads no expiry from PEM bytes without a certificate', () => {
    expect(
      earliestNotAfterMs(Buffer.from('-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n')),
    ).toBe(undefined);
  });

  it('exports TLS handshakes to the upstream that failed, per listener', async () => {
    const fake = fakeSources();
    fake.replication.upstreamTlsHandshakeFailures = 3;
    const m = await collect(fake.sources);
    expect(points(m.get('walproxy.listener.upstream_tls_handshake_failures'))).toEqual([
      { attributes: { listener: 'client' }, value: 0 },
      { attributes: { listener: 'replication' }, value: 3 },
    ]);
  });
});
