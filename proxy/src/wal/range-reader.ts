// Reads byte ranges of WAL objects for the follower side (docs/replication-follower.md, "The range
// reader"). One leader's object holds batches of every partition it leads, and its followers fetch
// them all (with RF=3 on 3 brokers, every follower fetches every partition), usually over more than
// one Fetch: batches reach a follower as they are appended, and an object seals only after its
// linger. So on a miss the reader GETs the whole object — one GET without a Range, which needs no
// object size — and keeps it in a byte-bounded LRU cache: the next Fetch of the same object, from
// this fetcher or another, is a hit, and the store bills one GET per object instead of one per span
// asked. An object the references show to be larger than the whole-object bound is read in ranges
// instead: only the bytes no cached span holds, merged with the spans next to them.
import { channel } from 'node:diagnostics_channel';
import { ObjectStoreError } from '../store/errors.js';
import type { ByteRange, ObjectStore } from '../store/object-store.js';
import { WAL_READER_CHANNELS, type WalReaderGetEvent } from './channels.js';
import { RecentKeys } from './recent-keys.js';

const readerChannels = { get: channel(WAL_READER_CHANNELS.get) };

export interface WalRangeReaderOptions {
  store: ObjectStore;
  /** Bytes of fetched objects and spans kept for later reads; 0 keeps none. Default 64 MiB. */
  maxCacheBytes?: number;
  /** Store GETs running at once; later ones wait in call order. Default 8. */
  maxConcurrentGets?: number;
  /**
   * A miss whose ranges all end within this many bytes of the object's start reads the whole
   * object; a range ending past it proves the object is at least that big, and it is read in
   * ranges. Capped by maxCacheBytes (an object the cache cannot keep is not worth reading whole).
   * Default 8 MiB: WAL objects are 100-500 KB at the writer's default target.
   */
  wholeObjectMaxBytes?: number;
  /**
   * A cached span nobody read for this long is dropped, whatever room the cache has left. Default
   * 10 s. What a follower re-reads it re-reads soon: the rest of an object its last Fetch did not
   * reach yet, another fetcher's share of it, a Fetch retried after a reconnect; an object older
   * than a few fetch rounds is read by nobody (a follower that catches up reads each object once).
   * Without it the cache sits at its bound for good: ~61 MiB of a 512 MiB sidecar, most of what
   * kept the memory soak above 256 MB (docs/benchmarks.md, "Memory soak"). Infinity keeps spans
   * until the bound evicts them.
   */
  cacheIdleMs?: number;
  /** Milliseconds on a monotonic clock; injectable for tests. */
  now?: () => number;
  /**
   * One cache bound shared with other readers (PeerStoreReaders: the own store's reader and the
   * peer stores'): its bytes and counters replace maxCacheBytes and stats.
   */
  budget?: ReadCacheBudget;
}

export const WAL_RANGE_READER_DEFAULTS = {
  maxCacheBytes: 64 * 1024 * 1024,
  maxConcurrentGets: 8,
  wholeObjectMaxBytes: 8 * 1024 * 1024,
  cacheIdleMs: 10_000,
} as const;

/** How many object keys the reader remembers having read, to count objects read (not re-reads). */
const SEEN_KEYS = 65_536;

export interface WalRangeReaderStats {
  /** GETs sent to the store. */
  gets: number;
  /** Those of them without a Range: the whole object. */
  wholeObjectGets: number;
  /**
   * Objects that needed at least one GET, each counted once (among the last 65,536 read), so
   * gets / objectsRead is the GETs per object per follower.
   */
  objectsRead: number;
  /** Bytes those GETs returned. */
  bytesFetched: number;
  /** Reads served from the cache. */
  cacheHits: number;
  /** Reads that needed a GET: one of their own, or one already in flight (see sharedGets). */
  cacheMisses: number;
  /** Misses that joined a GET already in flight for bytes covering theirs. */
  sharedGets: number;
  /** Bytes of objects and spans in the cache now. */
  cachedBytes: number;
  /** Spans dropped because nobody read them for cacheIdleMs. */
  idleEvictions: number;
  /** Whole-object GETs started on a leader side's hint, before any read asked (prefetch). */
  prefetches: number;
  /** Of those, GETs that failed (the read that needed the bytes asked the store again). */
  prefetchesFailed: number;
}

