import {
  AggregationTemporality,
  InMemoryMetricExporter,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Sidecar } from '@walproxy/proxy';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { producerPerf } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import { startInProcessSidecars } from '../src/cluster/in-process-sidecars.js';
import { KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { compareReplicas } from '../src/wal/inspect.js';

// The sidecars run inside this test process (a cluster of its own, sidecars 'external') so that
// the OpenTelemetry SDK's in-memory exporters see what a real produce/replicate run emits.
let cluster: KafkaCluster | undefined;
let sidecars: Sidecar[] = [];
afterAll(async () => {
  await Promise.all(sidecars.map((s) => s.stop(1_000)));
  await cluster?.stop();
});

describe('telemetry during a real produce and replicate run', () => {
  it('emits seal, upload, produce, strip and fill spans and the referenced-bytes metric', async () => {
    const { s3 } = inject('cluster');
    Object.assign(process.env, walSidecarEnv());
    const spans = new InMemorySpanExporter();
    const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 3_600_000 });
    // Given a cluster whose sidecars write to their own prefix of the shared S3 server
    cluster = await KafkaCluster.start({
      sidecars: 'external',
      sidecarArgs: () => walSidecarArgs({ ...s3, prefix: `otel-${Date.now()}/` }),
    });
    // (diagnostics channels are process-wide: sidecar 1's telemetry sees all three sidecars' events)
    sidecars = await startInProcessSidecars(cluster, {
      telemetry: (id) =>
        id === 1 ? { spanProcessors: [new SimpleSpanProcessor(spans)], metricReaders: [reader] } : {},
    });
    await createTopic(cluster.bootstrap(), 'wal-durable-otel', { partitions: 3 });

    // When the Java producer writes 20 MB with acks=all and the followers catch up
    await producerPerf({
      bootstrap: cluster.bootstrap(),
      topic: 'wal-durable-otel',
      records: 40_000,
      recordSize: 512,
    });
    expect(await compareReplicas(cluster.workDirDataDirs(), 'wal-durable-otel', 3)).toEqual([]);

    // Then the spans of every stage are there
    const names = new Set(spans.getFinishedSpans().map((s) => s.name));
    for (const name of [
      'walproxy.produce',
      'walproxy.wal.seal',
      'walproxy.wal.upload',
      'walproxy.fetch.strip',
      'walproxy.fetch.fill',
    ]) {
      expect(names, `span ${name}`).toContain(name);
    }
    // And a durable-ack wait links to the upload that carried its batches
    const upload = spans.getFinishedSpans().find((s) => s.name === 'walproxy.wal.upload')!;
    expect(upload.events.length).toBeGreaterThan(0);
    // And the metrics count referenced bytes on the leader side and uploads
    await reader.forceFlush();
    const byName = new Map<string, MetricData>();
    for (const rm of metrics.getMetrics())
      for (const sm of rm.scopeMetrics) for (const m of sm.metrics) byName.set(m.descriptor.name, m);
    const replication = byName.get('walproxy.replication.bytes');
    const referenced =
      replication?.dataPoints.filter(
        (p) => p.attributes.side === 'leader' && p.attributes.path === 'referenced',
      ) ?? [];
    expect(referenced.reduce((n, p) => n + (p.value as number), 0)).toBeGreaterThan(0);
    expect(byName.get('walproxy.wal.objects.uploaded')?.dataPoints.length).toBeGreaterThan(0);
  });
});
