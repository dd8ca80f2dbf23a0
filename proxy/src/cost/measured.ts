// Prices what a run measured — the sidecars' counters, and the kernel's cross-zone byte count
// where there is one — against stock replication of the same bytes (docs/cost.md, "Pricing what
// happened"). Pure: `walproxy cost --from-metrics`, the live walproxy.cost.* metrics, the demo and
// the e2e tests feed it.
//
// What is compared (docs/cost.md, "What a saving is"): what walproxy's replication costs — the
// store, the bytes that still cross zones, and the WAL path's own CPU — against the stock
// replication it replaces. The CPU any proxy in front of the broker spends relaying bytes is on a
// line of its own and in the total, but not in the saving: it is not the WAL's to decide.

import {
  BYTES_PER_GB,
  type ClusterLayout,
  crossZoneFollowers,
  DEFAULT_RESIDUAL_FRACTION,
  DEFAULT_RETENTION_SEC,
  SECONDS_PER_MONTH,
} from './economics.js';
import type { CostLine } from './model.js';
import type { PriceTable } from './prices.js';

/** One run's counters, summed over every sidecar of the cluster. */
export interface MeasuredCounters {
  /** How long the counters counted. */
  durationSec: number;
  /** Leader side: replicated record bytes sent to followers as references (they came from the store). */
  referencedBytes: number;
  /** Leader side: replicated record bytes sent inline (stock replication through the sidecar). */
  inlineBytes: number;
  /** Store calls for WAL objects, retries included (each is a billed PUT). */
  puts: number;
  bytesUploaded: number;
  /** Follower side: ranged GETs and the bytes they returned. */
  gets: number;
  bytesRead: number;
  /** CPU time of the sidecar processes; undefined when nothing measured it. */
  sidecarCpuSeconds: number | undefined;
  /**
   * Of sidecarCpuSeconds, what relaying the bytes costs, as any proxy in front of the broker would
   * (the same sidecars on a stock run of the workload, or the relayed bytes at the pass-through
   * benchmark's rate); the rest is the WAL path's. Undefined: all of it is charged to the WAL path.
   */
  proxyCpuSeconds?: number | undefined;
  /** Bytes that crossed between the brokers' zones with walproxy, counted by the kernel; else estimated. */
  crossZoneBytes?: number | undefined;
  /** The same for a stock run of the same workload; else every replicated byte to each follower in another zone. */
  stockCrossZoneBytes?: number | undefined;
}

export interface MeasuredOptions {
  /** How long objects stay in the store (each uploaded byte is stored this long). */
  retentionSec?: number;
  /** When the kernel did not count: the cross-zone residue per referenced byte. */
  residualFraction?: number;
}

export interface MeasuredCost {
  durationSec: number;
  crossZoneFollowers: number;
  stock: CostLine[];
  /** walproxy's replication: store, cross-zone bytes, the WAL path's CPU. */
  walproxy: CostLine[];
  /** The sidecars relaying bytes, as any proxy in front of the broker: not in the saving. */
  proxy: CostLine[];
  /** For the run's duration. */
  stockUsd: number;
  walproxyUsd: number;
  proxyUsd: number;
  /** walproxyUsd + proxyUsd. */
  totalUsd: number;
  /** stockUsd − walproxyUsd: what replicating through walproxy saved (the definition above). */
  savedUsd: number;
  /** savedUsd / stockUsd (0 when stock costs nothing). */
  savedFraction: number;
  /** stockUsd − totalUsd: the saving net of the proxying CPU too. */
  netSavedUsd: number;
  /** The run's rate for a 30-day month. */
  perMonth: {
    stockUsd: number;
    walproxyUsd: number;
    proxyUsd: number;
    totalUsd: number;
    savedUsd: number;
    netSavedUsd: number;
  };
  /** The cross-zone figures came from the kernel (true) or the counters (false). */
  crossZoneMeasured: boolean;
  cpuMeasured: boolean;
}

/**
 * Stock replication sends every replicated byte (referenced or inline, the leader side counts
 * both) to each follower; c of the rf − 1 followers are in another zone. walproxy pays the store
 * for what it did, the transfer of what still crossed, and the sidecars' CPU.
 */
