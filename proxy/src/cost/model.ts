// Monthly cost of moving follower replication through S3 Express One Zone versus stock cross-zone
// replication (docs/cost.md has the formulas and their assumptions).
import { BYTES_PER_GB, DEFAULT_CPU, objectEconomics, SECONDS_PER_MONTH } from './economics.js';
import type { PriceTable } from './prices.js';

export interface CostInputs {
  /** Produced bytes per second into WAL topics, all leader brokers together. */
  throughputBytesPerSec: number;
  replicationFactor: number;
  zones: number;
  /** The sidecar seals an object at most this long after its first batch. */
  lingerMs: number;
  /** The sidecar seals an object when it reaches this size (--wal-target-bytes). */
  objectBytes: number;
  /** Leader brokers (sidecars) the throughput is spread over; each seals its own objects. */
  brokers: number;
  /** How long WAL objects are kept before gc or a lifecycle rule deletes them. */
  retentionSec: number;
  /**
   * Fraction of the stock replication bytes that still cross zones with walproxy (Fetch
   * responses carry references, offsets and 61-byte batch headers inline).
   */
  residualFraction: number;
  /** Sidecar CPU seconds per GB produced with the sidecars in the path, WAL or not (DEFAULT_CPU). */
  proxyCpuSecondsPerGb?: number;
  /** Sidecar CPU seconds per GB the WAL path adds: upload, follower GETs and fills (DEFAULT_CPU). */
  walCpuSecondsPerGb?: number;
  /** `inline`: the sealing policy keeps these topics out of the WAL; followers replicate as stock. */
  mode?: 'wal' | 'inline';
}

/** The line items, as the walproxy.cost.spent metric's `item` attribute names them. */
export type CostItem =
  | 'put_requests'
  | 'upload'
  | 'get_requests'
  | 'retrieval'
  | 'storage'
  | 'cross_zone'
  | 'cpu_wal'
  | 'cpu_proxy';

export interface CostLine {
  /** Stable name of the item (metrics); `item` is the text printed. */
  key?: CostItem;
  item: string;
  quantity: number;
  unit: string;
  usd: number;
}

export interface CostResult {
  producedGbPerMonth: number;
  /** Followers in another zone than their leader (each gets every produced byte). */
  crossZoneFollowers: number;
  /** Followers that read each object from the store. */
  followers: number;
  /** Object size actually reached: the target, or less when the linger seals first. */
  effectiveObjectBytes: number;
  objectsPerSecond: number;
  stock: CostLine[];
  /** walproxy's replication: the store, the cross-zone residue, the WAL path's CPU. */
  walproxy: CostLine[];
  /** The sidecars relaying bytes, as any proxy in front of the broker would: not in the saving. */
  proxy: CostLine[];
  stockUsd: number;
  walproxyUsd: number;
  proxyUsd: number;
  /** walproxyUsd + proxyUsd. */
  totalUsd: number;
  /** stockUsd − walproxyUsd (docs/cost.md, "What a saving is"). */
  savedUsd: number;
  /** stockUsd − totalUsd. */
  netSavedUsd: number;
  /** Throughput (bytes/s) above which walproxy's replication costs less; undefined when it never does. */
  breakEvenBytesPerSec: number | undefined;
  /** Smallest object size (bytes) at which an object costs less than replicating its bytes. */
  breakEvenObjectBytes: number | undefined;
}

/** Objects per second: each broker seals at the earlier of size and linger (never an empty one). */
export function objectsPerSecond(inputs: CostInputs, bytesPerSec = inputs.throughputBytesPerSec): number {
  if (bytesPerSec <= 0) return 0;
  const perBroker = bytesPerSec / inputs.brokers;
  const bySize = perBroker / inputs.objectBytes;
  const byLinger = 1000 / Math.max(inputs.lingerMs, 1);
  return inputs.brokers * Math.max(bySize, byLinger);
}

function charged(bytes: number, requests: number, prices: PriceTable): number {
  return Math.max(0, bytes - requests * prices.freeBytesPerRequest);
}

