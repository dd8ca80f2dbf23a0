// What one sidecar's replication has cost and saved since it started, priced from its own counters
// at collection time: the walproxy.cost.* metrics (docs/observability.md, docs/cost.md). The same
// pricing as `walproxy cost --from-metrics` (priceMeasured), for one sidecar, with the cross-zone
// bytes estimated (the sidecar cannot see the kernel's counts) and the CPU split by the relayed
// bytes at the pass-through benchmark's rates.
import { type ClusterLayout, relayCpuSeconds } from './economics.js';
import { type MeasuredCost, type MeasuredCounters, priceMeasured } from './measured.js';
import type { PriceTable } from './prices.js';

/** The counters of one sidecar that the pricing reads. */
export interface SidecarUsage {
  /** Leader side: replicated record bytes sent as references, and inline. */
  bytesReferenced: number;
  inlineBytes: number;
  uploadAttempts: number;
  bytesUploaded: number;
  /** Follower side: ranged GETs and their bytes. */
  gets: number;
  bytesFetched: number;
  /** Every listener's bytes as received, each way. */
  bytesFromDownstream: number;
  bytesFromUpstream: number;
  /** CPU-seconds of the process, user + system. */
  cpuSeconds: number;
  /** How long the counters have counted. */
  uptimeSeconds: number;
}

export function sidecarMeasuredCounters(usage: SidecarUsage): MeasuredCounters {
  return {
    durationSec: usage.uptimeSeconds,
    referencedBytes: usage.bytesReferenced,
    inlineBytes: usage.inlineBytes,
    puts: usage.uploadAttempts,
    bytesUploaded: usage.bytesUploaded,
    gets: usage.gets,
    bytesRead: usage.bytesFetched,
    sidecarCpuSeconds: usage.cpuSeconds,
    proxyCpuSeconds: relayCpuSeconds(usage.bytesFromDownstream, usage.bytesFromUpstream),
  };
}

export function priceSidecar(usage: SidecarUsage, prices: PriceTable, layout: ClusterLayout): MeasuredCost {
  return priceMeasured(sidecarMeasuredCounters(usage), prices, layout);
}
