import { channel } from 'node:diagnostics_channel';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { Telemetry } from '../../src/telemetry/index.js';
import {
  ZONE_PRODUCE_CHANNELS,
  type ZoneProduceFillEvent,
  type ZoneProduceStoreEvent,
} from '../../src/zone/channels.js';
import { ProduceFillFilter } from '../../src/zone/produce-fill.js';
import { newZoneProduceStats } from '../../src/zone/zone-produce-stats.js';
import type { ZoneRouteStats } from '../../src/zone/zone-route-filter.js';
import type { ZoneRoutingStats } from '../../src/zone/zone-routing.js';
import { fakeSources } from './fixtures.js';

// zone/ reports like filters/ and wal/: counters read from its stats objects at collection,
// histograms from its diagnostics-channel events (telemetry/zone-metrics.ts).

const routeStats = (): ZoneRouteStats => ({
  clientsByHint: 0,
  clientsByListener: 0,
  clientsByRack: 0,
  metadataRewritten: 0,
  findCoordinatorRewritten: 0,
  describeClusterRewritten: 0,
  nodeEndpointsRewritten: 0,
  fetchRackIdsSet: 0,
  clientRacksLearned: 0,
  versionsNotDecoded: 0,
  undecodable: 0,
  requestsNotDecoded: 0,
});

let current: Telemetry | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
});

function setup() {
  const zone: Required<ZoneRoutingStats> = {
    clientIngress: routeStats(),
    zoneListeners: routeStats(),
    produce: {
      references: newZoneProduceStats(),
      // The leader side's own stats object, so the test has every field it has.
      fill: new ProduceFillFilter({ readerFor: () => undefined, log: createLogger('silent') }).stats,
    },
  };
  const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 3_600_000 });
  const telemetry = new Telemetry({
    sources: { ...fakeSources().sources, zone: () => zone },
    log: createLogger('silent'),
    metricReaders: [reader],
  });
  telemetry.start();
  current = telemetry;
  const collect = async (): Promise<Map<string, MetricData>> => {
    metrics.reset();
    await reader.forceFlush();
    const out = new Map<string, MetricData>();
    for (const rm of metrics.getMetrics())
      for (const sm of rm.scopeMetrics) for (const m of sm.metrics) out.set(m.descriptor.name, m);
    return out;
  };
  return { zone, collect };
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

describe('Telemetry: zone routing and zone-local produce', () => {
  it('observes zone routing’s counters: requests routed, answers rewritten, produce referenced, filled, refused, bytes', async () => {
    // Given a sidecar with --zone whose zone/ stats moved
    const { zone, collect } = setup();
    zone.clientIngress.clientsByHint = 3;
    zone.clientIngress.clientsByRack = 2;
    zone.zoneListeners.clientsByListener = 7;
    zone.zoneListeners.metadataRewritten = 4;
    zone.zoneListeners.nodeEndpointsRewritten = 1;
    zone.clientIngress.requestsNotDecoded = 1;
    const { references, fill } = zone.produce;
    references.requestsReferenced = 5;
    references.batchesReferenced = 6;
    references.bytesReferenced = 6000;
    references.batchesAsBytes.notAcceptedYet = 2;
    references.batchesAsBytes.storeFailed = 1;
    references.fallbacksStarted = 1;
    fill.requestsFilled = 4;
    fill.batchesFilled = 5;
    fill.bytesFilled = 5000;
    fill.requestsRefused = 1;
    fill.failures.timedOut = 1;

    // When the metrics are collected
    const m = await collect();

    // Then each counter reads the stats, with low-cardinality attributes
    const routed = m.get('walproxy.zone.requests.routed');
    expect(sum(routed, { listeners: 'client_ingress', by: 'hint' })).toBe(3);
    expect(sum(routed, { listeners: 'client_ingress', by: 'rack' })).toBe(2);
    expect(sum(routed, { listeners: 'zone', by: 'listener' })).toBe(7);
    expect(sum(m.get('walproxy.zone.responses.rewritten'), { listeners: 'zone', api: 'metadata' })).toBe(4);
    expect(sum(m.get('walproxy.zone.responses.rewritten'), { api: 'node_endpoints' })).toBe(1);
    expect(sum(m.get('walproxy.zone.not_rewritten'), { reason: 'request_not_decoded' })).toBe(1);
    const requests = m.get('walproxy.zone.produce.requests');
    expect(sum(requests, { side: 'producer', outcome: 'referenced' })).toBe(5);
    expect(sum(requests, { side: 'leader', outcome: 'filled' })).toBe(4);
    expect(sum(requests, { side: 'leader', outcome: 'refused' })).toBe(1);
    expect(sum(m.get('walproxy.zone.produce.batches'), { side: 'producer' })).toBe(6);
    expect(sum(m.get('walproxy.zone.produce.bytes'), { side: 'producer' })).toBe(6000);
    expect(sum(m.get('walproxy.zone.produce.bytes'), { side: 'leader' })).toBe(5000);
    expect(sum(m.get('walproxy.zone.produce.as_bytes'), { reason: 'not_accepted_yet' })).toBe(2);
    expect(sum(m.get('walproxy.zone.produce.as_bytes'), { reason: 'store_failed' })).toBe(1);
    expect(sum(m.get('walproxy.zone.produce.fill.failures'), { reason: 'timed_out' })).toBe(1);
    expect(sum(m.get('walproxy.zone.produce.fallbacks'), { scope: 'leader' })).toBe(1);
  });

  it('records the store waits and fills zone/ publishes, by outcome', async () => {
    const { collect } = setup();
    const store = (outcome: ZoneProduceStoreEvent['outcome']): ZoneProduceStoreEvent => ({
      batches: 1,
      bytes: 100,
      durationMs: 4,
      outcome,
    });
    const fill = (outcome: ZoneProduceFillEvent['outcome']): ZoneProduceFillEvent => ({
      batches: 1,
      bytes: outcome === 'filled' ? 100 : 0,
      durationMs: 6,
      outcome,
    });
    channel(ZONE_PRODUCE_CHANNELS.store).publish(store('stored'));
    channel(ZONE_PRODUCE_CHANNELS.store).publish(store('stored'));
    channel(ZONE_PRODUCE_CHANNELS.store).publish(store('failed'));
    channel(ZONE_PRODUCE_CHANNELS.fill).publish(fill('filled'));
    channel(ZONE_PRODUCE_CHANNELS.fill).publish(fill('refused'));
    const m = await collect();
    expect(sum(m.get('walproxy.zone.produce.store.duration'), { outcome: 'stored' })).toBe(2);
    expect(sum(m.get('walproxy.zone.produce.store.duration'), { outcome: 'failed' })).toBe(1);
    expect(sum(m.get('walproxy.zone.produce.fill.duration'), { outcome: 'filled' })).toBe(1);
    expect(sum(m.get('walproxy.zone.produce.fill.duration'), { outcome: 'refused' })).toBe(1);
  });
});
