// What one WAL object saves against stock replication of its bytes, from the price table and the
// cluster's layout: the break-even object size the sealing policy keeps objects above, and the
// saving per byte at any object size (docs/cost.md, "Break-even").
import type { PriceTable } from './prices.js';

/** A 30-day month, the convention of the reference numbers. */
export const SECONDS_PER_MONTH = 30 * 24 * 3600;
export const BYTES_PER_GB = 1e9;

/**
 * Sidecar CPU seconds per GB produced, measured on this project's replication benchmark
 * (docs/benchmarks.md, 2026-11-30, three sidecars on a 2-core machine shared with moto): 35.6 with
 * the sidecars in the path but no WAL, 172.7 with the WAL at 10 ms linger. The WAL's share is the
 * difference, charged per byte; part of it is per request (SDK machinery, moto's one connection per
 * request), so it overstates the CPU of large objects. Override with measured figures.
 */
export const DEFAULT_CPU = {
  proxySecondsPerGb: 35.6,
  walSecondsPerGb: 172.7 - 35.6,
} as const;

/**
 * What relaying costs a sidecar with no WAL at all, per GiB (2^30 bytes) in each direction:
 * `make bench-pass-through` on main, 2026-12-02 (e2e/bench/pass-through.bench.ts, 5 rounds,
 * interleaved in alternating order: walproxy without WAL flags in front of one broker, 1 KiB
 * records, a 2-core machine): 1.03 CPU-s per GiB produced (bytes from the downstream side) and
 * 0.86 per GiB consumed (bytes from upstream), against 0.86 / 0.87 for a bare Node socket.pipe()
 * in the same run. (The 2026-12-01 run's 1.78 / 1.00 was the larger of two rounds taken as the
 * median, one of them warming up.) The live cost metrics charge the bytes a sidecar's listeners
 * relayed at these rates to relaying, and the rest of its CPU to the WAL path.
 */
export const DEFAULT_PASS_THROUGH_CPU = {
  secondsPerGibFromDownstream: 1.03,
  secondsPerGibFromUpstream: 0.86,
} as const;

/** CPU-seconds a plain proxy would spend relaying these bytes (DEFAULT_PASS_THROUGH_CPU). */
export function relayCpuSeconds(
  bytesFromDownstream: number,
  bytesFromUpstream: number,
  rates: {
    secondsPerGibFromDownstream: number;
    secondsPerGibFromUpstream: number;
  } = DEFAULT_PASS_THROUGH_CPU,
): number {
  return (
    (bytesFromDownstream * rates.secondsPerGibFromDownstream +
      bytesFromUpstream * rates.secondsPerGibFromUpstream) /
    2 ** 30
  );
}

/** Cross-zone residue with the WAL, as a fraction of stock replication bytes (docs/cost.md). */
export const DEFAULT_RESIDUAL_FRACTION = 0.0114;
export const DEFAULT_RETENTION_SEC = 3_600;

export interface ClusterLayout {
  replicationFactor: number;
  /** Availability zones the replicas spread over, round-robin. */
  zones: number;
}

export interface EconomicsOptions {
  /** How long WAL objects are kept before gc or a lifecycle rule deletes them. */
  retentionSec?: number;
  /** Fraction of the stock replication bytes that still cross zones with the WAL. */
  residualFraction?: number;
  /** Sidecar CPU the WAL path adds per GB it carries (upload, follower GETs and fills). */
  walCpuSecondsPerGb?: number;
  /**
   * Followers that read each byte from the store. Every follower does today (the leader side
   * sends references to followers in its own zone too, which saves them nothing and costs a GET
   * and the retrieval): rf − 1.
   */
  storeReaders?: number;
  /**
   * GETs per object: one per follower broker whose partitions it holds (a follower's sidecar
   * reads an object once for all its partitions). rf − 1 when the cluster has rf brokers; up to
   * brokers − 1 when the leader's partitions have followers on more brokers.
   */
  getsPerObject?: number;
}

