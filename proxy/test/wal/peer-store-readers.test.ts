import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { normalizeStoreUrl, PeerStoreReaders } from '../../src/wal/peer-store-readers.js';
import { WalRangeReader } from '../../src/wal/range-reader.js';
import { MemoryObjectStore } from './memory-store.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-peer-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('PeerStoreReaders', () => {
  it('reads the own store, allowed peer stores (opened once), and refuses the rest', async () => {
    // Given a sidecar writing to zone a's store, allowed to read zone b's
    const own = new WalRangeReader({ store: new MemoryObjectStore() });
    const zoneB = tempDir();
    const readers = new PeerStoreReaders(
      'file:///zone-a/wal/',
      own,
      [`file://${zoneB}*`],
      {},
      createLogger('silent'),
    );
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
    const readers = new PeerStoreReaders(
      'memory://own',
      own,
      [`file://${zoneB}`],
      {},
      createLogger('silent'),
    );
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

  it('normalizes trailing slashes only', () => {
    expect(normalizeStoreUrl('s3://b/wal//')).toBe('s3://b/wal');
    expect(normalizeStoreUrl('s3://b')).toBe('s3://b');
  });
});
