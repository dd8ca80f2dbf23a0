// OpenTelemetry for one sidecar: subscribes to the core's diagnostics channels and maps them to
// spans and metrics; serves Prometheus text for /metrics and, with an OTLP endpoint, pushes both
// over OTLP/HTTP. The providers are private to this object (no global registration), so tests and
// several sidecars in one process do not share state.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, type MetricReader, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { TelemetryOptions } from '../config/telemetry-flags.js';
import { FETCH_FILL_CHANNELS } from '../filters/fetch-fill.js';
import { FETCH_STRIP_CHANNELS } from '../filters/fetch-strip.js';
import { PRODUCE_WAL_CHANNELS } from '../filters/produce-wal.js';
import type { Logger } from '../log.js';
import { WAL_READER_CHANNELS, WAL_WRITER_CHANNELS } from '../wal/channels.js';
import { ZONE_PRODUCE_CHANNELS } from '../zone/channels.js';
import { DataPathLiveness, observeLiveness } from './liveness.js';
import { ChannelMetrics, observeSources } from './metrics.js';
import { observeReplicationHealth } from './replication-health.js';
import { observeRound } from './round-metrics.js';
import type { TelemetrySources } from './sources.js';
import { SpanMapper } from './spans.js';
import { observeZone, ZoneChannelMetrics } from './zone-metrics.js';

export const INSTRUMENTATION_SCOPE = '@walproxy/proxy';
/**
 * A stop pushes what is left over OTLP for at most this long. The OTLP exporters wait 10 s for a
 * collector and the metric reader's shutdown waits for them: a collector that accepts and never
 * answers kept a stopping pod alive that long (issue #24), past the drain it was stopped for.
 */
export const TELEMETRY_STOP_TIMEOUT_MS = 2_000;
const VERSION = '0.1.0';

export interface TelemetryInit extends Partial<TelemetryOptions> {
  sources: TelemetrySources;
  log: Logger;
  /** Extra metric readers (tests: a PeriodicExportingMetricReader over an InMemoryMetricExporter). */
  metricReaders?: MetricReader[];
  /** Extra span processors (tests: a SimpleSpanProcessor over an InMemorySpanExporter). */
  spanProcessors?: SpanProcessor[];
}

export class Telemetry {
  readonly meterProvider: MeterProvider;
  readonly tracerProvider: BasicTracerProvider | undefined;
  readonly #prometheus: PrometheusExporter;
  readonly #serializer = new PrometheusSerializer(undefined, false, undefined, false, true);
  readonly #subscriptions: Array<[string, (message: unknown) => void]> = [];
  readonly #log: Logger;
  readonly #otlpEndpoint: string | undefined;
  #started = false;
  readonly #liveness = new DataPathLiveness();

