import { randomBytes } from 'node:crypto';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  type CreateSessionFront,
  startCreateSessionFront,
} from '../../../e2e/src/s3/create-session-front.js';
import { MOTO_AUTHORIZATION, type MotoServer, startMoto } from '../../../e2e/src/s3/moto.js';
import {
  type ObjectInfo,
  type ObjectStore,
  type ObjectStoreOptions,
  openObjectStore,
} from '../../src/store/index.js';

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
const STANDARD_BUCKET = 'walproxy-standard';
const DIRECTORY_BUCKET = 'walproxy--use1-az4--x-s3';
const SESSION_BUCKET = 'walproxy-session--use1-az4--x-s3';

let moto: MotoServer;
let front: CreateSessionFront;

beforeAll(async () => {
  // The first run installs moto into .cache/venv-moto, which takes a while.
  moto = await startMoto();
  front = await startCreateSessionFront(moto.endpoint);
  for (const bucket of [STANDARD_BUCKET, DIRECTORY_BUCKET, SESSION_BUCKET]) await moto.createBucket(bucket);
}, 300_000);

afterAll(async () => {
  await front?.stop();
  await moto?.stop();
});

function open(url: string, options: ObjectStoreOptions = {}): ObjectStore {
  const store = openObjectStore(url, {
    region: 'us-east-1',
    endpoint: moto.endpoint,
    credentials,
    disableS3ExpressSessionAuth: true,
    ...options,
  });
  onTestFinished(() => store.close());
  return store;
}

async function collect(items: AsyncIterable<ObjectInfo>): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const item of items) out.push(item);
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

/** A fresh prefix per test, so tests sharing a bucket never see each other's objects. */
function unique(): string {
  return randomBytes(6).toString('hex');
}

function rawGetStatus(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${moto.endpoint}${path}`,
      { headers: { authorization: MOTO_AUTHORIZATION } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe.each([
  { kind: 'standard bucket', bucket: STANDARD_BUCKET, options: { forcePathStyle: true } },
  { kind: 'directory bucket, session auth disabled', bucket: DIRECTORY_BUCKET, options: {} },
])('S3ObjectStore on a $kind', ({ bucket, options }) => {
  it('stores a body and reads it back whole', async () => {
    // Given a store and a body given as several buffers (as a sealed WAL object is)
    const store = open(`s3://${bucket}/${unique()}`, options);
    const parts = [randomBytes(10), randomBytes(300_000), randomBytes(7)];

    // When it is put and read back
    await store.put('wal/0001.obj', parts);
    const whole = await store.get('wal/0001.obj');

    // Then the bytes are the buffers in order
    expect(whole.equals(Buffer.concat(parts))).toBe(true);
  });

  it('reads exactly the requested range and refuses one past the end', async () => {
    // Given a stored object of 1,000 bytes
    const store = open(`s3://${bucket}/${unique()}`, options);
    const body = randomBytes(1000);
    await store.put('obj', body);

    // When a range inside it is read, Then those bytes come back
    expect((await store.get('obj', { offset: 100, length: 61 })).equals(body.subarray(100, 161))).toBe(true);
    expect((await store.get('obj', { offset: 999, length: 1 })).equals(body.subarray(999))).toBe(true);
    // When a range runs past the end or starts after it, Then it fails as an invalid range
    await expect(store.get('obj', { offset: 990, length: 20 })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_RANGE',
    });
    await expect(store.get('obj', { offset: 1000, length: 1 })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_RANGE',
    });
  });

  it('heads a key to its size and a missing key to undefined', async () => {
    // Given one stored object
    const store = open(`s3://${bucket}/${unique()}`, options);
    await store.put('a/b', randomBytes(1234));

    // When both are headed, Then the size or undefined comes back
    expect(await store.head('a/b')).toEqual({ size: 1234 });
    expect(await store.head('a/missing')).toBeUndefined();
  });

  it('lists keys under a prefix, relative to the store, and only its own', async () => {
    // Given objects in two stores sharing the bucket, one store's prefix inside the other's name
    const prefix = unique();
    const store = open(`s3://${bucket}/${prefix}`, options);
    const neighbour = open(`s3://${bucket}/${prefix}-other`, options);
    await store.put('2026/01/a', Buffer.alloc(1));
    await store.put('2026/01/b', Buffer.alloc(2));
    await store.put('2026/02/c', Buffer.alloc(3));
    await store.put('2027/d', Buffer.alloc(4));
    await neighbour.put('2026/01/x', Buffer.alloc(5));

    // When listing with a directory prefix, a partial-segment prefix, and none
    const jan = await collect(store.list('2026/01/'));
    const y2026 = await collect(store.list('2026'));
    const all = await collect(store.list(''));

    // Then each holds the matching keys of this store only, with sizes and times
    expect(jan.map((o) => [o.key, o.size])).toEqual([
      ['2026/01/a', 1],
      ['2026/01/b', 2],
    ]);
    expect(y2026.map((o) => o.key)).toEqual(['2026/01/a', '2026/01/b', '2026/02/c']);
    expect(all.map((o) => o.key)).toEqual(['2026/01/a', '2026/01/b', '2026/02/c', '2027/d']);
    expect(all.every((o) => o.lastModified.getTime() > 0)).toBe(true);
  });

  it('deletes keys, and deleting a missing key is no error', async () => {
    // Given two stored objects
    const store = open(`s3://${bucket}/${unique()}`, options);
    await store.put('x/1', Buffer.alloc(1));
    await store.put('x/2', Buffer.alloc(1));

    // When one and a missing key are deleted
    await store.delete(['x/1', 'x/never-existed']);

    // Then only the other remains
    expect((await collect(store.list(''))).map((o) => o.key)).toEqual(['x/2']);
  });

  it('never overwrites a key: the second put fails and the first bytes stay', async () => {
    // Given a stored object
    const store = open(`s3://${bucket}/${unique()}`, options);
    const first = randomBytes(100);
    await store.put('k', first);

    // When another body is put under the same key
    const second = store.put('k', randomBytes(100));

    // Then it fails as already existing (412) and the object is unchanged
    await expect(second).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_ALREADY_EXISTS',
      retriable: false,
      key: 'k',
    });
    expect((await store.get('k')).equals(first)).toBe(true);
  });

  it('reports a missing key as not found', async () => {
    // Given an empty prefix
    const store = open(`s3://${bucket}/${unique()}`, options);

    // When a missing key is read, Then it fails as not found, not retriable
    await expect(store.get('nope')).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_NOT_FOUND',
      retriable: false,
    });
  });

  it('validates an existing bucket', async () => {
    // Given a store on an existing bucket, When validated, Then it passes and leaves nothing behind
    const store = open(`s3://${bucket}/${unique()}`, options);
    await store.validate();
    expect(await collect(store.list(''))).toEqual([]);
  });
});

