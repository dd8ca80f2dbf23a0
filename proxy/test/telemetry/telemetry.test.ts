import { channel } from 'node:diagnostics_channel';
import { SpanStatusCode } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FETCH_FILL_CHANNELS,
  type FetchFallbackEvent,
  type FetchFillEvent,
} from '../../src/filters/fetch-fill.js';
import {
  FETCH_STRIP_CHANNELS,
  type FetchStripEvent,
  newFetchStripStats,
} from '../../src/filters/fetch-strip.js';
import {
  PRODUCE_WAL_CHANNELS,
  type ProduceDurableAckEvent,
  type ProduceInterceptEvent,
} from '../../src/filters/produce-wal.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import { Telemetry } from '../../src/telemetry/index.js';
import {
  WAL_READER_CHANNELS,
  WAL_WRITER_CHANNELS,
  type WalReaderGetEvent,
  type WalSealEvent,
  type WalUploadAttemptEvent,
  type WalUploadEndEvent,
  type WalUploadStartEvent,
} from '../../src/wal/channels.js';
import { fakeSources, silentLog } from './fixtures.js';

const publish = <E>(name: string, event: E) => channel(name).publish(event);

function setup() {
  const fake = fakeSources();
  const spans = new InMemorySpanExporter();
  const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 3_600_000 });
  const telemetry = new Telemetry({
    sources: fake.sources,
    log: silentLog,
    spanProcessors: [new SimpleSpanProcessor(spans)],
    metricReaders: [reader],
  });
  telemetry.start();
  const collect = async (): Promise<Map<string, MetricData>> => {
    metrics.reset();
    await reader.forceFlush();
    const out = new Map<string, MetricData>();
    for (const rm of metrics.getMetrics())
      for (const sm of rm.scopeMetrics) for (const m of sm.metrics) out.set(m.descriptor.name, m);
    return out;
  };
  return { ...fake, telemetry, spans, collect };
}

let current: Telemetry | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
});

function byName(spans: ReadableSpan[], name: string): ReadableSpan[] {
  return spans.filter((s) => s.name === name);
}

function sum(metric: MetricData | undefined, attrs: Record<string, string> = {}): number {
  if (!metric) throw new Error('metric missing');
  let total = 0;
  for (const dp of metric.dataPoints) {
    if (!Object.entries(attrs).every(([k, v]) => dp.attributes[k] === v)) continue;
    if (metric.dataPointType === DataPointType.HISTOGRAM) total += (dp.value as { count: number }).count;
    else total += dp.value as number;
  }
  return total;
}

