import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import type { ByteRange, ObjectStoreCallOptions } from '../../src/store/index.js';
import { WAL_READER_CHANNELS, type WalReaderGetEvent } from '../../src/wal/channels.js';
import { ReadCacheBudget, WAL_RANGE_READER_DEFAULTS, WalRangeReader } from '../../src/wal/range-reader.js';
import { type Gate, gate, MemoryObjectStore, unreachable } from './memory-store.js';

/** Records every GET and lets a test hold or fail it. */
class RecordingStore extends MemoryObjectStore {
  readonly gets: { key: string; range: ByteRange | undefined }[] = [];
  /** The signal each GET got, in call order. */
  readonly signals: (AbortSignal | undefined)[] = [];
  getsRunning = 0;
  maxGetsRunning = 0;
  /** Runs before each GET reads; `call` counts from 1. */
  beforeGet: (key: string, call: number) => Promise<void> = async () => {};

  override async get(key: string, range?: ByteRange, options?: ObjectStoreCallOptions): Promise<Buffer> {
    const call = this.gets.push({ key, range });
    this.signals.push(options?.signal);
    this.getsRunning++;
    this.maxGetsRunning = Math.max(this.maxGetsRunning, this.getsRunning);
    try {
      await this.beforeGet(key, call);
      return await super.get(key, range);
    } finally {
      this.getsRunning--;
    }
  }
}

/** An object whose byte i is i mod 251, so any slice says where it came from. */
function object(size: number): Buffer {
  return Buffer.from(Array.from({ length: size }, (_, i) => i % 251));
}

function storeWith(objects: Record<string, number>): RecordingStore {
  const store = new RecordingStore();
  for (const [key, size] of Object.entries(objects)) store.objects.set(key, object(size));
  return store;
}

