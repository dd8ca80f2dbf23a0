import type { Logger } from '../log.js';
import { type ObjectStore, type ObjectStoreOptions, openObjectStore } from '../store/index.js';
import { globToRegExp } from '../topics/topic-policy.js';
import { WalRangeReader } from './range-reader.js';

/** One spelling per store, so a leader's reference and a follower's flag compare equal. */
export function normalizeStoreUrl(url: string): string {
  return url.replace(/\/+$/, '');
}

export const PEER_STORE_DEFAULTS = {
  /**
   * Stores open at once whose names only a --wal-read-store-url glob allows. A deployment reads
   * one bucket per zone (three, usually); a name beyond the cap is refused, so references naming
   * ever new stores cannot make the sidecar open stores (each with its HTTP agent and cache)
   * until it runs out of memory.
   */
  maxGlobStores: 16,
  /**
   * A peer store nobody asked for this long is closed with its reader (and opened again on the
   * next reference naming it): what a glob let in does not stay open for good, and the cap above
   * frees up. Well above --fill-deadline-ms (10 s at most), so a store is not closed between a
   * follower's fetch rounds.
   */
  idleMs: 300_000,
} as const;

/** Longest store name taken from a reference; a longer one is malformed (no bucket URL is near it). */
const MAX_STORE_NAME = 2048;

export interface PeerStoreReadersStats {
  /** Peer stores open now (the own store not counted). */
  open: number;
  /** Peer stores opened, reopenings after an idle close included. */
  opened: number;
  /** Peer stores closed because nobody read them for idleMs. */
  closedIdle: number;
  /** References to a store no --wal-read-store-url allows. */
  refusedNotAllowed: number;
  /** References to a glob-allowed store refused because maxGlobStores were open. */
  refusedOverCap: number;
  /** References whose store name is not one (too long, or a URL no store opens). */
  refusedMalformed: number;
}

export interface PeerStoreReadersOptions {
  ownStoreUrl: string;
  ownReader: WalRangeReader;
  /** --wal-read-store-url: exact URLs, always allowed, and globs, allowed up to maxGlobStores. */
  readStoreUrls: readonly string[];
  storeOptions: ObjectStoreOptions;
  log: Logger;
  maxGlobStores?: number;
  idleMs?: number;
  /** Milliseconds on a monotonic clock; injectable for tests. */
  now?: () => number;
  /** How a store is opened; injectable for tests. */
  openStore?: (url: string, options: ObjectStoreOptions) => ObjectStore;
}

interface PeerReader {
  readonly store: ObjectStore;
  readonly reader: WalRangeReader;
  /** Allowed by a glob only: counts against maxGlobStores. */
  readonly byGlob: boolean;
  usedAt: number;
}

/**
 * Readers for the stores that references may name. A leader writes to its own zone's bucket (S3
 * Express One Zone buckets are zonal), so a follower reads from its own store or, when the
 * leader sits in another zone, from a store allowed by --wal-read-store-url (opened on first use,
 * with this sidecar's store options and credentials). Anything else is refused: the partition
 * then falls back to inline bytes. A reference's store name comes from a peer, so what it may
 * open is bounded: a name only a glob allows opens a store while fewer than maxGlobStores such
 * stores are open, and every peer store is closed once idle. There is one reader per store at a
 * time. Every peer reader shares the own reader's cache budget, so its stats are the follower
 * side's reads of all stores and its bound is one for all of them.
 */
export class PeerStoreReaders {
  readonly stats: PeerStoreReadersStats = {
    open: 0,
    opened: 0,
    closedIdle: 0,
    refusedNotAllowed: 0,
    refusedOverCap: 0,
    refusedMalformed: 0,
  };
  private readonly ownStoreUrl: string;
  private readonly peers = new Map<string, PeerReader>();
  private readonly exact: Set<string>;
  private readonly globs: RegExp[];
  private readonly maxGlobStores: number;
  private readonly idleMs: number;
  private readonly now: () => number;
  private readonly openStore: (url: string, options: ObjectStoreOptions) => ObjectStore;
  private readonly sweep: NodeJS.Timeout;
  /** Closes of idle stores still running; close() waits for them too. */
  private readonly closing = new Set<Promise<void>>();

