/**
 * What a stretch of a run cost, from the sidecars' own counters (their /metrics, summed) and the
 * kernel's byte counts between zones: snapshots before and after, and the difference priced with
 * priceMeasured against a stock arm of the same workload (docs/cost.md, "What a saving is"). For
 * the cost-aware e2e test, `make bench-cost` and `make demo`.
 */
import {
  type ClusterLayout,
  countersFromScrapes,
  DEFAULT_PRICES,
  type MeasuredCost,
  type MeasuredCounters,
  type PriceTable,
  priceMeasured,
} from '@walproxy/proxy';
import {
  crossZoneBytes,
  storeBytes,
  trafficSince,
  type ZoneNetwork,
  type ZoneTraffic,
} from '../net/zone-network.js';

export interface CostSnapshot {
  atMs: number;
  /** Summed over the sidecars, each since its start (durationSec unused). */
  counters: MeasuredCounters;
  /** The kernel's counters, on a zone network. */
  traffic: ZoneTraffic | undefined;
}

/** Scrapes every sidecar's /metrics (and reads the kernel's counters) now. */
export async function costSnapshot(adminUrls: string[], zones?: ZoneNetwork): Promise<CostSnapshot> {
  const traffic = zones?.traffic();
  const scrapes = await Promise.all(
    adminUrls.map(async (url) => {
      const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) });
      if (!response.ok) throw new Error(`${url}/metrics: HTTP ${response.status}`);
      return { origin: url, text: await response.text() };
    }),
  );
  const result = countersFromScrapes(scrapes, 1);
  if ('errors' in result) throw new Error(result.errors.join('\n'));
  return { atMs: Date.now(), counters: result.counters, traffic };
}

/** A stretch of the run: the sidecars' counters between two snapshots, and what the kernel counted. */
export interface Counted extends MeasuredCounters {
  /** Bytes between the zones and the object store (uploads, GETs), when the kernel counted. */
  storeBytes?: number | undefined;
}

export function countedBetween(before: CostSnapshot, after: CostSnapshot): Counted {
  const a = after.counters;
  const b = before.counters;
  const cpu =
    a.sidecarCpuSeconds !== undefined && b.sidecarCpuSeconds !== undefined
      ? a.sidecarCpuSeconds - b.sidecarCpuSeconds
      : undefined;
  const traffic = before.traffic && after.traffic ? trafficSince(before.traffic, after.traffic) : undefined;
  return {
    durationSec: (after.atMs - before.atMs) / 1000,
    referencedBytes: a.referencedBytes - b.referencedBytes,
    inlineBytes: a.inlineBytes - b.inlineBytes,
    puts: a.puts - b.puts,
    bytesUploaded: a.bytesUploaded - b.bytesUploaded,
    gets: a.gets - b.gets,
    bytesRead: a.bytesRead - b.bytesRead,
    sidecarCpuSeconds: cpu,
    crossZoneBytes: traffic ? crossZoneBytes(traffic) : undefined,
    storeBytes: traffic ? storeBytes(traffic) : undefined,
  };
}

/**
 * Several runs of one arm as one: every count summed, durations too. A figure one run lacks (no
 * kernel counts, no CPU) is missing from the sum, not taken as zero.
 */
export function sumCounted(runs: readonly Counted[]): Counted {
  if (runs.length === 0) throw new RangeError('sumCounted: no runs');
  const add = (pick: (c: Counted) => number) => runs.reduce((n, c) => n + pick(c), 0);
  const addOptional = (pick: (c: Counted) => number | undefined) =>
    runs.some((c) => pick(c) === undefined) ? undefined : add((c) => pick(c)!);
  return {
    durationSec: add((c) => c.durationSec),
    referencedBytes: add((c) => c.referencedBytes),
    inlineBytes: add((c) => c.inlineBytes),
    puts: add((c) => c.puts),
    bytesUploaded: add((c) => c.bytesUploaded),
    gets: add((c) => c.gets),
    bytesRead: add((c) => c.bytesRead),
    sidecarCpuSeconds: addOptional((c) => c.sidecarCpuSeconds),
    crossZoneBytes: addOptional((c) => c.crossZoneBytes),
    storeBytes: addOptional((c) => c.storeBytes),
  };
}

/**
 * The walproxy arm priced against the stock arm of the same workload: stock is what the kernel
 * counted between zones in the stock arm; walproxy pays its store requests and bytes, what the
 * kernel counted in its own arm, and its sidecars' CPU beyond what the same sidecars spent
 * relaying the stock arm (the CPU any proxy in front of the broker costs, on its own line).
 */
export function priceArms(
  stock: Counted,
  walproxy: Counted,
  options: { prices?: PriceTable; layout?: ClusterLayout } = {},
): MeasuredCost {
  return priceMeasured(
    {
      ...walproxy,
      stockCrossZoneBytes: stock.crossZoneBytes,
      proxyCpuSeconds: stock.sidecarCpuSeconds,
    },
    options.prices ?? DEFAULT_PRICES,
    options.layout ?? { replicationFactor: 3, zones: 3 },
  );
}

/** One line: stock, walproxy (replication), relaying, saved. */
export function costLine(cost: MeasuredCost): string {
  const usd = (n: number) => `$${n.toFixed(6)}`;
  const line = (key: string) => [...cost.walproxy, ...cost.proxy].find((l) => l.key === key)?.usd ?? 0;
  return `stock ${usd(cost.stockUsd)}; walproxy ${usd(cost.walproxyUsd)} (PUTs ${usd(line('put_requests'))}, upload ${usd(line('upload'))}, GETs ${usd(line('get_requests'))}, retrieval ${usd(line('retrieval'))}, storage ${usd(line('storage'))}, cross-zone ${usd(line('cross_zone'))}, WAL CPU ${usd(line('cpu_wal'))}); relaying CPU ${usd(cost.proxyUsd)}; saved ${usd(cost.savedUsd)} = ${(100 * cost.savedFraction).toFixed(1)} % (net of relaying ${usd(cost.netSavedUsd)})`;
}