export function newRangeReaderStats(): WalRangeReaderStats {
  return {
    gets: 0,
    wholeObjectGets: 0,
    objectsRead: 0,
    bytesFetched: 0,
    cacheHits: 0,
    cacheMisses: 0,
    sharedGets: 0,
    cachedBytes: 0,
    idleEvictions: 0,
    prefetches: 0,
    prefetchesFailed: 0,
  };
}

/**
 * The byte bound of one or more readers' caches. Over it, the least recently used span goes first,
 * whichever reader holds it: a reader that bounded only its own spans against a shared total
 * could not cache at all while another reader filled the bound (issue #24, item 7), and a bound
 * per reader would multiply with the number of stores.
 */
export class ReadCacheBudget {
  /** Every cached span of every reader, least recently used first, with how to drop it. */
  readonly #lru = new Map<object, () => void>();

  constructor(
    readonly maxBytes: number,
    readonly stats: WalRangeReaderStats = newRangeReaderStats(),
  ) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
      throw new RangeError(`maxCacheBytes must be a non-negative integer, got ${maxBytes}`);
    }
  }

  /** `span` was cached or read now; `forget` drops it from its reader's cache. */
  used(span: object, forget: () => void): void {
    this.#lru.delete(span);
    this.#lru.set(span, forget);
  }

  dropped(span: object): void {
    this.#lru.delete(span);
  }

  /** Drops the least recently used spans, of any reader, until the cached bytes fit. */
  fit(): void {
    for (const forget of this.#lru.values()) {
      if (this.stats.cachedBytes <= this.maxBytes) break;
      forget();
    }
  }
}

/** A contiguous piece of one object: `data` holds the object's bytes from `offset` on. */
interface Span {
  readonly objectKey: string;
  readonly offset: number;
  readonly data: Buffer;
  /** The whole object: a range past its end is past the object's end. */
  readonly whole: boolean;
  /** When it was last cached or read (the reader's clock); merely built spans leave it 0. */
  usedAt: number;
}

interface InFlight {
  readonly offset: number;
  /** Infinity for a whole-object GET. */
  readonly end: number;
  readonly promise: Promise<Span>;
}

const EMPTY = Buffer.alloc(0);

function endOf(span: Span): number {
  return span.offset + span.data.length;
}

function covers(span: Span, start: number, end: number): boolean {
  return span.whole ? start >= 0 : span.offset <= start && end <= endOf(span);
}

/** One span from spans whose union is contiguous (a whole object among them is enough alone). */
function merge(spans: readonly Span[]): Span {
  const whole = spans.find((s) => s.whole);
  if (whole !== undefined) return whole;
  if (spans.length === 1) return spans[0]!;
  const offset = Math.min(...spans.map((s) => s.offset));
  const data = Buffer.allocUnsafe(Math.max(...spans.map(endOf)) - offset);
  for (const s of spans) s.data.copy(data, s.offset - offset);
  return { objectKey: spans[0]!.objectKey, offset, data, whole: false, usedAt: 0 };
}

function closedError(): ObjectStoreError {
  return new ObjectStoreError('WALPROXY_ERR_STORE_OTHER', 'the WAL range reader is closed');
}

/**
 * `read(objectKey, ranges)` answers with one buffer per range, in order. The buffers are views of
 * bytes the cache may share with later reads: callers copy them, never write into them. Failures
 * are not cached: the next read of the same bytes asks the store again.
 */
export class WalRangeReader {
  readonly stats: WalRangeReaderStats;
  readonly budget: ReadCacheBudget;
  readonly #store: ObjectStore;
  readonly #maxCacheBytes: number;
  readonly #maxConcurrentGets: number;
  readonly #wholeObjectMaxBytes: number;
  /** Every cached span, least recently used first (a Set iterates in insertion order). */
  readonly #lru = new Set<Span>();
  /** Per object: its whole bytes, or disjoint spans none of which touches another. */
  readonly #cached = new Map<string, Span[]>();
  readonly #inFlight = new Map<string, InFlight[]>();
  readonly #seen = new RecentKeys(SEEN_KEYS);
  #running = 0;
  readonly #waiting: { start: () => void; cancel: (error: Error) => void }[] = [];
  readonly #closing = new AbortController();
  readonly #cacheIdleMs: number;
  readonly #now: () => number;
  /** Sweeps idle spans while no read does (a follower that stopped reading must not pin them). */
  readonly #idleSweep: NodeJS.Timeout | undefined;

