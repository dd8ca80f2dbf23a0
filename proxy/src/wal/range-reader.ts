// Reads byte ranges of WAL objects for the follower side (ARCHITECTURE.md, Replication 3.1). A
// follower of a leader needs most of each of that leader's objects — the batches of every partition
// it follows — so one ranged GET per object and call, spanning every range asked, costs fewer
// requests (the store bills per GET) than one GET per batch, and the span it fetched is kept in a
// byte-bounded LRU cache: the next Fetch of another fetcher thread, or the next partition's turn,
// usually lands in an object already read.
import { ObjectStoreError } from '../store/errors.js';
import type { ByteRange, ObjectStore } from '../store/object-store.js';

export interface WalRangeReaderOptions {
  store: ObjectStore;
  /** Bytes of fetched spans kept for later reads; 0 keeps none. Default 64 MiB. */
  maxCacheBytes?: number;
  /** Store GETs running at once; later ones wait in call order. Default 8. */
  maxConcurrentGets?: number;
}

export const WAL_RANGE_READER_DEFAULTS = {
  maxCacheBytes: 64 * 1024 * 1024,
  maxConcurrentGets: 8,
} as const;

export interface WalRangeReaderStats {
  /** GETs sent to the store. */
  gets: number;
  /** Bytes those GETs returned. */
  bytesFetched: number;
  /** Reads served from a cached span. */
  cacheHits: number;
  /** Reads that needed a GET: one of their own, or one already in flight (see sharedGets). */
  cacheMisses: number;
  /** Misses that joined a GET already in flight for a span covering theirs. */
  sharedGets: number;
  /** Bytes of the spans in the cache now. */
  cachedBytes: number;
}

/** A contiguous piece of one object: `data` holds the object's bytes from `offset` on. */
interface Span {
  readonly objectKey: string;
  readonly offset: number;
  readonly data: Buffer;
}

interface InFlight {
  readonly offset: number;
  readonly end: number;
  readonly promise: Promise<Span>;
}

const EMPTY = Buffer.alloc(0);

function covers(offset: number, end: number, start: number, stop: number): boolean {
  return offset <= start && stop <= end;
}

/**
 * `read(objectKey, ranges)` answers with one buffer per range, in order. The buffers are views of
 * a span that the cache may share with later reads: callers copy them, never write into them.
 * Failures are not cached: the next read of the same bytes asks the store again.
 */
export class WalRangeReader {
  readonly stats: WalRangeReaderStats = {
    gets: 0,
    bytesFetched: 0,
    cacheHits: 0,
    cacheMisses: 0,
    sharedGets: 0,
    cachedBytes: 0,
  };
  readonly #store: ObjectStore;
  readonly #maxCacheBytes: number;
  readonly #maxConcurrentGets: number;
  /** Every cached span, least recently used first (a Set iterates in insertion order). */
  readonly #lru = new Set<Span>();
  readonly #cached = new Map<string, Span[]>();
  readonly #inFlight = new Map<string, InFlight[]>();
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(options: WalRangeReaderOptions) {
    const maxCacheBytes = options.maxCacheBytes ?? WAL_RANGE_READER_DEFAULTS.maxCacheBytes;
    const maxConcurrentGets = options.maxConcurrentGets ?? WAL_RANGE_READER_DEFAULTS.maxConcurrentGets;
    if (!Number.isSafeInteger(maxCacheBytes) || maxCacheBytes < 0) {
      throw new RangeError(`maxCacheBytes must be a non-negative integer, got ${maxCacheBytes}`);
    }
    if (!Number.isSafeInteger(maxConcurrentGets) || maxConcurrentGets < 1) {
      throw new RangeError(`maxConcurrentGets must be a positive integer, got ${maxConcurrentGets}`);
    }
    this.#store = options.store;
    this.#maxCacheBytes = maxCacheBytes;
    this.#maxConcurrentGets = maxConcurrentGets;
  }

