// Metrics of zone-local routing and produce (with --zone), kept apart from metrics.ts: counters
// observed from the stats objects zone/ keeps anyway (read at collection, nothing per message),
// distributions recorded from its diagnostics-channel events (zone/channels.ts). Attributes are
// low-cardinality: how a client's zone was known, which side, outcomes and reasons.
import type { Attributes, Histogram, Meter, ObservableResult } from '@opentelemetry/api';
import type { ZoneProduceFillEvent, ZoneProduceStoreEvent } from '../zone/channels.js';
import type { ZoneRouteStats } from '../zone/zone-route-filter.js';
import type { ZoneRoutingStats } from '../zone/zone-routing.js';
import { msHistogram } from './metrics.js';

type Observe = (result: ObservableResult<Attributes>) => void;

/** camelCase stats key → snake_case attribute value, as the other rooms' reasons read. */
const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Registers the observable instruments that read zone routing's stats at each collection. */
export function observeZone(meter: Meter, zone: () => ZoneRoutingStats): void {
  const counter = (name: string, unit: string, description: string, observe: Observe) =>
    meter.createObservableCounter(name, { unit, description }).addCallback(observe);
  const routes = (pick: (s: ZoneRouteStats) => Array<[number, Attributes]>): Observe => {
    return (r) => {
      const { clientIngress, zoneListeners } = zone();
      for (const [listeners, stats] of [
        ['client_ingress', clientIngress],
        ['zone', zoneListeners],
      ] as const) {
        for (const [n, attributes] of pick(stats)) r.observe(n, { listeners, ...attributes });
      }
    };
  };
  counter(
    'walproxy.zone.requests.routed',
    '{request}',
    'Client requests routed to their zone, by listeners (client_ingress, zone) and how the zone was known (hint, listener, rack)',
    routes((s) => [
      [s.clientsByHint, { by: 'hint' }],
      [s.clientsByListener, { by: 'listener' }],
      [s.clientsByRack, { by: 'rack' }],
    ]),
  );
  counter(
    'walproxy.zone.responses.rewritten',
    '{response}',
    'Responses whose broker addresses were rewritten to zone egresses, by listeners and API (metadata, find_coordinator, describe_cluster, node_endpoints)',
    routes((s) => [
      [s.metadataRewritten, { api: 'metadata' }],
      [s.findCoordinatorRewritten, { api: 'find_coordinator' }],
      [s.describeClusterRewritten, { api: 'describe_cluster' }],
      [s.nodeEndpointsRewritten, { api: 'node_endpoints' }],
    ]),
  );
  counter(
    'walproxy.zone.not_rewritten',
    '{item}',
    'Requests and responses zone routing passed as they came, by listeners and reason (request_not_decoded, version_not_decoded, response_undecodable)',
    routes((s) => [
      [s.requestsNotDecoded, { reason: 'request_not_decoded' }],
      [s.versionsNotDecoded, { reason: 'version_not_decoded' }],
      [s.undecodable, { reason: 'response_undecodable' }],
    ]),
  );

  const produce = () => zone().produce;
  counter(
    'walproxy.zone.produce.requests',
    '{request}',
    'Zone-local produce requests, by side and outcome: producer side referenced; leader side filled or refused (answered NOT_ENOUGH_REPLICAS, nothing appended)',
    (r) => {
      const p = produce();
      if (!p) return;
      r.observe(p.references.requestsReferenced, { side: 'producer', outcome: 'referenced' });
      r.observe(p.fill.requestsFilled, { side: 'leader', outcome: 'filled' });
      r.observe(p.fill.requestsRefused, { side: 'leader', outcome: 'refused' });
    },
  );
  counter(
    'walproxy.zone.produce.batches',
    '{batch}',
    'Zone-local produce batches: producer side sent as references, leader side filled',
    (r) => {
      const p = produce();
      if (!p) return;
      r.observe(p.references.batchesReferenced, { side: 'producer' });
      r.observe(p.fill.batchesFilled, { side: 'leader' });
    },
  );
  counter(
    'walproxy.zone.produce.bytes',
    'By',
    'Zone-local produce batch bytes: producer side sent as references (they did not cross the zone link), leader side filled from the store',
    (r) => {
      const p = produce();
      if (!p) return;
      r.observe(p.references.bytesReferenced, { side: 'producer' });
      r.observe(p.fill.bytesFilled, { side: 'leader' });
    },
  );
  counter(
    'walproxy.zone.produce.as_bytes',
    '{partition}',
    'Producer side: partitions of zone-local produce requests sent as the producer’s bytes, by reason',
    (r) => {
      const p = produce();
      if (!p) return;
      for (const [reason, n] of Object.entries(p.references.batchesAsBytes))
        r.observe(n, { reason: snake(reason) });
    },
  );
  counter(
    'walproxy.zone.produce.fill.failures',
    '{reference}',
    'Leader side: references that could not be filled, by reason (undecodable, store_not_allowed, read_failed, timed_out, mismatch)',
    (r) => {
      const p = produce();
      if (!p) return;
      for (const [reason, n] of Object.entries(p.fill.failures)) r.observe(n, { reason: snake(reason) });
    },
  );
  counter(
    'walproxy.zone.produce.fallbacks',
    '{fallback}',
    'Producer side: times a leader (scope=leader) or a connection (scope=connection) went to bytes for a while after a reference was refused',
    (r) => {
      const p = produce();
      if (!p) return;
      r.observe(p.references.fallbacksStarted, { scope: 'leader' });
      r.observe(p.references.connectionFallbacksStarted, { scope: 'connection' });
    },
  );
}

/** The histograms fed from zone/'s diagnostics-channel events. */
export class ZoneChannelMetrics {
  readonly store: Histogram;
  readonly fill: Histogram;

  constructor(meter: Meter) {
    const ms = (name: string, description: string) => msHistogram(meter, name, description);
    this.store = ms(
      'walproxy.zone.produce.store.duration',
      'Producer side: time a zone-local Produce waited for its batches’ store write, by outcome (stored, failed: sent as bytes)',
    );
    this.fill = ms(
      'walproxy.zone.produce.fill.duration',
      'Leader side: time from a Produce with references to its filled frame or its refusal, by outcome (filled, refused)',
    );
  }

  stored(e: ZoneProduceStoreEvent): void {
    this.store.record(e.durationMs, { outcome: e.outcome });
  }

  filled(e: ZoneProduceFillEvent): void {
    this.fill.record(e.durationMs, { outcome: e.outcome });
  }
}
