import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import type { ObjectStore } from '../../src/store/index.js';
import {
  normalizeStoreUrl,
  PEER_STORE_DEFAULTS,
  PeerStoreReaders,
  type PeerStoreReadersOptions,
} from '../../src/wal/peer-store-readers.js';
import { WalRangeReader } from '../../src/wal/range-reader.js';
import { gate, MemoryObjectStore } from './memory-store.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-peer-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function peerReaders(
  options: Omit<PeerStoreReadersOptions, 'storeOptions' | 'log'> & Partial<PeerStoreReadersOptions>,
): PeerStoreReaders {
  const readers = new PeerStoreReaders({ storeOptions: {}, log: createLogger('silent'), ...options });
  cleanups.push(() => readers.close());
  return readers;
}

/** Opens memory stores in place of the real ones, and says which are open. */
function storeOpener() {
  const opened: string[] = [];
  const open = new Set<string>();
  const openStore = (url: string): ObjectStore => {
    if (url.includes('%%')) throw new TypeError(`${url} is not a store URL`);
    opened.push(url);
    open.add(url);
    const store = new MemoryObjectStore();
    store.objects.set('wal/o', Buffer.alloc(10, 7));
    const close = store.close.bind(store);
    store.close = async () => {
      open.delete(url);
      await close();
    };
    return store;
  };
  return { opened, open, openStore };
}

