// What zone-local produce publishes on node:diagnostics_channel, as filters/ and wal/ do: a
// telemetry layer subscribes and maps the events to metrics (telemetry/zone-metrics.ts), so the
// zone's filters depend on no SDK and build no event while nobody listens.

export const ZONE_PRODUCE_CHANNELS = {
  /** Producer's zone: the store write of a request's batches ended (stored or not): ZoneProduceStoreEvent. */
  store: 'walproxy:zone:produce:store',
  /** Leader's zone: a request's references were filled or the request refused: ZoneProduceFillEvent. */
  fill: 'walproxy:zone:produce:fill',
} as const;

export interface ZoneProduceStoreEvent {
  /** Batches of the request handed to the writer. */
  batches: number;
  /** Their bytes. */
  bytes: number;
  /** From the request's decision to the write's end (or the timeout). */
  durationMs: number;
  /** `stored`: the request goes on with references; `failed`: as the producer's bytes. */
  outcome: 'stored' | 'failed';
}

export interface ZoneProduceFillEvent {
  /** Referenced batches of the request. */
  batches: number;
  /** Bytes read back for them (0 when refused). */
  bytes: number;
  /** From the request to its filled frame or its refusal. */
  durationMs: number;
  /** `filled`: the request went to the broker; `refused`: answered NOT_ENOUGH_REPLICAS. */
  outcome: 'filled' | 'refused';
}