export function priceMeasured(
  counters: MeasuredCounters,
  prices: PriceTable,
  layout: ClusterLayout,
  options: MeasuredOptions = {},
): MeasuredCost {
  const followers = layout.replicationFactor - 1;
  const cz = crossZoneFollowers(layout.replicationFactor, layout.zones);
  const share = followers > 0 ? cz / followers : 0;
  const retentionSec = options.retentionSec ?? DEFAULT_RETENTION_SEC;
  const residual = options.residualFraction ?? DEFAULT_RESIDUAL_FRACTION;
  const gb = (bytes: number) => bytes / BYTES_PER_GB;
  const charged = (bytes: number, requests: number) =>
    Math.max(0, bytes - requests * prices.freeBytesPerRequest);

  const replicated = counters.referencedBytes + counters.inlineBytes;
  const stockCross = counters.stockCrossZoneBytes ?? replicated * share;
  const crossMeasured = counters.crossZoneBytes !== undefined;
  const walCross =
    counters.crossZoneBytes ?? (counters.inlineBytes + counters.referencedBytes * residual) * share;
  const storedGbMonths = (gb(counters.bytesUploaded) * retentionSec) / SECONDS_PER_MONTH;
  const cpuSeconds = counters.sidecarCpuSeconds ?? 0;
  const proxyCpuSeconds = Math.min(cpuSeconds, counters.proxyCpuSeconds ?? 0);
  const vcpuHours = (seconds: number) => seconds / 3600;

  const stock: CostLine[] = [
    {
      key: 'cross_zone',
      item: `cross-zone replication (${cz} follower${cz === 1 ? '' : 's'} in other zones)`,
      quantity: gb(stockCross),
      unit: 'GB',
      usd: gb(stockCross) * prices.crossZonePerGb,
    },
  ];
  const uploadGb = gb(charged(counters.bytesUploaded, counters.puts));
  const retrievalGb = gb(charged(counters.bytesRead, counters.gets));
  const walproxy: CostLine[] = [
    {
      key: 'put_requests',
      item: `${prices.storeClass} PUT requests`,
      quantity: counters.puts,
      unit: 'requests',
      usd: (counters.puts / 1000) * prices.putPer1000,
    },
    {
      key: 'upload',
      item: `${prices.storeClass} upload`,
      quantity: uploadGb,
      unit: 'GB',
      usd: uploadGb * prices.uploadPerGb,
    },
    {
      key: 'get_requests',
      item: `${prices.storeClass} GET requests`,
      quantity: counters.gets,
      unit: 'requests',
      usd: (counters.gets / 1000) * prices.getPer1000,
    },
    {
      key: 'retrieval',
      item: `${prices.storeClass} retrieval`,
      quantity: retrievalGb,
      unit: 'GB',
      usd: retrievalGb * prices.retrievalPerGb,
    },
    {
      key: 'storage',
      item: `${prices.storeClass} storage (${retentionSec} s each)`,
      quantity: storedGbMonths,
      unit: 'GB-months',
      usd: storedGbMonths * prices.storagePerGbMonth,
    },
    {
      key: 'cross_zone',
      item: crossMeasured ? 'cross-zone (kernel-counted)' : 'cross-zone (inline bytes + residue, estimated)',
      quantity: gb(walCross),
      unit: 'GB',
      usd: gb(walCross) * prices.crossZonePerGb,
    },
    {
      key: 'cpu_wal',
      item:
        counters.sidecarCpuSeconds === undefined
          ? 'sidecar CPU, WAL path (NOT MEASURED)'
          : 'sidecar CPU, WAL path',
      quantity: vcpuHours(cpuSeconds - proxyCpuSeconds),
      unit: 'vCPU-hours',
      usd: vcpuHours(cpuSeconds - proxyCpuSeconds) * prices.vcpuHourUsd,
    },
  ];
  const proxy: CostLine[] = [
    {
      key: 'cpu_proxy',
      item: 'sidecar CPU, relaying (any proxy in front of the broker)',
      quantity: vcpuHours(proxyCpuSeconds),
      unit: 'vCPU-hours',
      usd: vcpuHours(proxyCpuSeconds) * prices.vcpuHourUsd,
    },
  ];
  return {
    ...costTotals(stock, walproxy, proxy, counters.durationSec),
    crossZoneFollowers: cz,
    crossZoneMeasured: crossMeasured,
    cpuMeasured: counters.sidecarCpuSeconds !== undefined,
  };
}

/** The three sides' lines, their sums, the saving and all of it per month at the rate of `durationSec`. */
export function costTotals(
  stock: CostLine[],
  walproxy: CostLine[],
  proxy: CostLine[],
  durationSec: number,
): Pick<
  MeasuredCost,
  | 'durationSec'
  | 'stock'
  | 'walproxy'
  | 'proxy'
  | 'stockUsd'
  | 'walproxyUsd'
  | 'proxyUsd'
  | 'totalUsd'
  | 'savedUsd'
  | 'savedFraction'
  | 'netSavedUsd'
  | 'perMonth'
> {
  const sum = (lines: CostLine[]) => lines.reduce((t, l) => t + l.usd, 0);
  const stockUsd = sum(stock);
  const walproxyUsd = sum(walproxy);
  const proxyUsd = sum(proxy);
  const toMonth = durationSec > 0 ? SECONDS_PER_MONTH / durationSec : 0;
  return {
    durationSec,
    stock,
    walproxy,
    proxy,
    stockUsd,
    walproxyUsd,
    proxyUsd,
    totalUsd: walproxyUsd + proxyUsd,
    savedUsd: stockUsd - walproxyUsd,
    savedFraction: stockUsd > 0 ? (stockUsd - walproxyUsd) / stockUsd : 0,
    netSavedUsd: stockUsd - walproxyUsd - proxyUsd,
    perMonth: {
      stockUsd: stockUsd * toMonth,
      walproxyUsd: walproxyUsd * toMonth,
      proxyUsd: proxyUsd * toMonth,
      totalUsd: (walproxyUsd + proxyUsd) * toMonth,
      savedUsd: (stockUsd - walproxyUsd) * toMonth,
      netSavedUsd: (stockUsd - walproxyUsd - proxyUsd) * toMonth,
    },
  };
}
