// The follower side's store reads (fetch-fill.ts): every object a response's references name is
// read from its store's reader, all at once, until the fill deadline; a store whose reads fail or
// miss it backs off, so the leaders whose references name it are fetched unmarked (stock, all
// inline) for a while.
import { performance } from 'node:perf_hooks';
import type { Logger } from '../log.js';
import type { ByteRange } from '../store/object-store.js';
import type { WalRangeReader } from '../wal/range-reader.js';
import type { FetchFillStats } from './fetch-fill-events.js';
import { messageOf } from './fetch-fill-rebuild.js';

/**
 * After reads of a store fail or miss the deadline, the follower side stops marking the Fetch
 * requests of the leaders whose references name that store, so those leader sides answer stock
 * (inline) for a while: 1 s, doubling per failure to 10 s, back to 0 after a fill from it succeeds.
 */
export const FETCH_FILL_BACKOFF_MIN_MS = 1_000;
export const FETCH_FILL_BACKOFF_MAX_MS = 10_000;

/** The part of WalRangeReader the filter uses (prefetch: readers that read ahead on hints). */
export type FillReader = Pick<WalRangeReader, 'read' | 'peek'> & Partial<Pick<WalRangeReader, 'prefetch'>>;

interface StoreBackoff {
  /** The last window's length: the next one doubles it. */
  ms: number;
  until: number;
}

/** What a read of one object gave: one buffer per range, or why not. */
export type Read =
  | Buffer[]
  | { readonly reason: 'getFailed' | 'deadline' | 'backoff'; readonly detail: string };

export interface ObjectReads {
  readonly store: string;
  readonly objectKey: string;
  readonly ranges: ByteRange[];
}

/** One map key for an object of a store (a newline appears in neither a URL nor a WAL key). */
export function storeAndKey(store: string, objectKey: string): string {
  return `${store}\n${objectKey}`;
}

export interface FillStoreReadsOptions {
  readerFor: (store: string) => FillReader | undefined;
  log: Logger;
  now: () => number;
  fillDeadlineMs: number;
  /** The filter's counters this part keeps. */
  stats: Pick<FetchFillStats, 'deadlineMisses' | 'backoffs'>;
}

/** The reads of one follower side, and the backoff windows they earned per store. */
export class FillStoreReads {
  readonly #readerFor: (store: string) => FillReader | undefined;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #fillDeadlineMs: number;
  readonly #stats: Pick<FetchFillStats, 'deadlineMisses' | 'backoffs'>;
  /** Per store URL: the backoff window its reads earned. */
  readonly #backoff = new Map<string, StoreBackoff>();

  constructor(options: FillStoreReadsOptions) {
    this.#readerFor = options.readerFor;
    this.#log = options.log;
    this.#now = options.now;
    this.#fillDeadlineMs = options.fillDeadlineMs;
    this.#stats = options.stats;
  }

  /**
   * Reads every object, each from its store's reader, until all have answered or the fill
   * deadline (from the response's arrival) has passed. A read still running then goes on in the
   * background — its bytes land in the reader's cache for the next fetch — but its answer, good
   * or bad, no longer counts for this response. A store backing off is not asked: only what its
   * reader has cached is used (those objects are `peeked`: they say nothing of the store).
   */
  async read(
    objects: ReadonlyMap<string, ObjectReads>,
    started: number,
  ): Promise<{ reads: Map<string, Read>; peeked: Set<string> }> {
    const reads = new Map<string, Read>();
    const peeked = new Set<string>();
    let released = false;
    const running: Promise<void>[] = [];
    for (const [where, { store, objectKey, ranges }] of objects) {
      let reader: FillReader | undefined;
      try {
        reader = this.#readerFor(store);
      } catch (error) {
        // A store name the reader factory refuses (malformed URL): not readable, as one not listed.
        reads.set(where, {
          reason: 'getFailed',
          detail: `store ${store} cannot be read: ${messageOf(error)}`,
        });
        continue;
      }
      if (reader === undefined) {
        reads.set(where, {
          reason: 'getFailed',
          detail: `store ${store} is not one this sidecar may read (--wal-read-store-url)`,
        });
        continue;
      }
      const answered = (read: Read) => {
        if (!released) reads.set(where, read);
      };
      const failed = (error: unknown) =>
        answered({ reason: 'getFailed', detail: `GET ${objectKey}: ${messageOf(error)}` });
      if (this.backingOff(store)) {
        peeked.add(where);
        try {
          answered(
            reader.peek(objectKey, ranges) ?? {
              reason: 'backoff',
              detail: `${objectKey} is not cached and reads of ${store} are backing off`,
            },
          );
        } catch (error) {
          failed(error);
        }
        continue;
      }
      running.push(reader.read(objectKey, ranges).then(answered, failed));
    }
    if (running.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const left = this.#fillDeadlineMs - (performance.now() - started);
      await Promise.race([
        Promise.all(running),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, Math.max(0, left));
        }),
      ]);
      clearTimeout(timer);
    }
    released = true;
    for (const [where, { objectKey }] of objects) {
      if (!reads.has(where)) {
        reads.set(where, {
          reason: 'deadline',
          detail: `GET ${objectKey} had not answered ${this.#fillDeadlineMs} ms after the response arrived`,
        });
      }
    }
    return { reads, peeked };
  }

  /**
   * A store that missed the deadline or failed a read backs off (once per response, however many
   * of its objects did); one whose reads all answered is back to a fresh backoff.
   */
  judge(
    objects: ReadonlyMap<string, ObjectReads>,
    reads: ReadonlyMap<string, Read>,
    peeked: ReadonlySet<string>,
  ): void {
    // A store's worst answer in this response decides.
    const rank = { answered: 0, getFailed: 1, deadline: 2 } as const;
    const outcome = new Map<string, keyof typeof rank>();
    for (const [where, { store }] of objects) {
      if (peeked.has(where)) continue;
      const read = reads.get(where)!;
      // Only peeked objects answer 'backoff', and they were skipped.
      const now = Array.isArray(read) ? 'answered' : (read.reason as 'getFailed' | 'deadline');
      const before = outcome.get(store);
      if (before === undefined || rank[now] > rank[before]) outcome.set(store, now);
    }
    let missed = false;
    for (const [store, what] of outcome) {
      if (what === 'deadline' || what === 'getFailed') this.#backOff(store, what);
      else if (what === 'answered') this.#backoff.delete(store);
      missed ||= what === 'deadline';
    }
    if (missed) this.#stats.deadlineMisses++;
  }

  backingOff(store: string): boolean {
    const backoff = this.#backoff.get(store);
    return backoff !== undefined && this.#now() < backoff.until;
  }

  /** Reads of `store` failed or were too slow: its leaders' requests go unmarked for a growing while. */
  #backOff(store: string, why: 'deadline' | 'getFailed'): void {
    const backoff = this.#backoff.get(store) ?? { ms: 0, until: 0 };
    backoff.ms = Math.min(FETCH_FILL_BACKOFF_MAX_MS, Math.max(FETCH_FILL_BACKOFF_MIN_MS, backoff.ms * 2));
    backoff.until = this.#now() + backoff.ms;
    this.#backoff.set(store, backoff);
    this.#stats.backoffs++;
    this.#log.warn(
      { store, inlineForMs: backoff.ms, why },
      why === 'deadline'
        ? 'object store reads missed the fill deadline; fetches from the leaders using this store go inline (stock) for a while'
        : 'object store reads failed; fetches from the leaders using this store go inline (stock) for a while',
    );
  }
}