describe('PeerStoreReaders', () => {
  it('reads the own store, allowed peer stores (opened once), and refuses the rest', async () => {
    // Given a sidecar writing to zone a's store, allowed to read zone b's
    const own = new WalRangeReader({ store: new MemoryObjectStore() });
    const zoneB = tempDir();
    const readers = peerReaders({
      ownStoreUrl: 'file:///zone-a/wal/',
      ownReader: own,
      readStoreUrls: [`file://${zoneB}*`],
    });
    cleanups.push(() => readers.close());
    // Then references naming its own store (in any spelling) use its own reader
    expect(readers.readerFor('file:///zone-a/wal')).toBe(own);
    // And a peer store matching --wal-read-store-url is opened on first use, then reused
    const peer = readers.readerFor(`file://${zoneB}`);
    expect(peer).toBeInstanceOf(WalRangeReader);
    expect(readers.readerFor(`file://${zoneB}/`)).toBe(peer);
    // And anything else is refused (the partition then falls back to inline bytes)
    expect(readers.readerFor('s3://someone-elses-bucket/wal')).toBeUndefined();
  });

  it("counts every store it reads in the own reader's stats, and close() stops every reader", async () => {
    // Given a sidecar whose own store and an allowed peer store each hold an object
    const ownStore = new MemoryObjectStore();
    ownStore.objects.set('wal/own', Buffer.alloc(100, 1));
    const own = new WalRangeReader({ store: ownStore });
    const zoneB = tempDir();
    writeFileSync(path.join(zoneB, 'peer'), Buffer.alloc(40, 2));
    const readers = peerReaders({
      ownStoreUrl: 'memory://own',
      ownReader: own,
      readStoreUrls: [`file://${zoneB}`],
    });
    cleanups.push(() => readers.close());

    // When each is read
    await readers.readerFor('memory://own')!.read('wal/own', [{ offset: 0, length: 10 }]);
    const peer = readers.readerFor(`file://${zoneB}`)!;
    await peer.read('peer', [{ offset: 0, length: 10 }]);

    // Then the own reader's stats hold both reads
    expect(own.stats).toMatchObject({ gets: 2, objectsRead: 2, bytesFetched: 140 });
    // And after close() neither reader reads any more
    await readers.close();
    await expect(own.read('wal/own', [{ offset: 0, length: 1 }])).rejects.toThrow(/closed/);
    await expect(peer.read('peer', [{ offset: 0, length: 1 }])).rejects.toThrow(/closed/);
  });

  it('opens at most --wal-read-store-max-open stores for 300 distinct names a glob matches, counting the rest', () => {
    // Given a sidecar whose --wal-read-store-url is a glob, and an exact URL beside it
    const stores = storeOpener();
    const readers = peerReaders({
      ownStoreUrl: 's3://zone-a/wal',
      ownReader: new WalRangeReader({ store: new MemoryObjectStore() }),
      readStoreUrls: ['s3://walproxy-zone-*/wal', 's3://walproxy-exact/wal'],
      openStore: stores.openStore,
    });

    // When references name 300 distinct stores the glob matches
    const got = Array.from({ length: 300 }, (_, i) => readers.readerFor(`s3://walproxy-zone-${i}/wal`));

    // Then only the cap's worth of stores opened, each with one reader, and the rest were refused and counted
    const cap = PEER_STORE_DEFAULTS.maxGlobStores;
    expect(stores.opened).toHaveLength(cap);
    expect(got.filter((r) => r !== undefined)).toHaveLength(cap);
    expect(new Set(got.filter((r) => r !== undefined)).size).toBe(cap);
    expect(readers.stats).toMatchObject({ open: cap, opened: cap, refusedOverCap: 300 - cap });
    // And a store opened before is still served, by the same reader
    expect(readers.readerFor('s3://walproxy-zone-0/wal/')).toBe(got[0]);
    // And an exact URL is always allowed, the cap notwithstanding
    expect(readers.readerFor('s3://walproxy-exact/wal')).toBeInstanceOf(WalRangeReader);
    expect(readers.stats.open).toBe(cap + 1);
  });

  it('never throws on a store name: a malformed one is refused and counted', () => {
    // Given a glob that lets in names no store opens
    const stores = storeOpener();
    const readers = peerReaders({
      ownStoreUrl: 's3://zone-a/wal',
      ownReader: new WalRangeReader({ store: new MemoryObjectStore() }),
      readStoreUrls: ['s3://walproxy-*'],
      openStore: stores.openStore,
    });

    // When references name a store its opener refuses, and an absurdly long one
    const bad = readers.readerFor('s3://walproxy-%%/wal');
    const long = readers.readerFor(`s3://walproxy-${'x'.repeat(5000)}`);

    // Then neither throws nor opens anything, and both are counted
    expect(bad).toBeUndefined();
    expect(long).toBeUndefined();
    expect(readers.stats).toMatchObject({ refusedMalformed: 2, open: 0 });
    expect(stores.open.size).toBe(0);
  });

  it('closes a peer store nobody read for the idle time, then opens it once again on later use', async () => {
    // Given peer stores allowed by a glob, on a clock the test moves
    let now = 0;
    const stores = storeOpener();
    const own = new WalRangeReader({ store: new MemoryObjectStore() });
    const readers = peerReaders({
      ownStoreUrl: 's3://zone-a/wal',
      ownReader: own,
      readStoreUrls: ['s3://walproxy-zone-*/wal'],
      maxGlobStores: 2,
      idleMs: 60_000,
      now: () => now,
      openStore: stores.openStore,
    });
    const b = readers.readerFor('s3://walproxy-zone-b/wal')!;
    await b.read('wal/o', [{ offset: 0, length: 10 }]);
    readers.readerFor('s3://walproxy-zone-c/wal');
    // And a third glob store refused while both are open
    expect(readers.readerFor('s3://walproxy-zone-d/wal')).toBeUndefined();

    // When zone-b is read again before the idle time, and nothing reads zone-c
    now = 59_000;
    expect(readers.readerFor('s3://walproxy-zone-b/wal')).toBe(b);
    now = 61_000;

    // Then the next lookup finds zone-c closed (its slot free for zone-d) and zone-b still open
    const d = readers.readerFor('s3://walproxy-zone-d/wal');
    expect(d).toBeInstanceOf(WalRangeReader);
    expect([...stores.open].sort()).toEqual(['s3://walproxy-zone-b/wal', 's3://walproxy-zone-d/wal']);
    expect(readers.stats).toMatchObject({ closedIdle: 1, open: 2 });

    // When everything idles past the time
    now = 200_000;
    readers.readerFor('s3://walproxy-zone-z/wal');
    // Then zone-b's reader is closed with its store, and its cached bytes left the shared bound
    await expect(b.read('wal/o', [{ offset: 0, length: 1 }])).rejects.toThrow(/closed/);
    expect(stores.open.has('s3://walproxy-zone-b/wal')).toBe(false);
    expect(own.stats.cachedBytes).toBe(0);

    // And a later reference to zone-b opens it once more: one new store, one new reader
    const opensBefore = stores.opened.length;
    const again = readers.readerFor('s3://walproxy-zone-b/wal')!;
    expect(again).not.toBe(b);
    expect(readers.readerFor('s3://walproxy-zone-b/wal')).toBe(again);
    expect(stores.opened.length).toBe(opensBefore + 1);
    expect(await again.read('wal/o', [{ offset: 0, length: 2 }])).toEqual([Buffer.alloc(2, 7)]);
  });

  it('keeps a store open past the idle time while a read waits on it', async () => {
    // Given a peer store whose GET does not answer yet
    let now = 0;
    const held = gate();
    const stores = storeOpener();
    const readers = peerReaders({
      ownStoreUrl: 's3://zone-a/wal',
      ownReader: new WalRangeReader({ store: new MemoryObjectStore() }),
      readStoreUrls: ['s3://walproxy-zone-*/wal'],
      idleMs: 1_000,
      now: () => now,
      openStore: (url, options) => {
        const store = stores.openStore(url, options);
        const get = store.get.bind(store);
        store.get = async (...args) => {
          await held.promise;
          return get(...args);
        };
        return store;
      },
    });
    const b = readers.readerFor('s3://walproxy-zone-b/wal')!;
    const reading = b.read('wal/o', [{ offset: 0, length: 10 }]);

    // When the idle time passes during the read
    now = 5_000;
    readers.readerFor('s3://walproxy-zone-c/wal');

    // Then the store stays open and the read completes
    expect(stores.open.has('s3://walproxy-zone-b/wal')).toBe(true);
    held.open();
    expect(await reading).toEqual([Buffer.alloc(10, 7)]);
  });

  it('normalizes trailing slashes only', () => {
    expect(normalizeStoreUrl('s3://b/wal//')).toBe('s3://b/wal');
    expect(normalizeStoreUrl('s3://b')).toBe('s3://b');
  });
});