export interface ObjectEconomics {
  /** Followers in another zone than their leader: each would receive every byte across zones. */
  crossZoneFollowers: number;
  storeReaders: number;
  getsPerObject: number;
  /** What stock replication pays per produced byte: cross-zone transfer to each such follower. */
  stockUsdPerByte: number;
  /** What the requests of one object cost: one PUT and `getsPerObject` GETs. */
  requestUsd: number;
  /** Saved per byte whatever the object size: the transfer avoided, less storage and the WAL's CPU. */
  grossUsdPerByte: number;
  /** Upload and every reader's retrieval per byte beyond each request's free allowance. */
  chargedUsdPerByte: number;
  /** USD an object of `bytes` record bytes saves against stock replication (negative: it costs more). */
  savingUsd(bytes: number): number;
  /** savingUsd / bytes. */
  savingPerByte(bytes: number): number;
  /** savingPerByte / stockUsdPerByte: the share of the stock cost an object this size saves. */
  savedFraction(bytes: number): number;
  /** The smallest object that saves anything; undefined when no object size ever does. */
  breakEvenObjectBytes: number | undefined;
  /** The share saved as objects grow without bound (no request cost left). */
  maxSavedFraction: number;
}

/** Replicas of a partition outside its leader's zone when rf replicas spread round-robin over the zones. */
export function crossZoneFollowers(replicationFactor: number, zones: number): number {
  return replicationFactor - Math.ceil(replicationFactor / Math.min(zones, replicationFactor));
}

/**
 * An object of S record bytes, uploaded once and read by each store reader, against stock
 * replication of the same bytes to c followers in other zones:
 *   saving(S) = S·(c·crossZone·(1 − ρ) − storage·H/month − cpu) − (put + gets·get)
 *               − (upload + readers·retrieval)·max(0, S − free)
 * per byte, per request, per GB as the price table has them. A follower in the leader's zone adds
 * nothing to c and still pays its GET and retrieval.
 */
export function objectEconomics(
  prices: PriceTable,
  layout: ClusterLayout,
  options: EconomicsOptions = {},
): ObjectEconomics {
  const followers = layout.replicationFactor - 1;
  const cz = crossZoneFollowers(layout.replicationFactor, layout.zones);
  const storeReaders = options.storeReaders ?? followers;
  const getsPerObject = options.getsPerObject ?? followers;
  const retentionSec = options.retentionSec ?? DEFAULT_RETENTION_SEC;
  const residual = options.residualFraction ?? DEFAULT_RESIDUAL_FRACTION;
  const cpuSecondsPerGb = options.walCpuSecondsPerGb ?? DEFAULT_CPU.walSecondsPerGb;

  const stockUsdPerByte = (cz * prices.crossZonePerGb) / BYTES_PER_GB;
  const gross =
    (cz * prices.crossZonePerGb * (1 - residual) -
      (prices.storagePerGbMonth * retentionSec) / SECONDS_PER_MONTH -
      (cpuSecondsPerGb * prices.vcpuHourUsd) / 3600) /
    BYTES_PER_GB;
  const charged = (prices.uploadPerGb + storeReaders * prices.retrievalPerGb) / BYTES_PER_GB;
  const free = prices.freeBytesPerRequest;
  const requestUsd = (prices.putPer1000 + getsPerObject * prices.getPer1000) / 1000;

  const savingUsd = (bytes: number) => bytes * gross - requestUsd - charged * Math.max(0, bytes - free);
  const net = gross - charged;
  let breakEvenObjectBytes: number | undefined;
  if (gross > 0 && requestUsd / gross <= free) breakEvenObjectBytes = requestUsd / gross;
  else if (net > 0) breakEvenObjectBytes = (requestUsd - charged * free) / net;

  return {
    crossZoneFollowers: cz,
    storeReaders,
    getsPerObject,
    stockUsdPerByte,
    requestUsd,
    grossUsdPerByte: gross,
    chargedUsdPerByte: charged,
    savingUsd,
    savingPerByte: (bytes) => savingUsd(bytes) / bytes,
    savedFraction: (bytes) => (stockUsdPerByte > 0 ? savingUsd(bytes) / bytes / stockUsdPerByte : 0),
    breakEvenObjectBytes,
    maxSavedFraction: stockUsdPerByte > 0 ? net / stockUsdPerByte : 0,
  };
}
