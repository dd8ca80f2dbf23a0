import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  FileObjectStore,
  type ObjectInfo,
  type ObjectStore,
  type ObjectStoreOptions,
  openObjectStore,
} from '../../src/store/index.js';

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'walproxy-file-store-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function openTemp(options: ObjectStoreOptions = {}): Promise<{ store: ObjectStore; dir: string }> {
  const dir = await tempDir();
  const store = openObjectStore(pathToFileURL(dir).href, options);
  onTestFinished(() => store.close());
  return { store, dir };
}

async function collect(items: AsyncIterable<ObjectInfo>): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const item of items) out.push(item);
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

/** Every file under dir, relative, including hidden ones: what a crash would leave behind. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

describe('FileObjectStore', () => {
  it('is what a file URL opens', async () => {
    // Given a directory, When its file URL is opened, Then a file store comes back
    const { store } = await openTemp();
    expect(store).toBeInstanceOf(FileObjectStore);
  });

  it('writes keys with slashes as files in subdirectories and reads them back', async () => {
    // Given a store
    const { store, dir } = await openTemp();
    const parts = [randomBytes(28), randomBytes(70_000), Buffer.alloc(0), randomBytes(50)];

    // When a multi-buffer body is put under a nested key
    await store.put('wal/2026/01/obj-1', parts);

    // Then it is one file at that path holding the buffers in order, and nothing else is left
    expect((await store.get('wal/2026/01/obj-1')).equals(Buffer.concat(parts))).toBe(true);
    expect(await filesUnder(dir)).toEqual(['wal/2026/01/obj-1']);
  });

  it('fsyncs when asked and still stores the object', async () => {
    // Given a store that fsyncs
    const { store } = await openTemp({ fsync: true });

    // When an object is put, Then it reads back
    await store.put('a/b', Buffer.from('durable'));
    expect((await store.get('a/b')).toString()).toBe('durable');
  });

  it('reads exact ranges and refuses ranges past the end', async () => {
    // Given a 1,000-byte object
    const { store } = await openTemp();
    const body = randomBytes(1000);
    await store.put('obj', body);

    // When ranges are read, Then inside ones match and outside ones fail as invalid ranges
    expect((await store.get('obj', { offset: 61, length: 939 })).equals(body.subarray(61))).toBe(true);
    await expect(store.get('obj', { offset: 990, length: 11 })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_RANGE',
    });
    await expect(store.get('obj', { offset: 0, length: 0 })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_RANGE',
    });
    await expect(store.get('obj', { offset: -1, length: 1 })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_RANGE',
    });
  });

  it('never overwrites: of concurrent puts of one key exactly one wins, whole', async () => {
    // Given ten different bodies for the same key
    const { store, dir } = await openTemp();
    const bodies = Array.from({ length: 10 }, () => randomBytes(200_000));

    // When they are put at once
    const results = await Promise.allSettled(bodies.map((body) => store.put('race/k', body)));

    // Then one succeeded, the others failed as already existing, and the file is the winner's bytes
    const winners = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
    expect(winners).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected')
        expect(r.reason).toMatchObject({ code: 'WALPROXY_ERR_STORE_ALREADY_EXISTS', key: 'race/k' });
    }
    expect((await store.get('race/k')).equals(bodies[winners[0]!]!)).toBe(true);
    expect(await filesUnder(dir)).toEqual(['race/k']);
  });

  it('heads, lists by prefix and skips in-progress temporary files', async () => {
    // Given objects in nested directories and a leftover temporary file from a crashed put
    const { store, dir } = await openTemp();
    await store.put('2026/01/a', Buffer.alloc(1));
    await store.put('2026/01/b', Buffer.alloc(2));
    await store.put('2026/02/c', Buffer.alloc(3));
    await store.put('2027/d', Buffer.alloc(4));
    await writeFile(join(dir, '2026', '01', '.walproxy-tmp-deadbeef'), 'partial');

    // When headed and listed
    const head = await store.head('2026/01/b');
    const missing = await store.head('2026/01');
    const jan = await collect(store.list('2026/01/'));
    const y2026 = await collect(store.list('2026'));
    const none = await collect(store.list('2028/'));
    const all = await collect(store.list(''));

    // Then sizes and matching keys come back, never the temporary file nor directories
    expect(head).toEqual({ size: 2 });
    expect(missing).toBeUndefined();
    expect(jan.map((o) => [o.key, o.size])).toEqual([
      ['2026/01/a', 1],
      ['2026/01/b', 2],
    ]);
    expect(y2026.map((o) => o.key)).toEqual(['2026/01/a', '2026/01/b', '2026/02/c']);
    expect(none).toEqual([]);
    expect(all.map((o) => o.key)).toEqual(['2026/01/a', '2026/01/b', '2026/02/c', '2027/d']);
    expect(all[0]!.lastModified).toBeInstanceOf(Date);
  });

  it('deletes keys and the directories they leave empty, but not the root', async () => {
    // Given objects in two directories
    const { store, dir } = await openTemp();
    await store.put('old/x/1', Buffer.alloc(1));
    await store.put('new/y/2', Buffer.alloc(1));

    // When one is deleted together with a key that never existed
    await store.delete(['old/x/1', 'old/x/never']);

    // Then its emptied directories are gone too; deleting the last object keeps the root
    await expect(stat(join(dir, 'old'))).rejects.toMatchObject({ code: 'ENOENT' });
    await store.delete(['new/y/2']);
    expect(await readdir(dir)).toEqual([]);
    // And a put into a directory removed that way recreates it
    await store.put('old/x/3', Buffer.from('again'));
    expect((await store.get('old/x/3')).toString()).toBe('again');
  });

  it('reports a missing key as not found', async () => {
    // Given an empty store, When a missing key is read, Then it fails as not found
    const { store } = await openTemp();
    await expect(store.get('no/such')).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_NOT_FOUND',
      key: 'no/such',
    });
  });

  it('refuses keys that would escape or alias on a filesystem, and reserved names', async () => {
    // Given a store
    const { store } = await openTemp();

    // When keys with traversal, empty segments or the temporary-file prefix are used
    // Then each fails before any I/O as an invalid argument
    for (const key of ['../escape', 'a/../../b', '/abs', 'a//b', 'a/', 'a/./b', 'x/.walproxy-tmp-1']) {
      await expect(store.put(key, Buffer.alloc(1)), key).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
      });
    }
    await expect(collect(store.list('../'))).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
    });
  });

  it('validates a writable directory and leaves nothing behind', async () => {
    // Given an empty store, When validated, Then it passes and the directory is still empty
    const { store, dir } = await openTemp();
    await store.validate();
    expect(await readdir(dir)).toEqual([]);
  });

  it('fails validation and puts for a missing directory, without creating it', async () => {
    // Given a store whose directory does not exist
    const parent = await tempDir();
    const root = join(parent, 'missing');
    const store = openObjectStore(pathToFileURL(root).href);

    // When validated, written to or listed, Then each fails as no such bucket and no directory appears
    await expect(store.validate()).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_NO_SUCH_BUCKET',
      message: expect.stringContaining(root),
    });
    await expect(store.put('a/b', Buffer.alloc(1))).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_NO_SUCH_BUCKET',
    });
    await expect(collect(store.list(''))).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_NO_SUCH_BUCKET',
    });
    expect(await readdir(parent)).toEqual([]);
  });

  it('fails validation when the path is a file', async () => {
    // Given a store URL naming a regular file
    const dir = await tempDir();
    const file = join(dir, 'plain-file');
    await writeFile(file, 'x');
    const store = openObjectStore(pathToFileURL(file).href);

    // When validated, Then it fails as an invalid argument saying so
    await expect(store.validate()).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
      message: expect.stringContaining('not a directory'),
    });
  });

  it("honours a call's signal: an aborted put publishes nothing, an aborted get reads nothing", async () => {
    // Given a store with one object, and a signal that has fired
    const { store, dir } = await openTemp();
    await store.put('kept', Buffer.from('bytes'));
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    const { signal } = controller;

    // When a put, a get and a head are called with it
    // Then each fails as aborted with the reason, and no new file (not even a temporary one) exists
    await expect(store.put('new', [Buffer.from('a'), Buffer.from('b')], { signal })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_ABORTED',
      message: expect.stringContaining('shutting down'),
    });
    await expect(store.get('kept', undefined, { signal })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_ABORTED',
    });
    await expect(store.head('kept', { signal })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_ABORTED',
    });
    expect(await filesUnder(dir)).toEqual(['kept']);
  });

  it('refuses data calls once closed', async () => {
    // Given a closed store
    const { store } = await openTemp();
    await store.put('k', Buffer.from('x'));
    await store.close();

    // When it is used, Then the calls fail as aborted
    await expect(store.get('k')).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_ABORTED' });
    await expect(store.put('k2', Buffer.from('x'))).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_ABORTED',
    });
  });
});