/** Lets every callback already queued run, so GETs that can start have started. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

describe('WalRangeReader', () => {
  it('reads an object whole on first touch, so later ranges of it need no GET', async () => {
    // Given an object of 1,000 bytes
    const store = storeWith({ 'wal/a': 1000 });
    const reader = new WalRangeReader({ store });

    // When three ranges of it are read in one call, then ranges outside those in a second call
    // (an object split across successive fetches)
    const ranges = [
      { offset: 500, length: 20 },
      { offset: 100, length: 5 },
      { offset: 40, length: 10 },
    ];
    const got = await reader.read('wal/a', ranges);
    const later = await reader.read('wal/a', [
      { offset: 0, length: 40 },
      { offset: 900, length: 100 },
    ]);

    // Then one GET without a Range read the whole object, and each buffer holds its bytes
    expect(store.gets).toEqual([{ key: 'wal/a', range: undefined }]);
    const whole = store.objects.get('wal/a')!;
    expect(got).toEqual(ranges.map((r) => whole.subarray(r.offset, r.offset + r.length)));
    expect(later).toEqual([whole.subarray(0, 40), whole.subarray(900, 1000)]);
    expect(reader.stats).toMatchObject({
      gets: 1,
      wholeObjectGets: 1,
      objectsRead: 1,
      bytesFetched: 1000,
      cacheMisses: 1,
      cacheHits: 1,
      cachedBytes: 1000,
    });
  });

  it('reads an object the ranges show to be big in ranges: only bytes no cached span holds, merged', async () => {
    // Given objects read whole only up to 300 bytes, and a 1,000-byte object
    const store = storeWith({ 'wal/a': 1000 });
    const reader = new WalRangeReader({ store, wholeObjectMaxBytes: 300 });
    const whole = store.objects.get('wal/a')!;

    // When a span is read, then ranges overlapping it and past it, then ranges next to those,
    // then ranges across all of them
    const first = await reader.read('wal/a', [{ offset: 100, length: 400 }]);
    const overlapping = await reader.read('wal/a', [
      { offset: 150, length: 10 },
      { offset: 450, length: 100 },
    ]);
    const next = await reader.read('wal/a', [{ offset: 550, length: 50 }]);
    const across = await reader.read('wal/a', [
      { offset: 120, length: 30 },
      { offset: 540, length: 40 },
    ]);

    // Then each GET asked only for the bytes not cached yet, the spans merged into one, and the
    // read across them needed no GET
    expect([...first, ...overlapping, ...next, ...across]).toEqual([
      whole.subarray(100, 500),
      whole.subarray(150, 160),
      whole.subarray(450, 550),
      whole.subarray(550, 600),
      whole.subarray(120, 150),
      whole.subarray(540, 580),
    ]);
    expect(store.gets.map((g) => g.range)).toEqual([
      { offset: 100, length: 400 },
      { offset: 500, length: 50 },
      { offset: 550, length: 50 },
    ]);
    expect(reader.stats).toMatchObject({
      gets: 3,
      wholeObjectGets: 0,
      objectsRead: 1,
      cacheHits: 1,
      cachedBytes: 500,
    });
  });

  it('fails a range past the end of a whole object, and serves the others', async () => {
    // Given a 100-byte object read whole
    const store = storeWith({ 'wal/a': 100 });
    const reader = new WalRangeReader({ store });
    await reader.read('wal/a', [{ offset: 0, length: 10 }]);

    // When a range running past its end is read, then one inside it
    const past = reader.read('wal/a', [{ offset: 90, length: 20 }]);

    // Then the first fails as an invalid range, without another GET, and the second is served
    await expect(past).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_INVALID_RANGE' });
    expect(await reader.read('wal/a', [{ offset: 90, length: 10 }])).toEqual([
      store.objects.get('wal/a')!.subarray(90, 100),
    ]);
    expect(store.gets).toHaveLength(1);
  });

  it('peeks at the cache without asking the store', async () => {
    // Given one object cached and one not
    const store = storeWith({ 'wal/a': 100, 'wal/b': 100 });
    const reader = new WalRangeReader({ store });
    await reader.read('wal/a', [{ offset: 0, length: 1 }]);

    // When ranges of both are peeked at
    const a = reader.peek('wal/a', [{ offset: 10, length: 5 }]);
    const b = reader.peek('wal/b', [{ offset: 10, length: 5 }]);

    // Then the cached one answers, the other is undefined, and no GET was sent for it
    expect(a).toEqual([store.objects.get('wal/a')!.subarray(10, 15)]);
    expect(b).toBeUndefined();
    expect(store.gets.map((g) => g.key)).toEqual(['wal/a']);
  });

  it('shares a GET in flight with reads whose ranges it covers', async () => {
    // Given a GET held open
    const store = storeWith({ 'wal/a': 1000 });
    const held = gate();
    store.beforeGet = () => held.promise;
    const reader = new WalRangeReader({ store });
    const first = reader.read('wal/a', [{ offset: 0, length: 600 }]);

    // When the same span and a span inside it are read before it returns
    const same = reader.read('wal/a', [{ offset: 0, length: 600 }]);
    const inside = reader.read('wal/a', [{ offset: 10, length: 20 }]);
    held.open();

    // Then one GET answers all three
    const whole = store.objects.get('wal/a')!;
    expect(await first).toEqual([whole.subarray(0, 600)]);
    expect(await same).toEqual([whole.subarray(0, 600)]);
    expect(await inside).toEqual([whole.subarray(10, 30)]);
    expect(store.gets).toHaveLength(1);
    expect(reader.stats).toMatchObject({ gets: 1, cacheMisses: 3, sharedGets: 2 });
  });

  it('keeps cached bytes under the bound by evicting the least recently used span', async () => {
    // Given a cache of 250 bytes holding spans of A then B (100 bytes each), A used since
    const store = storeWith({ 'wal/a': 100, 'wal/b': 100, 'wal/c': 100 });
    const reader = new WalRangeReader({ store, maxCacheBytes: 250 });
    const all = [{ offset: 0, length: 100 }];
    await reader.read('wal/a', all);
    await reader.read('wal/b', all);
    await reader.read('wal/a', all);

    // When a third span is cached
    await reader.read('wal/c', all);

    // Then B, the least recently used, is gone and A is still there
    expect(reader.stats.cachedBytes).toBe(200);
    await reader.read('wal/a', all);
    await reader.read('wal/b', all);
    expect(store.gets.map((g) => g.key)).toEqual(['wal/a', 'wal/b', 'wal/c', 'wal/b']);
  });

  it('drops spans nobody read for cacheIdleMs, however much room is left, and keeps the ones in use', async () => {
    // Given a roomy cache whose spans expire after 10 s idle, on a clock the test moves
    let now = 0;
    const store = storeWith({ 'wal/a': 100, 'wal/b': 100 });
    const reader = new WalRangeReader({
      store,
      maxCacheBytes: 1_000_000,
      cacheIdleMs: 10_000,
      now: () => now,
    });
    const all = [{ offset: 0, length: 100 }];
    await reader.read('wal/a', all);
    await reader.read('wal/b', all);

    // When A is read again at 6 s, and the next read comes at 12 s
    now = 6_000;
    await reader.read('wal/a', all);
    now = 12_000;
    await reader.read('wal/a', all);

    // Then B (idle since 0) was dropped, A (read at 6 s) was not
    expect(reader.stats).toMatchObject({ cachedBytes: 100, idleEvictions: 1, gets: 2 });
    await reader.read('wal/b', all);
    expect(store.gets.map((g) => g.key)).toEqual(['wal/a', 'wal/b', 'wal/b']);
    reader.close();
  });

  it('drops idle spans with no read to trigger it (a follower that stopped fetching)', async () => {
    // Given spans cached, with an idle time of 200 ms on the real clock
    const store = storeWith({ 'wal/a': 100 });
    const reader = new WalRangeReader({ store, cacheIdleMs: 200 });
    await reader.read('wal/a', [{ offset: 0, length: 100 }]);
    expect(reader.stats.cachedBytes).toBe(100);

    // When nothing reads for longer than that
    const deadline = Date.now() + 5_000;
    while (reader.stats.cachedBytes > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));

    // Then the sweep has dropped them
    expect(reader.stats).toMatchObject({ cachedBytes: 0, idleEvictions: 1 });
    reader.close();
  });

  it('does not cache a span larger than the whole cache', async () => {
    // Given a cache of 50 bytes
    const store = storeWith({ 'wal/a': 100 });
    const reader = new WalRangeReader({ store, maxCacheBytes: 50 });

    // When a 100-byte span is read twice
    await reader.read('wal/a', [{ offset: 0, length: 100 }]);
    await reader.read('wal/a', [{ offset: 0, length: 100 }]);

    // Then both reads go to the store
    expect(store.gets).toHaveLength(2);
    expect(reader.stats.cachedBytes).toBe(0);
  });

  it("rejects with the store's error and does not cache the failure", async () => {
    // Given a store whose first GET fails
    const store = storeWith({ 'wal/a': 100 });
    const failure = unreachable('wal/a');
    store.beforeGet = async (_key, call) => {
      if (call === 1) throw failure;
    };
    const reader = new WalRangeReader({ store });
    const range = [{ offset: 0, length: 100 }];

    // When the same range is read twice
    const first = reader.read('wal/a', range);

    // Then the first read fails with that very error, and the second asks the store again
    await expect(first).rejects.toBe(failure);
    expect(reader.stats.cachedBytes).toBe(0);
    expect(await reader.read('wal/a', range)).toEqual([store.objects.get('wal/a')]);
    expect(store.gets).toHaveLength(2);
  });

  it('rejects a short ranged read instead of returning fewer bytes', async () => {
    // Given an object of 100 bytes (the memory store answers past its end with fewer bytes),
    // read in ranges
    const store = storeWith({ 'wal/a': 100 });
    const reader = new WalRangeReader({ store, wholeObjectMaxBytes: 0 });

    // When a range running past its end is read
    const read = reader.read('wal/a', [{ offset: 50, length: 100 }]);

    // Then the read fails and nothing is cached
    await expect(read).rejects.toThrow(/returned 50 bytes for 100 bytes at 50/);
    expect(reader.stats).toMatchObject({ cachedBytes: 0, bytesFetched: 0 });
  });

  it('runs at most maxConcurrentGets GETs at once, the rest in call order', async () => {
    // Given a limit of 2 and GETs that each wait for their own gate
    const keys = ['wal/1', 'wal/2', 'wal/3', 'wal/4', 'wal/5'];
    const store = storeWith(Object.fromEntries(keys.map((k) => [k, 10])));
    const gates: Gate[] = keys.map(() => gate());
    store.beforeGet = (_key, call) => gates[call - 1]!.promise;
    const reader = new WalRangeReader({ store, maxConcurrentGets: 2 });

    // When five objects are read at once
    const reads = keys.map((k) => reader.read(k, [{ offset: 0, length: 10 }]));
    await settle();

    // Then two GETs start; each one that ends lets the next waiting one start
    expect(store.gets.map((g) => g.key)).toEqual(['wal/1', 'wal/2']);
    gates[0]!.open();
    await reads[0];
    await settle();
    expect(store.gets.map((g) => g.key)).toEqual(['wal/1', 'wal/2', 'wal/3']);
    for (const g of gates) g.open();
    await Promise.all(reads);
    expect(store.gets.map((g) => g.key)).toEqual(keys);
    expect(store.maxGetsRunning).toBe(2);
  });

  it('prefetches a hinted object whole, so the read that follows is a hit on the same GET', async () => {
    // Given an object of 1,000 bytes whose GET waits for a gate
    const store = storeWith({ 'wal/a': 1000 });
    const open = gate();
    store.beforeGet = () => open.promise;
    const reader = new WalRangeReader({ store });

    // When it is prefetched, and read while the prefetch is still running, and read again after
    expect(reader.prefetch('wal/a', 1000)).toBe(true);
    // A second hint of it while its GET runs starts nothing
    expect(reader.prefetch('wal/a', 1000)).toBe(false);
    const during = reader.read('wal/a', [{ offset: 10, length: 20 }]);
    open.open();
    const whole = store.objects.get('wal/a')!;
    expect(await during).toEqual([whole.subarray(10, 30)]);
    expect(await reader.read('wal/a', [{ offset: 900, length: 100 }])).toEqual([whole.subarray(900)]);

    // Then the store saw one whole-object GET; the prefetch itself is neither a hit nor a miss
    expect(store.gets).toEqual([{ key: 'wal/a', range: undefined }]);
    expect(reader.stats).toMatchObject({
      gets: 1,
      prefetches: 1,
      cacheMisses: 1,
      sharedGets: 1,
      cacheHits: 1,
    });
    // And a cached object is not prefetched again
    expect(reader.prefetch('wal/a', 1000)).toBe(false);
  });

  it('does not prefetch an object too large to read whole, nor when every GET slot is taken', async () => {
    const store = storeWith({ 'wal/big': 100, 'wal/1': 10, 'wal/2': 10 });
    const open = gate();
    store.beforeGet = () => open.promise;
    const reader = new WalRangeReader({ store, maxConcurrentGets: 1, wholeObjectMaxBytes: 50 });
    expect(reader.prefetch('wal/big', 100)).toBe(false);
    expect(reader.prefetch('wal/1', 0)).toBe(false);
    // One read holds the only slot: a prefetch would queue ahead of reads someone waits for
    const read = reader.read('wal/1', [{ offset: 0, length: 10 }]);
    await settle();
    expect(reader.prefetch('wal/2', 10)).toBe(false);
    open.open();
    await read;
    expect(store.gets.map((g) => g.key)).toEqual(['wal/1']);
    expect(reader.stats.prefetches).toBe(0);
  });

  it('counts a failed prefetch and caches nothing: the read asks the store again', async () => {
    const store = storeWith({ 'wal/a': 100 });
    store.beforeGet = async (_key, call) => {
      if (call === 1) throw unreachable('wal/a');
    };
    const reader = new WalRangeReader({ store });
    expect(reader.prefetch('wal/a', 100)).toBe(true);
    await settle();
    expect(reader.stats).toMatchObject({ prefetches: 1, prefetchesFailed: 1, cachedBytes: 0 });
    expect(await reader.read('wal/a', [{ offset: 0, length: 100 }])).toEqual([store.objects.get('wal/a')]);
    expect(store.gets).toHaveLength(2);
  });

  it('answers empty ranges without a GET', async () => {
    // Given an object read in ranges
    const store = storeWith({ 'wal/a': 100 });
    const reader = new WalRangeReader({ store, wholeObjectMaxBytes: 0 });

    // When no range, or only empty ranges, are read, then an empty range among others
    const none = await reader.read('wal/a', []);
    const empties = await reader.read('wal/a', [{ offset: 90, length: 0 }]);
    const mixed = await reader.read('wal/a', [
      { offset: 10, length: 5 },
      { offset: 99, length: 0 },
    ]);

    // Then empty ranges get empty buffers and do not widen the one GET
    expect(none).toEqual([]);
    expect(empties).toEqual([Buffer.alloc(0)]);
    expect(mixed).toEqual([store.objects.get('wal/a')!.subarray(10, 15), Buffer.alloc(0)]);
    expect(store.gets.map((g) => g.range)).toEqual([{ offset: 10, length: 5 }]);
  });

  it('refuses options and ranges that cannot work', async () => {
    // Given a store
    const store = storeWith({ 'wal/a': 100 });

    // When the reader gets impossible limits or a negative range
    // Then it says so
    expect(() => new WalRangeReader({ store, maxConcurrentGets: 0 })).toThrow(RangeError);
    expect(() => new WalRangeReader({ store, maxCacheBytes: -1 })).toThrow(RangeError);
    expect(() => new WalRangeReader({ store, cacheIdleMs: 0 })).toThrow(RangeError);
    expect(() => new WalRangeReader({ store, cacheIdleMs: Number.NaN })).toThrow(RangeError);
    expect(() => new WalRangeReader({ store, wholeObjectMaxBytes: 1.5 })).toThrow(RangeError);
    await expect(new WalRangeReader({ store }).read('wal/a', [{ offset: -1, length: 5 }])).rejects.toThrow(
      RangeError,
    );
  });

  it('closes at once: reads waiting on a GET, running or queued, reject, and the GET is aborted', async () => {
    // Given one GET at a time, a GET that never answers, and a read queued behind it
    const store = storeWith({ 'wal/a': 10, 'wal/b': 10 });
    store.beforeGet = () => new Promise(() => {});
    const reader = new WalRangeReader({ store, maxConcurrentGets: 1 });
    const all = [{ offset: 0, length: 10 }];
    const running = reader.read('wal/a', all);
    const joined = reader.read('wal/a', all);
    const queued = reader.read('wal/b', all);
    await settle();

    // When the reader closes
    reader.close();

    // Then every read rejects without waiting for the store, the store's GET got an aborted
    // signal, and later reads reject too
    await expect(running).rejects.toThrow(/closed/);
    await expect(joined).rejects.toThrow(/closed/);
    await expect(queued).rejects.toThrow(/closed/);
    expect(store.gets.map((g) => g.key)).toEqual(['wal/a']);
    expect(store.signals[0]?.aborted).toBe(true);
    await expect(reader.read('wal/b', all)).rejects.toThrow(/closed/);
  });

  it('adds to the counters of the budget it is given, so readers of several stores count as one', async () => {
    // Given two readers of two stores sharing one cache budget
    const budget = new ReadCacheBudget(WAL_RANGE_READER_DEFAULTS.maxCacheBytes);
    const shared = budget.stats;
    const a = new WalRangeReader({ store: storeWith({ 'wal/a': 100 }), budget });
    const b = new WalRangeReader({ store: storeWith({ 'wal/b': 50 }), budget });

    // When each reads its object
    await a.read('wal/a', [{ offset: 0, length: 10 }]);
    await b.read('wal/b', [{ offset: 0, length: 10 }]);

    // Then the counters hold both, and closing one takes only its bytes out of the cache size
    expect(shared).toMatchObject({ gets: 2, objectsRead: 2, bytesFetched: 150, cachedBytes: 150 });
    a.close();
    expect(shared.cachedBytes).toBe(50);
  });
});

describe('a cache budget shared by several readers', () => {
  it('lets a peer reader cache while the own reader fills the bound: the least recently used span goes, whoever holds it', async () => {
    // Given the own store's reader and a peer store's reader sharing one 1000-byte bound, the
    // own reader holding 900 bytes
    const ownStore = storeWith({ 'wal/own-1': 500, 'wal/own-2': 400 });
    const peerStore = storeWith({ 'wal/peer': 300 });
    const own = new WalRangeReader({ store: ownStore, maxCacheBytes: 1000 });
    const peer = new WalRangeReader({ store: peerStore, budget: own.budget });
    await own.read('wal/own-1', [{ offset: 0, length: 10 }]);
    await own.read('wal/own-2', [{ offset: 0, length: 10 }]);
    expect(own.stats.cachedBytes).toBe(900);

    // When the peer reader reads an object twice
    await peer.read('wal/peer', [{ offset: 0, length: 10 }]);
    await peer.read('wal/peer', [{ offset: 100, length: 10 }]);

    // Then it got it once from its store and then from its cache, the own reader's least
    // recently used object having made room, and the bound held
    expect(peerStore.gets).toHaveLength(1);
    expect(own.stats.cachedBytes).toBe(700);
    await own.read('wal/own-2', [{ offset: 0, length: 10 }]);
    expect(ownStore.gets.map((g) => g.key)).toEqual(['wal/own-1', 'wal/own-2']);
    await own.read('wal/own-1', [{ offset: 0, length: 10 }]);
    expect(ownStore.gets.map((g) => g.key)).toEqual(['wal/own-1', 'wal/own-2', 'wal/own-1']);
    expect(own.stats.cachedBytes).toBeLessThanOrEqual(1000);
  });

  it('evicts the peer reader too, when its span is the least recently used', async () => {
    // Given a peer reader's span read before the own reader's
    const budget = new ReadCacheBudget(1000);
    const ownStore = storeWith({ 'wal/own': 800 });
    const peerStore = storeWith({ 'wal/peer': 300 });
    const own = new WalRangeReader({ store: ownStore, budget });
    const peer = new WalRangeReader({ store: peerStore, budget });
    await peer.read('wal/peer', [{ offset: 0, length: 10 }]);

    // When the own reader caches past the bound
    await own.read('wal/own', [{ offset: 0, length: 10 }]);

    // Then the peer's span went, the own one stayed
    expect(budget.stats.cachedBytes).toBe(800);
    await own.read('wal/own', [{ offset: 0, length: 10 }]);
    await peer.read('wal/peer', [{ offset: 0, length: 10 }]);
    expect(ownStore.gets).toHaveLength(1);
    expect(peerStore.gets).toHaveLength(2);
  });
});

describe('WalRangeReader GET events', () => {
  it('publishes one event per GET, with its bytes and outcome, for the GET-duration histogram', async () => {
    // Given a store with one object, whose second GET (of another key) fails
    const store = storeWith({ 'wal/a': 1000 });
    store.beforeGet = async (key) => {
      if (key === 'wal/missing') throw unreachable(key);
    };
    const events: WalReaderGetEvent[] = [];
    const listen = (message: unknown) => events.push(message as WalReaderGetEvent);
    subscribe(WAL_READER_CHANNELS.get, listen);
    try {
      // When the reader reads a range of the object, then a range of an object it cannot get
      const reader = new WalRangeReader({ store });
      await reader.read('wal/a', [{ offset: 10, length: 20 }]);
      await expect(reader.read('wal/missing', [{ offset: 0, length: 10 }])).rejects.toThrow(/cannot reach/);
    } finally {
      unsubscribe(WAL_READER_CHANNELS.get, listen);
    }

    // Then one event said the whole object came back, one that the other GET failed
    expect(events).toEqual([
      expect.objectContaining({ objectKey: 'wal/a', whole: true, bytes: 1000, outcome: 'ok' }),
      expect.objectContaining({ objectKey: 'wal/missing', bytes: 0, outcome: 'error' }),
    ]);
    for (const e of events) expect(e.durationMs).toBeGreaterThanOrEqual(0);
  });
});