  constructor(options: WalRangeReaderOptions) {
    const d = WAL_RANGE_READER_DEFAULTS;
    const maxCacheBytes = options.budget?.maxBytes ?? options.maxCacheBytes ?? d.maxCacheBytes;
    const maxConcurrentGets = options.maxConcurrentGets ?? d.maxConcurrentGets;
    const wholeObjectMaxBytes = options.wholeObjectMaxBytes ?? d.wholeObjectMaxBytes;
    const cacheIdleMs = options.cacheIdleMs ?? d.cacheIdleMs;
    if (!Number.isSafeInteger(maxConcurrentGets) || maxConcurrentGets < 1) {
      throw new RangeError(`maxConcurrentGets must be a positive integer, got ${maxConcurrentGets}`);
    }
    if (!Number.isSafeInteger(wholeObjectMaxBytes) || wholeObjectMaxBytes < 0) {
      throw new RangeError(`wholeObjectMaxBytes must be a non-negative integer, got ${wholeObjectMaxBytes}`);
    }
    if (!(cacheIdleMs > 0)) {
      throw new RangeError(`cacheIdleMs must be positive (Infinity: never), got ${cacheIdleMs}`);
    }
    // Checks maxCacheBytes.
    this.budget = options.budget ?? new ReadCacheBudget(maxCacheBytes);
    this.stats = this.budget.stats;
    this.#store = options.store;
    this.#maxCacheBytes = maxCacheBytes;
    this.#maxConcurrentGets = maxConcurrentGets;
    this.#wholeObjectMaxBytes = Math.min(wholeObjectMaxBytes, maxCacheBytes);
    this.#cacheIdleMs = cacheIdleMs;
    this.#now = options.now ?? (() => performance.now());
    if (Number.isFinite(cacheIdleMs) && maxCacheBytes > 0) {
      this.#idleSweep = setInterval(() => this.#dropIdle(), Math.max(cacheIdleMs / 2, 100));
      this.#idleSweep.unref();
    }
  }

  /** The bound on cached bytes this reader keeps to (shared with readers sharing its budget). */
  get maxCacheBytes(): number {
    return this.#maxCacheBytes;
  }

