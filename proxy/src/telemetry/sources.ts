import type { MeasuredCost } from '../cost/measured.js';
import type { FetchEpochWaitStats } from '../filters/fetch-epoch-wait.js';
import type { FetchFillStats } from '../filters/fetch-fill.js';
import type { FetchStripStats } from '../filters/fetch-strip.js';
import type { ProduceWalStats } from '../filters/produce-wal-stats.js';
import type { PartitionHealth } from '../metadata/partition-health.js';
import type { ListenerCounters } from '../net/counters.js';
import type { WalRangeReaderStats } from '../wal/range-reader.js';
import type { SealingGroupStats } from '../wal/sealing-policy.js';
import type { WalWriterStats } from '../wal/wal-writer.js';
import type { ZoneRoutingStats } from '../zone/zone-routing.js';

/** The WAL parts' stats objects, read at each collection (they are cumulative counters and gauges). */
export interface WalStatsSources {
  produce: () => ProduceWalStats;
  fetchStrip: () => FetchStripStats;
  fetchFill: () => FetchFillStats;
  reader: () => WalRangeReaderStats;
  writer: () => WalWriterStats;
  metadata: () => {
    published: number;
    records: number;
    overflowed: number;
    sendFailures: number;
    queued: number;
    /** Pieces in the send under way. */
    inFlight: number;
  };
  /** The sealing policy's budget groups: their mode, rate and switches. */
  sealing?: () => SealingGroupStats[];
  /** This sidecar's replication priced from its own counters (cost/live.ts). */
  cost?: () => MeasuredCost;
  /** The broker's partitions from the last Metadata the topic-id lookups read; undefined before one. */
  partitions?: () => PartitionHealth | undefined;
}

/** The PEM bytes of one TLS identity the sidecar loaded (its current snapshot), by its name. */
export interface TlsSource {
  /** `client ingress`, `replication ingress`, `peer client`, `zone ingress`, `metadata client`. */
  name: string;
  cert?: Buffer;
  ca?: Buffer;
}

/** What the telemetry reads from a running sidecar; nothing here is called on the data path. */
export interface TelemetrySources {
  brokerId: number;
  listeners: () => ReadonlyArray<{ readonly name: string; readonly counters: ListenerCounters }>;
  wal?: WalStatsSources;
  /** Whether the WAL store may be used now (StoreHealth); absent without a WAL store. */
  store?: () => { usable: boolean };
  /** The memory limit every cache and queue bound is derived from (memory-budget.ts), in bytes. */
  memoryLimitBytes?: number;
  /** Zone routing's stats, with --zone (telemetry/zone-metrics.ts). */
  zone?: () => ZoneRoutingStats;
  /** The TLS identities in use (reloaded ones included), read at each collection. */
  tls?: () => TlsSource[];
  /** The egress listeners' early re-asks while a new leader applies its change (fetch-epoch-wait.ts). */
  fetchEpochWait?: () => FetchEpochWaitStats;
}