  async read(objectKey: string, ranges: readonly ByteRange[]): Promise<Buffer[]> {
    let start = Number.POSITIVE_INFINITY;
    let end = 0;
    for (const { offset, length } of ranges) {
      if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
        throw new RangeError(
          `invalid range offset=${offset} length=${length} of ${JSON.stringify(objectKey)}`,
        );
      }
      // An empty range (a batch with no records section) needs no bytes, so it must not widen the span.
      if (length === 0) continue;
      start = Math.min(start, offset);
      end = Math.max(end, offset + length);
    }
    if (end === 0) return ranges.map(() => EMPTY);
    const span = await this.#span(objectKey, start, end);
    return ranges.map(({ offset, length }) =>
      length === 0 ? EMPTY : span.data.subarray(offset - span.offset, offset - span.offset + length),
    );
  }

  async #span(objectKey: string, start: number, end: number): Promise<Span> {
    const cached = this.#cached
      .get(objectKey)
      ?.find((s) => covers(s.offset, s.offset + s.data.length, start, end));
    if (cached !== undefined) {
      this.stats.cacheHits++;
      this.#lru.delete(cached);
      this.#lru.add(cached);
      return cached;
    }
    this.stats.cacheMisses++;
    const flights = this.#inFlight.get(objectKey);
    const joined = flights?.find((f) => covers(f.offset, f.end, start, end));
    if (joined !== undefined) {
      this.stats.sharedGets++;
      return joined.promise;
    }
    const flight: InFlight = { offset: start, end, promise: this.#get(objectKey, start, end) };
    if (flights === undefined) this.#inFlight.set(objectKey, [flight]);
    else flights.push(flight);
    try {
      const span = await flight.promise;
      this.#remember(span);
      return span;
    } finally {
      const left = this.#inFlight.get(objectKey)?.filter((f) => f !== flight) ?? [];
      if (left.length === 0) this.#inFlight.delete(objectKey);
      else this.#inFlight.set(objectKey, left);
    }
  }

  async #get(objectKey: string, start: number, end: number): Promise<Span> {
    if (this.#running < this.#maxConcurrentGets) this.#running++;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      this.stats.gets++;
      const length = end - start;
      const data = await this.#store.get(objectKey, { offset: start, length });
      // The store contract promises exactly `length` bytes; a store that breaks it must not make
      // the caller rebuild a batch from missing bytes.
      if (data.length !== length) {
        throw new ObjectStoreError(
          'WALPROXY_ERR_STORE_OTHER',
          `${this.#store.url} returned ${data.length} bytes for ${length} bytes at ${start} of ${JSON.stringify(objectKey)}`,
          { key: objectKey },
        );
      }
      this.stats.bytesFetched += data.length;
      return { objectKey, offset: start, data };
    } finally {
      // Hand the slot straight to the next waiter, so a burst cannot overtake the queue.
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#running--;
    }
  }

  #remember(span: Span): void {
    if (span.data.length > this.#maxCacheBytes) return;
    const end = span.offset + span.data.length;
    const spans = this.#cached.get(span.objectKey) ?? [];
    // Two GETs of overlapping spans can both finish: keep the bytes once.
    if (spans.some((old) => covers(old.offset, old.offset + old.data.length, span.offset, end))) return;
    // Spans the new one covers would never be found again (lookups take the first that covers).
    for (const old of spans) {
      if (covers(span.offset, end, old.offset, old.offset + old.data.length)) this.#forget(old);
    }
    const kept = this.#cached.get(span.objectKey) ?? [];
    kept.push(span);
    this.#cached.set(span.objectKey, kept);
    this.#lru.add(span);
    this.stats.cachedBytes += span.data.length;
    for (const oldest of this.#lru) {
      if (this.stats.cachedBytes <= this.#maxCacheBytes) break;
      this.#forget(oldest);
    }
  }

  #forget(span: Span): void {
    this.#lru.delete(span);
    this.stats.cachedBytes -= span.data.length;
    const left = this.#cached.get(span.objectKey)?.filter((s) => s !== span) ?? [];
    if (left.length === 0) this.#cached.delete(span.objectKey);
    else this.#cached.set(span.objectKey, left);
  }
}