  async read(objectKey: string, ranges: readonly ByteRange[]): Promise<Buffer[]> {
    if (this.#closing.signal.aborted) throw closedError();
    const bounds = boundsOf(objectKey, ranges);
    if (bounds === undefined) return ranges.map(() => EMPTY);
    const span = await this.#span(objectKey, bounds.start, bounds.end);
    return slices(span, ranges);
  }

  /**
   * The ranges from the cache alone, or undefined when they are not all there: for a caller that
   * must not wait on the store (its reads are backing off) but may use what is already here.
   */
  peek(objectKey: string, ranges: readonly ByteRange[]): Buffer[] | undefined {
    const bounds = boundsOf(objectKey, ranges);
    if (bounds === undefined) return ranges.map(() => EMPTY);
    this.#dropIdle();
    const span = this.#lookup(objectKey, bounds.start, bounds.end);
    if (span === undefined) return undefined;
    this.#touch(span);
    return slices(span, ranges);
  }

  /**
   * Starts reading a whole object into the cache before any read asks for it (a leader side's
   * hint, prefetch-hints.ts); true when its GET started. Skipped when the object is cached or being
   * read already, is too large to read whole, or every GET slot is taken: a prefetch never queues
   * ahead of a read someone waits for. A failure is only counted: the read that needs the bytes
   * asks the store again.
   */
  prefetch(objectKey: string, size: number): boolean {
    if (this.#closing.signal.aborted) return false;
    if (!(size > 0) || size > this.#wholeObjectMaxBytes) return false;
    if (this.#running >= this.#maxConcurrentGets || this.#inFlight.has(objectKey)) return false;
    this.#dropIdle();
    if (this.#cached.get(objectKey)?.some((s) => s.whole)) return false;
    this.stats.prefetches++;
    this.#span(objectKey, 0, size, false).catch(() => {
      this.stats.prefetchesFailed++;
    });
    return true;
  }

  /** Whether a read waits on the store now (a GET of its own or shared, running or queued). */
  get busy(): boolean {
    return this.#inFlight.size > 0;
  }

  /**
   * Stops: reads waiting for a GET (their own or shared, running or queued) reject at once, GETs
   * get the abort signal, and the cache is dropped. Later reads reject.
   */
  close(): void {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort();
    clearInterval(this.#idleSweep);
    for (const waiter of this.#waiting.splice(0)) waiter.cancel(closedError());
    for (const span of [...this.#lru]) this.#forget(span);
  }

  #lookup(objectKey: string, start: number, end: number): Span | undefined {
    return this.#cached.get(objectKey)?.find((s) => covers(s, start, end));
  }

  #touch(span: Span): void {
    this.stats.cacheHits++;
    span.usedAt = this.#now();
    this.#lru.delete(span);
    this.#lru.add(span);
    this.budget.used(span, () => this.#forget(span));
  }

  /** Drops the spans nobody read for cacheIdleMs: the least recently used first, so a prefix. */
  #dropIdle(): void {
    const cutoff = this.#now() - this.#cacheIdleMs;
    for (const oldest of this.#lru) {
      if (oldest.usedAt > cutoff) break;
      this.#forget(oldest);
      this.stats.idleEvictions++;
    }
  }

  /** `asked`: a read asked for these bytes (false: a prefetch, which is neither a hit nor a miss). */
  async #span(objectKey: string, start: number, end: number, asked = true): Promise<Span> {
    this.#dropIdle();
    const cached = this.#lookup(objectKey, start, end);
    if (cached !== undefined) {
      this.#touch(cached);
      return cached;
    }
    if (asked) this.stats.cacheMisses++;
    const flights = this.#inFlight.get(objectKey);
    const joined = flights?.find((f) => f.offset <= start && end <= f.end);
    if (joined !== undefined) {
      this.stats.sharedGets++;
      return joined.promise;
    }
    let flight: InFlight;
    if (end <= this.#wholeObjectMaxBytes) {
      flight = {
        offset: 0,
        end: Number.POSITIVE_INFINITY,
        promise: this.#get(objectKey, undefined).then((whole) => this.#remember(whole)),
      };
    } else {
      // Only the bytes no cached span holds, from the first such byte to the last: one GET.
      const partial = (this.#cached.get(objectKey) ?? []).filter((s) => s.offset < end && start < endOf(s));
      let from = start;
      let to = end;
      for (let moved = true; moved && from < to; ) {
        moved = false;
        for (const s of partial) {
          if (s.offset <= from && from < endOf(s)) {
            from = endOf(s);
            moved = true;
          }
          if (s.offset < to && to <= endOf(s)) {
            to = s.offset;
            moved = true;
          }
        }
      }
      if (from >= to) {
        this.stats.cacheHits++;
        return merge(partial);
      }
      flight = {
        offset: from,
        end: to,
        promise: this.#get(objectKey, { offset: from, length: to - from }).then((fresh) => {
          const kept = this.#remember(fresh);
          // The cache may have dropped (or never kept) the spans around the new bytes.
          return covers(kept, start, end) ? kept : merge([...partial, fresh]);
        }),
      };
    }
    if (flights === undefined) this.#inFlight.set(objectKey, [flight]);
    else flights.push(flight);
    try {
      return await flight.promise;
    } finally {
      const left = this.#inFlight.get(objectKey)?.filter((f) => f !== flight) ?? [];
      if (left.length === 0) this.#inFlight.delete(objectKey);
      else this.#inFlight.set(objectKey, left);
    }
  }

  async #get(objectKey: string, range: ByteRange | undefined): Promise<Span> {
    const closing = this.#closing.signal;
    if (this.#running < this.#maxConcurrentGets) this.#running++;
    else await new Promise<void>((start, cancel) => this.#waiting.push({ start, cancel }));
    try {
      this.stats.gets++;
      if (range === undefined) this.stats.wholeObjectGets++;
      if (this.#seen.add(objectKey)) this.stats.objectsRead++;
      // The signal makes a closing reader stop its GETs at the store too (the S3 client drops the connection).
      const began = performance.now();
      let data: Buffer;
      try {
        data = await untilAborted(this.#store.get(objectKey, range, { signal: closing }), closing);
      } catch (error) {
        this.#published(objectKey, range, 0, began, 'error');
        throw error;
      }
      this.#published(objectKey, range, data.length, began, 'ok');
      // The store contract promises exactly `length` bytes; a store that breaks it must not make
      // the caller rebuild a batch from missing bytes.
      if (range !== undefined && data.length !== range.length) {
        throw new ObjectStoreError(
          'WALPROXY_ERR_STORE_OTHER',
          `${this.#store.url} returned ${data.length} bytes for ${range.length} bytes at ${range.offset} of ${JSON.stringify(objectKey)}`,
          { key: objectKey },
        );
      }
      this.stats.bytesFetched += data.length;
      return { objectKey, offset: range?.offset ?? 0, data, whole: range === undefined, usedAt: 0 };
    } finally {
      // Hand the slot straight to the next waiter, so a burst cannot overtake the queue.
      const next = this.#waiting.shift();
      if (next !== undefined) next.start();
      else this.#running--;
    }
  }

  /** Tells the telemetry (if it listens) how one GET went. */
  #published(
    objectKey: string,
    range: ByteRange | undefined,
    bytes: number,
    began: number,
    outcome: WalReaderGetEvent['outcome'],
  ): void {
    if (!readerChannels.get.hasSubscribers) return;
    const event: WalReaderGetEvent = {
      store: this.#store.url,
      objectKey,
      whole: range === undefined,
      bytes,
      durationMs: performance.now() - began,
      outcome,
    };
    readerChannels.get.publish(event);
  }

  /** Caches what a GET brought, merged with the spans it touches; returns what is now cached for it. */
  #remember(fresh: Span): Span {
    if (this.#closing.signal.aborted) return fresh;
    const spans = this.#cached.get(fresh.objectKey) ?? [];
    // Two GETs of the same bytes can both finish: keep the bytes once.
    const holder = spans.find((s) => covers(s, fresh.offset, endOf(fresh)));
    if (holder !== undefined) return holder;
    const touching = fresh.whole
      ? spans
      : spans.filter((s) => s.offset <= endOf(fresh) && fresh.offset <= endOf(s));
    const span = merge([...touching, fresh]);
    if (span.data.length > this.#maxCacheBytes) return span;
    for (const old of touching) this.#forget(old);
    const kept = this.#cached.get(span.objectKey) ?? [];
    kept.push(span);
    this.#cached.set(span.objectKey, kept);
    span.usedAt = this.#now();
    this.#lru.add(span);
    this.budget.used(span, () => this.#forget(span));
    this.stats.cachedBytes += span.data.length;
    this.budget.fit();
    return span;
  }

  #forget(span: Span): void {
    if (!this.#lru.delete(span)) return;
    this.budget.dropped(span);
    this.stats.cachedBytes -= span.data.length;
    const left = this.#cached.get(span.objectKey)?.filter((s) => s !== span) ?? [];
    if (left.length === 0) this.#cached.delete(span.objectKey);
    else this.#cached.set(span.objectKey, left);
  }
}

/** The bytes the non-empty ranges span, or undefined when there are none. */
function boundsOf(
  objectKey: string,
  ranges: readonly ByteRange[],
): { start: number; end: number } | undefined {
  let start = Number.POSITIVE_INFINITY;
  let end = 0;
  for (const { offset, length } of ranges) {
    if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 0) {
      throw new RangeError(`invalid range offset=${offset} length=${length} of ${JSON.stringify(objectKey)}`);
    }
    // An empty range (a batch with no records section) needs no bytes, so it must not widen the span.
    if (length === 0) continue;
    start = Math.min(start, offset);
    end = Math.max(end, offset + length);
  }
  return end === 0 ? undefined : { start, end };
}

function slices(span: Span, ranges: readonly ByteRange[]): Buffer[] {
  return ranges.map(({ offset, length }) => {
    if (length === 0) return EMPTY;
    const at = offset - span.offset;
    if (at + length > span.data.length) {
      // Only a whole object can end before a range: the reference points past its end.
      throw new ObjectStoreError(
        'WALPROXY_ERR_STORE_INVALID_RANGE',
        `${JSON.stringify(span.objectKey)} has ${span.data.length} bytes; asked for ${length} at ${offset}`,
        { key: span.objectKey },
      );
    }
    return span.data.subarray(at, at + length);
  });
}

/** `promise`, or a rejection as soon as `signal` aborts (for a store that ignores the signal). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(closedError());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(closedError());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
