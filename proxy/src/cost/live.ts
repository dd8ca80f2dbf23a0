// What one sidecar's replication has cost and saved since it started, priced from its own counters
// at collection time: the walproxy.cost.* metrics (docs/observability.md, docs/cost.md). The same
// pricing as `walproxy cost --from-metrics` (priceMeasured), for one sidecar, with the cross-zone
// bytes estimated (the sidecar cannot see the kernel's counts) and the CPU split by the relayed
// bytes at the pass-through benchmark's rates.
//
// The metrics are Prometheus counters, so every line must only grow: a dip reads as a reset and
// `increase()` then counts the whole counter again. Pricing the totals at each collection does not
// give that (the WAL path's CPU is the CPU beyond the modelled relaying cost, and the model can
// outgrow the CPU actually spent), so each collection prices what happened since the previous one
// and adds it to the lines.
import { type ClusterLayout, relayCpuSeconds } from './economics.js';
import { costTotals, type MeasuredCost, type MeasuredCounters, priceMeasured } from './measured.js';
import type { CostLine } from './model.js';
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

const ZERO_USAGE: SidecarUsage = {
  bytesReferenced: 0,
  inlineBytes: 0,
  uploadAttempts: 0,
  bytesUploaded: 0,
  gets: 0,
  bytesFetched: 0,
  bytesFromDownstream: 0,
  bytesFromUpstream: 0,
  cpuSeconds: 0,
  uptimeSeconds: 0,
};

/**
 * The counters of one interval. Its CPU is the WAL path's only where the WAL did something in it
 * (an upload attempt, a reference sent, a GET): an idle sidecar, or one whose every byte went
 * inline, spends its CPU as any proxy in front of the broker would (relaying, timers, scrapes), so
 * it is on the relaying line and not in the saving (docs/cost.md, "What a saving is").
 */
export function intervalCounters(delta: SidecarUsage): MeasuredCounters {
  const walWorked = delta.uploadAttempts > 0 || delta.bytesReferenced > 0 || delta.gets > 0;
  const relay = relayCpuSeconds(delta.bytesFromDownstream, delta.bytesFromUpstream);
  return {
    durationSec: delta.uptimeSeconds,
    referencedBytes: delta.bytesReferenced,
    inlineBytes: delta.inlineBytes,
    puts: delta.uploadAttempts,
    bytesUploaded: delta.bytesUploaded,
    gets: delta.gets,
    bytesRead: delta.bytesFetched,
    sidecarCpuSeconds: delta.cpuSeconds,
    proxyCpuSeconds: walWorked ? relay : delta.cpuSeconds,
  };
}

/** Adds `b`'s quantities and dollars to `a`'s, line by line (the same pricing lays both out alike). */
function addLines(a: CostLine[], b: CostLine[]): CostLine[] {
  return a.map((line, i) => ({
    ...line,
    quantity: line.quantity + b[i]!.quantity,
    usd: line.usd + b[i]!.usd,
  }));
}

/**
 * One sidecar's running cost: `price(usage)` with the sidecar's cumulative counters, at each
 * collection, returns every line since the start; no line ever goes down.
 */
export class SidecarCostMeter {
  readonly #prices: PriceTable;
  readonly #layout: ClusterLayout;
  #last: SidecarUsage = ZERO_USAGE;
  #total: MeasuredCost;

  constructor(prices: PriceTable, layout: ClusterLayout) {
    this.#prices = prices;
    this.#layout = layout;
    this.#total = priceMeasured(intervalCounters(ZERO_USAGE), prices, layout);
  }

  price(usage: SidecarUsage): MeasuredCost {
    const delta = {} as SidecarUsage;
    for (const key of Object.keys(ZERO_USAGE) as Array<keyof SidecarUsage>) {
      // The counters only grow; a smaller reading (none is expected) prices nothing rather than a credit.
      delta[key] = Math.max(0, usage[key] - this.#last[key]);
    }
    this.#last = usage;
    const step = priceMeasured(intervalCounters(delta), this.#prices, this.#layout);
    const t = this.#total;
    const stock = addLines(t.stock, step.stock);
    const walproxy = addLines(t.walproxy, step.walproxy);
    const proxy = addLines(t.proxy, step.proxy);
    this.#total = { ...step, ...costTotals(stock, walproxy, proxy, usage.uptimeSeconds) };
    return this.#total;
  }
}