  constructor(private readonly options: PeerStoreReadersOptions) {
    this.ownStoreUrl = normalizeStoreUrl(options.ownStoreUrl);
    const patterns = options.readStoreUrls.map(normalizeStoreUrl);
    this.exact = new Set(patterns.filter((p) => !/[*?]/.test(p)));
    this.globs = patterns.filter((p) => /[*?]/.test(p)).map(globToRegExp);
    this.maxGlobStores = options.maxGlobStores ?? PEER_STORE_DEFAULTS.maxGlobStores;
    this.idleMs = options.idleMs ?? PEER_STORE_DEFAULTS.idleMs;
    if (!Number.isSafeInteger(this.maxGlobStores) || this.maxGlobStores < 0) {
      throw new RangeError(`maxGlobStores must be a non-negative integer, got ${this.maxGlobStores}`);
    }
    if (!(this.idleMs > 0)) throw new RangeError(`idleMs must be positive, got ${this.idleMs}`);
    this.now = options.now ?? (() => performance.now());
    this.openStore = options.openStore ?? openObjectStore;
    this.sweep = setInterval(() => this.closeIdle(), Math.max(this.idleMs / 2, 100));
    this.sweep.unref();
  }

  /**
   * The reader of the store `url` names, or undefined when it may not be read (counted by
   * reason). Never throws: the name comes from a peer's bytes.
   */
  readerFor(url: string): WalRangeReader | undefined {
    if (typeof url !== 'string' || url.length > MAX_STORE_NAME) {
      this.stats.refusedMalformed++;
      return undefined;
    }
    const key = normalizeStoreUrl(url);
    if (key === this.ownStoreUrl) return this.options.ownReader;
    this.closeIdle();
    const known = this.peers.get(key);
    if (known) {
      known.usedAt = this.now();
      return known.reader;
    }
    const byGlob = !this.exact.has(key);
    if (byGlob && !this.globs.some((pattern) => pattern.test(key))) {
      this.stats.refusedNotAllowed++;
      return undefined;
    }
    if (byGlob && this.globStoresOpen() >= this.maxGlobStores) {
      this.stats.refusedOverCap++;
      if (this.stats.refusedOverCap === 1 || this.stats.refusedOverCap % 1000 === 0) {
        this.options.log.warn(
          { store: key, maxGlobStores: this.maxGlobStores, refused: this.stats.refusedOverCap },
          'a reference names more stores than --wal-read-store-max-open allows open at once: its partitions go inline',
        );
      }
      return undefined;
    }
    let store: ObjectStore;
    try {
      store = this.openStore(key, this.options.storeOptions);
    } catch {
      this.stats.refusedMalformed++;
      return undefined;
    }
    const reader = new WalRangeReader({ store, budget: this.options.ownReader.budget });
    this.peers.set(key, { store, reader, byGlob, usedAt: this.now() });
    this.stats.opened++;
    this.stats.open = this.peers.size;
    this.options.log.info({ store: key }, 'reading WAL references from a peer store');
    return reader;
  }

  private globStoresOpen(): number {
    let open = 0;
    for (const peer of this.peers.values()) if (peer.byGlob) open++;
    return open;
  }

  /** Closes the peer stores nobody asked for in idleMs, unless a read still waits on them. */
  private closeIdle(): void {
    const cutoff = this.now() - this.idleMs;
    for (const [key, peer] of this.peers) {
      if (peer.usedAt > cutoff || peer.reader.busy) continue;
      this.peers.delete(key);
      peer.reader.close();
      this.stats.closedIdle++;
      const closed = peer.store.close().catch(() => undefined);
      this.closing.add(closed);
      void closed.then(() => this.closing.delete(closed));
      this.options.log.info({ store: key, idleMs: this.idleMs }, 'closed an idle peer store');
    }
    this.stats.open = this.peers.size;
  }

  /**
   * Stops every reader, the own one included, so reads waiting on a GET give up at once (a
   * stopping sidecar must not wait for a slow store), then closes the peer stores it opened.
   */
  async close(): Promise<void> {
    clearInterval(this.sweep);
    this.options.ownReader.close();
    const peers = [...this.peers.values()];
    this.peers.clear();
    this.stats.open = 0;
    for (const peer of peers) peer.reader.close();
    await Promise.all([...peers.map((p) => p.store.close().catch(() => undefined)), ...this.closing]);
  }
}