  constructor(init: TelemetryInit) {
    this.#log = init.log;
    this.#otlpEndpoint = init.otlpEndpoint;
    const resource = defaultResource().merge(
      resourceFromAttributes({
        [ATTR_SERVICE_NAME]: init.serviceName ?? 'walproxy',
        [ATTR_SERVICE_VERSION]: VERSION,
        'walproxy.broker.id': init.sources.brokerId,
      }),
    );
    this.#prometheus = new PrometheusExporter({ preventServerStart: true });
    const readers: MetricReader[] = [this.#prometheus, ...(init.metricReaders ?? [])];
    const spanProcessors: SpanProcessor[] = [...(init.spanProcessors ?? [])];
    if (init.otlpEndpoint) {
      readers.push(
        new PeriodicExportingMetricReader({
          exporter: new OTLPMetricExporter({ url: `${init.otlpEndpoint}/v1/metrics` }),
          exportIntervalMillis: init.metricsExportIntervalMs ?? 60_000,
        }),
      );
      spanProcessors.push(
        new BatchSpanProcessor(new OTLPTraceExporter({ url: `${init.otlpEndpoint}/v1/traces` })),
      );
    }
    this.meterProvider = new MeterProvider({ resource, readers });
    const meter = this.meterProvider.getMeter(INSTRUMENTATION_SCOPE, VERSION);
    observeSources(meter, init.sources);
    observeLiveness(meter, this.#liveness, init.sources.wal !== undefined);
    observeReplicationHealth(meter, init.sources);
    if (init.sources.wal) observeRound(meter, init.sources.wal);
    const m = new ChannelMetrics(meter);
    // Without a span processor nothing would ever see a span: do not make any.
    let spans: SpanMapper | undefined;
    if (spanProcessors.length > 0) {
      this.tracerProvider = new BasicTracerProvider({ resource, spanProcessors });
      spans = new SpanMapper(this.tracerProvider.getTracer(INSTRUMENTATION_SCOPE, VERSION));
    }
    const on = <E>(name: string, handle: (event: E) => void) =>
      this.#subscriptions.push([name, (message) => handle(message as E)]);
    const W = WAL_WRITER_CHANNELS;
    on(W.seal, (e: Parameters<SpanMapper['seal']>[0]) => {
      m.seal(e);
      spans?.seal(e);
    });
    on(W.uploadStart, (e: Parameters<SpanMapper['uploadStart']>[0]) => {
      m.uploadStart(e);
      spans?.uploadStart(e);
    });
    on(W.uploadAttempt, (e: Parameters<SpanMapper['uploadAttempt']>[0]) => {
      m.uploadAttempt(e);
      spans?.uploadAttempt(e);
    });
    on(W.uploadEnd, (e: Parameters<SpanMapper['uploadEnd']>[0]) => {
      m.uploadEnd(e);
      if (e.error === undefined) this.#liveness.uploadStored();
      spans?.uploadEnd(e);
    });
    on(WAL_READER_CHANNELS.get, (e: Parameters<ChannelMetrics['readerGot']>[0]) => {
      m.readerGot(e);
      if (e.outcome === 'ok') this.#liveness.getAnswered();
    });
    on(W.appendRefused, (e: Parameters<ChannelMetrics['appendRefused']>[0]) => m.appendRefused(e));
    on(PRODUCE_WAL_CHANNELS.durableAck, (e: Parameters<SpanMapper['durableAck']>[0]) => {
      m.durableAckDone(e);
      spans?.durableAck(e);
    });
    on(FETCH_STRIP_CHANNELS.strip, (e: Parameters<SpanMapper['strip']>[0]) => {
      m.strip(e);
      spans?.strip(e);
    });
    on(FETCH_FILL_CHANNELS.fill, (e: Parameters<SpanMapper['fill']>[0]) => {
      m.filled(e);
      spans?.fill(e);
    });
    const zone = init.sources.zone;
    if (zone) {
      observeZone(meter, zone);
      const z = new ZoneChannelMetrics(meter);
      on(ZONE_PRODUCE_CHANNELS.store, (e: Parameters<ZoneChannelMetrics['stored']>[0]) => z.stored(e));
      on(ZONE_PRODUCE_CHANNELS.fill, (e: Parameters<ZoneChannelMetrics['filled']>[0]) => z.filled(e));
    }
    if (spans) {
      const s = spans;
      on(PRODUCE_WAL_CHANNELS.intercept, (e: Parameters<SpanMapper['intercept']>[0]) => s.intercept(e));
      on(FETCH_FILL_CHANNELS.fallback, (e: Parameters<SpanMapper['fallback']>[0]) => s.fallback(e));
      // Only while spans are made: without tracing no response carries a trace context.
      on(FETCH_STRIP_CHANNELS.traceContext, (e: Parameters<SpanMapper['traceContexts']>[0]) =>
        s.traceContexts(e),
      );
    }
  }

  /** Subscribes to the channels: from here on, events are recorded. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    for (const [name, handler] of this.#subscriptions) subscribe(name, handler);
    this.#liveness.start();
    if (this.#otlpEndpoint)
      this.#log.info({ otlpEndpoint: this.#otlpEndpoint }, 'exporting telemetry over OTLP/HTTP');
  }

  /** The current metrics as Prometheus text (exposition format 0.0.4). */
  async prometheusText(): Promise<string> {
    const { resourceMetrics, errors } = await this.#prometheus.collect();
    if (errors.length > 0) this.#log.debug({ errors: errors.map(String) }, 'metric collection errors');
    return this.#serializer.serialize(resourceMetrics);
  }

  /**
   * Unsubscribes, pushes what is left over OTLP, and shuts the providers down; gives up after
   * `timeoutMs` (what is not pushed by then is lost, as it would be in a crash).
   */
  async stop(timeoutMs = TELEMETRY_STOP_TIMEOUT_MS): Promise<void> {
    if (this.#started) {
      for (const [name, handler] of this.#subscriptions) unsubscribe(name, handler);
      this.#liveness.stop();
      this.#started = false;
    }
    const shutdown = Promise.allSettled([this.meterProvider.shutdown(), this.tracerProvider?.shutdown()]);
    let timer: NodeJS.Timeout | undefined;
    const abandoned = new Promise<'abandoned'>((resolve) => {
      timer = setTimeout(() => resolve('abandoned'), timeoutMs);
    });
    const results = await Promise.race([shutdown, abandoned]);
    clearTimeout(timer);
    if (results === 'abandoned') {
      this.#log.warn(
        { timeoutMs, otlpEndpoint: this.#otlpEndpoint },
        'telemetry shutdown abandoned: the OTLP collector did not take the last export in time',
      );
      return;
    }
    for (const r of results) {
      if (r.status === 'rejected') this.#log.warn({ error: String(r.reason) }, 'telemetry shutdown failed');
    }
  }
}
