import type { Logger } from '../log.js';
import { type ObjectStore, type ObjectStoreOptions, openObjectStore } from '../store/index.js';
import { globToRegExp } from '../topics/topic-policy.js';
import { WalRangeReader } from './range-reader.js';

/** One spelling per store, so a leader's reference and a follower's flag compare equal. */
export function normalizeStoreUrl(url: string): string {
  return url.replace(/\/+$/, '');
}

/**
 * Readers for the stores that references may name. A leader writes to its own zone's bucket (S3
 * Express One Zone buckets are zonal), so a follower reads from its own store or, when the
 * leader sits in another zone, from a store allowed by --wal-read-store-url (opened on first use,
 * with this sidecar's store options and credentials). Anything else is refused: the partition
 * then falls back to inline bytes. Every peer reader counts into the own reader's stats, so those
 * are the follower side's reads of all stores — and the own reader's cache bound is one for all of
 * them: a reader evicts its own spans while the shared `cachedBytes` is over it.
 */
export class PeerStoreReaders {
  private readonly readers = new Map<string, WalRangeReader>();
  private readonly stores: ObjectStore[] = [];
  private readonly allowed: RegExp[];

  constructor(
    ownStoreUrl: string,
    private readonly ownReader: WalRangeReader,
    readStoreUrls: readonly string[],
    private readonly storeOptions: ObjectStoreOptions,
    private readonly log: Logger,
  ) {
    this.readers.set(normalizeStoreUrl(ownStoreUrl), ownReader);
    this.allowed = readStoreUrls.map((pattern) => globToRegExp(normalizeStoreUrl(pattern)));
  }

  readerFor(url: string): WalRangeReader | undefined {
    const key = normalizeStoreUrl(url);
    const known = this.readers.get(key);
    if (known) return known;
    if (!this.allowed.some((pattern) => pattern.test(key))) return undefined;
    const store = openObjectStore(key, this.storeOptions);
    const reader = new WalRangeReader({
      store,
      stats: this.ownReader.stats,
      maxCacheBytes: this.ownReader.maxCacheBytes,
    });
    this.stores.push(store);
    this.readers.set(key, reader);
    this.log.info({ store: key }, 'reading WAL references from a peer store');
    return reader;
  }

  /**
   * Stops every reader, the own one included, so reads waiting on a GET give up at once (a
   * stopping sidecar must not wait for a slow store), then closes the peer stores it opened.
   */
  async close(): Promise<void> {
    for (const reader of this.readers.values()) reader.close();
    await Promise.all(this.stores.map((s) => s.close().catch(() => undefined)));
  }
}