export function computeCost(inputs: CostInputs, prices: PriceTable): CostResult {
  const proxyCpuPerGb = inputs.proxyCpuSecondsPerGb ?? DEFAULT_CPU.proxySecondsPerGb;
  const walCpuPerGb = inputs.walCpuSecondsPerGb ?? DEFAULT_CPU.walSecondsPerGb;
  const economics = objectEconomics(prices, inputs, {
    retentionSec: inputs.retentionSec,
    residualFraction: inputs.residualFraction,
    walCpuSecondsPerGb: walCpuPerGb,
  });
  const cz = economics.crossZoneFollowers;
  const followers = inputs.replicationFactor - 1;
  const cpuUsd = (seconds: number) => (seconds * prices.vcpuHourUsd) / 3600;
  const walAt = (bps: number): CostLine[] => {
    const gb = (bps * SECONDS_PER_MONTH) / BYTES_PER_GB;
    const puts = objectsPerSecond(inputs, bps) * SECONDS_PER_MONTH;
    const gets = puts * followers;
    const uploadGb = charged(gb * BYTES_PER_GB, puts, prices) / BYTES_PER_GB;
    const retrievalGb = charged(gb * followers * BYTES_PER_GB, gets, prices) / BYTES_PER_GB;
    const storedGb = (bps * inputs.retentionSec) / BYTES_PER_GB;
    const residualGb = gb * cz * inputs.residualFraction;
    return [
      {
        key: 'put_requests',
        item: 'S3E1Z PUT requests',
        quantity: puts,
        unit: 'requests',
        usd: (puts / 1000) * prices.putPer1000,
      },
      {
        key: 'upload',
        item: 'S3E1Z upload',
        quantity: uploadGb,
        unit: 'GB',
        usd: uploadGb * prices.uploadPerGb,
      },
      {
        key: 'get_requests',
        item: 'S3E1Z GET requests (followers)',
        quantity: gets,
        unit: 'requests',
        usd: (gets / 1000) * prices.getPer1000,
      },
      {
        key: 'retrieval',
        item: 'S3E1Z retrieval (followers)',
        quantity: retrievalGb,
        unit: 'GB',
        usd: retrievalGb * prices.retrievalPerGb,
      },
      {
        key: 'storage',
        item: 'S3E1Z storage (retention)',
        quantity: storedGb,
        unit: 'GB-month',
        usd: storedGb * prices.storagePerGbMonth,
      },
      {
        key: 'cross_zone',
        item: 'cross-zone residue (references, headers)',
        quantity: residualGb,
        unit: 'GB',
        usd: residualGb * prices.crossZonePerGb,
      },
      {
        key: 'cpu_wal',
        item: 'sidecar CPU, WAL path',
        quantity: (gb * walCpuPerGb) / 3600,
        unit: 'vCPU-hours',
        usd: cpuUsd(gb * walCpuPerGb),
      },
    ];
  };
  const sum = (lines: CostLine[]) => lines.reduce((t, l) => t + l.usd, 0);

  const producedGb = (inputs.throughputBytesPerSec * SECONDS_PER_MONTH) / BYTES_PER_GB;
  const stock: CostLine[] = [
    {
      key: 'cross_zone',
      item: `cross-zone replication (${cz} follower${cz === 1 ? '' : 's'} in other zones)`,
      quantity: producedGb * cz,
      unit: 'GB',
      usd: producedGb * cz * prices.crossZonePerGb,
    },
  ];
  // Inline, the WAL path does nothing: its replication is stock's, byte for byte.
  const walproxy =
    inputs.mode === 'inline'
      ? [{ ...stock[0]!, item: 'cross-zone replication, inline (as stock)' }]
      : walAt(inputs.throughputBytesPerSec);
  const proxy: CostLine[] = [
    {
      key: 'cpu_proxy',
      item: 'sidecar CPU, relaying (any proxy in front of the broker)',
      quantity: (producedGb * proxyCpuPerGb) / 3600,
      unit: 'vCPU-hours',
      usd: cpuUsd(producedGb * proxyCpuPerGb),
    },
  ];
  const stockUsd = sum(stock);
  const walproxyUsd = sum(walproxy);
  const proxyUsd = sum(proxy);

  // Per produced byte: the object's saving per byte (upload and retrieval charged unless each
  // request's allowance covers the object). The relaying CPU is there inline too: not the WAL's.
  const perByteSaving =
    economics.grossUsdPerByte -
    (prices.freeBytesPerRequest >= inputs.objectBytes ? 0 : economics.chargedUsdPerByte);

  return {
    producedGbPerMonth: producedGb,
    crossZoneFollowers: cz,
    followers,
    effectiveObjectBytes:
      inputs.mode !== 'inline' && inputs.throughputBytesPerSec > 0
        ? inputs.throughputBytesPerSec / objectsPerSecond(inputs)
        : 0,
    objectsPerSecond: inputs.mode === 'inline' ? 0 : objectsPerSecond(inputs),
    stock,
    walproxy,
    proxy,
    stockUsd,
    walproxyUsd,
    proxyUsd,
    totalUsd: walproxyUsd + proxyUsd,
    savedUsd: stockUsd - walproxyUsd,
    netSavedUsd: stockUsd - walproxyUsd - proxyUsd,
    breakEvenBytesPerSec: breakEvenThroughput(inputs, perByteSaving, economics.requestUsd),
    breakEvenObjectBytes: economics.breakEvenObjectBytes,
  };
}

/**
 * The smallest throughput at which walproxy costs no more than stock replication. While the linger
 * seals objects (throughput below `fill`), walproxy pays a fixed request cost F per month plus a
 * per-byte cost: savings = R·sec·a − F, zero at R = F / (sec·a). Above `fill` objects are full and
 * savings are R·sec·(a − requestCost/objectBytes), linear through zero: if they are positive there,
 * the crossing already happened below `fill`. So the break-even is F / (sec·a) when that lies at or
 * below `fill`, and there is none otherwise.
 */
function breakEvenThroughput(
  inputs: CostInputs,
  perByteSaving: number,
  requestCost: number,
): number | undefined {
  if (perByteSaving <= 0) return undefined;
  const lingerObjectsPerSec = inputs.brokers * (1000 / Math.max(inputs.lingerMs, 1));
  const fill = lingerObjectsPerSec * inputs.objectBytes;
  const root = (lingerObjectsPerSec * requestCost) / perByteSaving;
  return root <= fill ? root : undefined;
}