describe('Telemetry: channel events to spans and metrics', () => {
  it('maps a WAL object seal and upload, with attempts as events, and links a durable-ack produce to it', async () => {
    const t = setup();
    current = t.telemetry;
    const objectKey = 'wal/7/0000000001';
    const request: RequestInfo = { apiKey: 0, apiVersion: 11, correlationId: 5 };
    publish<ProduceInterceptEvent>(PRODUCE_WAL_CHANNELS.intercept, {
      request,
      topics: 1,
      batches: 2,
      bytes: 2048,
      deferredTopics: 0,
      durableAck: true,
    });
    publish<WalSealEvent>(WAL_WRITER_CHANNELS.seal, {
      objectKey,
      size: 3000,
      batchCount: 2,
      reason: 'linger',
      ageMs: 10,
    });
    publish<WalUploadStartEvent>(WAL_WRITER_CHANNELS.uploadStart, {
      objectKey,
      size: 3000,
      batchCount: 2,
      queuedMs: 1,
    });
    publish<WalUploadAttemptEvent>(WAL_WRITER_CHANNELS.uploadAttempt, {
      objectKey,
      attempt: 1,
      durationMs: 4,
      error: new Error('503 SlowDown'),
      retriable: true,
      backoffMs: 20,
      alreadyStored: false,
    });
    publish<WalUploadAttemptEvent>(WAL_WRITER_CHANNELS.uploadAttempt, {
      objectKey,
      attempt: 2,
      durationMs: 3,
      error: undefined,
      retriable: false,
      backoffMs: undefined,
      alreadyStored: false,
    });
    publish<WalUploadEndEvent>(WAL_WRITER_CHANNELS.uploadEnd, {
      objectKey,
      size: 3000,
      batchCount: 2,
      attempts: 2,
      durationMs: 30,
      error: undefined,
    });
    publish<ProduceDurableAckEvent>(PRODUCE_WAL_CHANNELS.durableAck, {
      request,
      durationMs: 31,
      outcome: 'stored',
      batches: 2,
      failedPartitions: 0,
      objectKeys: [objectKey],
    });

    const spans = t.spans.getFinishedSpans();
    const [seal] = byName(spans, 'walproxy.wal.seal');
    const [upload] = byName(spans, 'walproxy.wal.upload');
    const [produce] = byName(spans, 'walproxy.produce');
    const [ack] = byName(spans, 'walproxy.produce.durable_ack');
    expect(seal?.attributes).toMatchObject({
      'walproxy.wal.object.size': 3000,
      'walproxy.wal.seal.reason': 'linger',
    });
    // The upload is the seal's child; its attempts are events.
    expect(upload?.parentSpanContext?.spanId).toBe(seal?.spanContext().spanId);
    expect(upload?.events.map((e) => e.attributes?.['walproxy.wal.upload.attempt'])).toEqual([1, 2]);
    expect(upload?.events[0]?.attributes?.['walproxy.wal.upload.error']).toBe('503 SlowDown');
    expect(upload?.attributes['walproxy.wal.upload.outcome']).toBe('stored');
    expect(produce?.attributes).toMatchObject({
      'walproxy.produce.batches': 2,
      'walproxy.produce.bytes': 2048,
    });
    // The durable-ack wait is the produce span's child and links to the upload that carried its batches.
    expect(ack?.parentSpanContext?.spanId).toBe(produce?.spanContext().spanId);
    expect(ack?.links.map((l) => l.context.spanId)).toEqual([upload?.spanContext().spanId]);
    expect(ack?.status.code).not.toBe(SpanStatusCode.ERROR);

    const m = await t.collect();
    expect(sum(m.get('walproxy.wal.object.size'), { reason: 'linger' })).toBe(1);
    expect(sum(m.get('walproxy.wal.upload.duration'), { outcome: 'stored' })).toBe(1);
    expect(sum(m.get('walproxy.wal.upload.attempt.duration'), { outcome: 'error' })).toBe(1);
    expect(sum(m.get('walproxy.produce.durable_ack.duration'), { outcome: 'stored' })).toBe(1);
  });

  it('maps fetch strip with a hold, and fetch fill with its fallbacks', async () => {
    const t = setup();
    current = t.telemetry;
    publish<FetchStripEvent>(FETCH_STRIP_CHANNELS.strip, {
      references: 3,
      objectKeys: ['wal/7/0000000002'],
      bytesReferenced: 3000,
      inlineBytes: { ...newFetchStripStats().inlineBytesByReason, notInWal: 100, topicNotInWal: 40 },
      heldBatches: 1,
      holdMs: 12,
      durationMs: 15,
    });
    publish<FetchFallbackEvent>(FETCH_FILL_CHANNELS.fallback, {
      topicId: 'AAAAAAAAAAAAAAAAAAAAAA',
      topic: undefined,
      partition: 4,
      fromOffset: 100n,
      reason: 'crcMismatch',
      detail: 'batch at offset 100: CRC-32C 1 ≠ header CRC 2',
    });
    publish<FetchFillEvent>(FETCH_FILL_CHANNELS.fill, {
      references: 2,
      objectKeys: ['wal/7/0000000002'],
      uploads: [],
      bytes: 2000,
      durationMs: 5,
      fallbacks: 1,
    });

    const spans = t.spans.getFinishedSpans();
    const [strip] = byName(spans, 'walproxy.fetch.strip');
    const [hold] = byName(spans, 'walproxy.fetch.hold');
    const [fill] = byName(spans, 'walproxy.fetch.fill');
    expect(strip?.attributes).toMatchObject({
      'walproxy.fetch.references': 3,
      'walproxy.fetch.bytes_referenced': 3000,
      'walproxy.fetch.inline_bytes.not_in_wal': 100,
      'walproxy.fetch.inline_bytes.topic_not_in_wal': 40,
    });
    expect(hold?.parentSpanContext?.spanId).toBe(strip?.spanContext().spanId);
    expect(fill?.events.map((e) => e.attributes?.['walproxy.fetch.fallback.reason'])).toEqual([
      'crcMismatch',
    ]);
    expect(fill?.status.code).toBe(SpanStatusCode.ERROR);

    const m = await t.collect();
    expect(sum(m.get('walproxy.fetch.hold.duration'))).toBe(1);
    expect(sum(m.get('walproxy.fetch.fill.duration'))).toBe(1);
  });

  it('observes the stats objects: bytes by path, cache hit ratio, pending bytes, connections, requests by API', async () => {
    const t = setup();
    current = t.telemetry;
    t.fetchStrip.bytesReferenced = 5000;
    t.fetchStrip.inlineBytes = 70;
    t.fetchStrip.inline.topicNotInWal = 5;
    t.fetchStrip.inline.modeInline = 2;
    t.fetchStrip.inline.notInWal = 1;
    t.fetchStrip.inlineBytesByReason.topicNotInWal = 50;
    t.fetchStrip.inlineBytesByReason.modeInline = 20;
    t.fetchFill.bytesFilled = 4000;
    t.fetchFill.fallbacks.getFailed = 2;
    t.fetchFill.fallbacks.deadline = 1;
    t.fetchFill.inlineBytes = 90;
    t.fetchFill.inline.unreferenced = 60;
    t.fetchFill.inline.backoff = 30;
    t.fetchFill.deadlineMisses = 1;
    t.reader.gets = 5;
    t.reader.wholeObjectGets = 4;
    t.reader.objectsRead = 4;
    t.reader.cacheHits = 3;
    t.reader.cacheMisses = 1;
    t.writer.pendingBytes = 12345;
    t.client.connectionsActive = 4;
    t.client.requests = { 'Produce v11': 2, 'Produce v13': 3, 'Metadata v12': 1 };

    const m = await t.collect();
    expect(sum(m.get('walproxy.replication.bytes'), { side: 'leader', path: 'referenced' })).toBe(5000);
    expect(sum(m.get('walproxy.replication.bytes'), { side: 'leader', path: 'inline' })).toBe(70);
    expect(sum(m.get('walproxy.replication.bytes'), { side: 'follower', path: 'referenced' })).toBe(4000);
    expect(sum(m.get('walproxy.replication.bytes'), { side: 'follower', path: 'inline' })).toBe(90);
    expect(sum(m.get('walproxy.fetch.inline.batches'), { reason: 'topic_not_in_wal' })).toBe(5);
    expect(sum(m.get('walproxy.fetch.inline.batches'), { reason: 'mode_inline' })).toBe(2);
    expect(sum(m.get('walproxy.fetch.inline.batches'), { reason: 'not_in_wal' })).toBe(1);
    expect(sum(m.get('walproxy.fetch.inline.bytes'), { side: 'leader', reason: 'topic_not_in_wal' })).toBe(
      50,
    );
    expect(sum(m.get('walproxy.fetch.inline.bytes'), { side: 'leader', reason: 'mode_inline' })).toBe(20);
    expect(sum(m.get('walproxy.fetch.inline.bytes'), { side: 'follower', reason: 'unreferenced' })).toBe(60);
    expect(sum(m.get('walproxy.fetch.inline.bytes'), { side: 'follower', reason: 'backoff' })).toBe(30);
    expect(sum(m.get('walproxy.fetch.fallbacks'), { reason: 'get_failed' })).toBe(2);
    expect(sum(m.get('walproxy.fetch.fallbacks'), { reason: 'deadline' })).toBe(1);
    expect(sum(m.get('walproxy.fetch.deadline_misses'))).toBe(1);
    expect(sum(m.get('walproxy.wal.reader.gets'), { kind: 'whole' })).toBe(4);
    expect(sum(m.get('walproxy.wal.reader.gets'), { kind: 'ranged' })).toBe(1);
    expect(sum(m.get('walproxy.wal.reader.objects'))).toBe(4);
    expect(sum(m.get('walproxy.wal.reader.cache.hit_ratio'))).toBe(0.75);
    expect(sum(m.get('walproxy.wal.pending.bytes'))).toBe(12345);
    expect(sum(m.get('walproxy.connections.active'), { listener: 'client' })).toBe(4);
    expect(sum(m.get('walproxy.requests'), { listener: 'client', api: 'Produce' })).toBe(5);
    expect(sum(m.get('walproxy.memory.limit.bytes'))).toBe(536_870_912);
    expect(sum(m.get('walproxy.memory.used.bytes'))).toBeGreaterThan(0);

    t.fetchStrip.bytesReferenced += 1000;
    const again = await t.collect();
    expect(sum(again.get('walproxy.replication.bytes'), { side: 'leader', path: 'referenced' })).toBe(6000);
  });

  it('records each store GET of the range reader in the GET-duration histogram, by outcome', async () => {
    const t = setup();
    current = t.telemetry;
    const get = (outcome: 'ok' | 'error'): WalReaderGetEvent => ({
      store: 's3://b/wal',
      objectKey: 'k',
      whole: true,
      bytes: outcome === 'ok' ? 100 : 0,
      durationMs: 3,
      outcome,
    });
    publish(WAL_READER_CHANNELS.get, get('ok'));
    publish(WAL_READER_CHANNELS.get, get('ok'));
    publish(WAL_READER_CHANNELS.get, get('error'));
    const m = await t.collect();
    expect(sum(m.get('walproxy.wal.reader.get.duration'), { outcome: 'ok' })).toBe(2);
    expect(sum(m.get('walproxy.wal.reader.get.duration'), { outcome: 'error' })).toBe(1);
  });

  it('asks for trace contexts to carry only while it makes spans', async () => {
    // Given a sidecar with tracing, and one without (no OTLP endpoint, no span processor)
    const t = setup();
    current = t.telemetry;
    expect(channel(FETCH_STRIP_CHANNELS.traceContext).hasSubscribers).toBe(true);
    await t.telemetry.stop();
    const untraced = new Telemetry({ sources: fakeSources().sources, log: silentLog });
    untraced.start();
    current = untraced;
    // Then only the first listens: without tracing no Fetch response gets a trace tag
    expect(channel(FETCH_STRIP_CHANNELS.traceContext).hasSubscribers).toBe(false);
    expect(channel(FETCH_STRIP_CHANNELS.strip).hasSubscribers).toBe(true);
  });

  it('stops listening once stopped', async () => {
    const t = setup();
    await t.telemetry.stop();
    expect(channel(WAL_WRITER_CHANNELS.seal).hasSubscribers).toBe(false);
    expect(channel(FETCH_STRIP_CHANNELS.strip).hasSubscribers).toBe(false);
  });
});