describe('S3ObjectStore on a directory bucket addressed by IP', () => {
  it('stores the key as given, not with the leading slash of a doubled path', async () => {
    // Given a directory-bucket store on an IP endpoint (path-style `/bucket//key` without the fix)
    const prefix = unique();
    const store = open(`s3://${DIRECTORY_BUCKET}/${prefix}`);

    // When an object is put
    await store.put('a/b', Buffer.from('x'));

    // Then the server holds it under exactly `<prefix>/a/b`
    expect(await rawGetStatus(`/${DIRECTORY_BUCKET}/${prefix}/a/b`)).toBe(200);
  });
});

describe('S3ObjectStore through the CreateSession front', () => {
  it('gets session credentials from CreateSession and signs requests with them', async () => {
    // Given a directory-bucket store with session auth on, talking to the front
    const store = open(`s3://${SESSION_BUCKET}/${unique()}`, {
      endpoint: front.endpoint,
      disableS3ExpressSessionAuth: false,
    });
    const before = front.sessionAuthenticatedRequests;
    const body = randomBytes(5000);

    // When objects are put and read
    await store.put('s/1', body);
    const back = await store.get('s/1', { offset: 10, length: 100 });

    // Then the SDK called CreateSession and used its token on the data requests
    expect(back.equals(body.subarray(10, 110))).toBe(true);
    expect(front.createSessionCalls).toBeGreaterThanOrEqual(1);
    expect(front.sessionAuthenticatedRequests - before).toBeGreaterThanOrEqual(2);
  });
});

describe('S3ObjectStore options', () => {
  it('overwrites when conditional puts are turned off', async () => {
    // Given a store for a server that rejects If-None-Match, so conditional puts are off
    const store = open(`s3://${STANDARD_BUCKET}/${unique()}`, {
      forcePathStyle: true,
      conditionalPut: false,
    });
    await store.put('k', Buffer.from('one'));

    // When the key is put again, Then the second body replaces the first
    await store.put('k', Buffer.from('two'));
    expect((await store.get('k')).toString()).toBe('two');
  });
});

describe('S3ObjectStore.validate', () => {
  it('names a bucket that does not exist', async () => {
    // Given stores on missing buckets, standard and directory
    const standard = open('s3://walproxy-missing/p', { forcePathStyle: true });
    const directory = open('s3://walproxy-missing--use1-az4--x-s3/p');

    // When validated, Then each fails as no such bucket, naming it
    await expect(standard.validate()).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_NO_SUCH_BUCKET',
      message: expect.stringContaining('"walproxy-missing"'),
    });
    await expect(directory.validate()).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_NO_SUCH_BUCKET' });
  });

  it('names an endpoint nothing listens on', async () => {
    // Given a loopback port that was just freed
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const endpoint = `http://127.0.0.1:${port}`;
    const store = open(`s3://${STANDARD_BUCKET}/p`, { endpoint, forcePathStyle: true, maxAttempts: 1 });

    // When validated, Then it fails as unreachable, retriable, naming the endpoint
    await expect(store.validate()).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_UNREACHABLE',
      retriable: true,
      message: expect.stringContaining(endpoint),
    });
  });
});

describe('S3ObjectStore.validate with a server that checks access keys', () => {
  let checking: MotoServer;
  beforeAll(async () => {
    checking = await startMoto({ env: { INITIAL_NO_AUTH_ACTION_COUNT: '0' } });
  }, 300_000);
  afterAll(() => checking?.stop());

  it('names bad credentials as access denied', async () => {
    // Given stores whose access key the server does not know, standard and directory bucket
    const badCredentials = { accessKeyId: 'AKIAWALPROXYUNKNOWN0', secretAccessKey: 'wrong' };
    const standard = open('s3://walproxy-any/p', {
      endpoint: checking.endpoint,
      forcePathStyle: true,
      credentials: badCredentials,
    });
    const directory = open('s3://walproxy-any--use1-az4--x-s3/p', {
      endpoint: checking.endpoint,
      credentials: badCredentials,
    });

    // When validated, Then each fails as access denied, not retriable, pointing at the credentials
    for (const store of [standard, directory]) {
      await expect(store.validate()).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_ACCESS_DENIED',
        retriable: false,
        message: expect.stringContaining('check the credentials'),
      });
    }
  });
});
