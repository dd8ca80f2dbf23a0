// The S3 store's contract, one suite run against each real S3 API server: moto (standard and
// directory buckets; it does not check signatures) and versitygw (standard buckets; it checks
// SigV4 signatures, and refuses `--x-s3` bucket names and the `s3express` signing name). Store
// faults that neither server produces on demand (503 SlowDown, 403, hangs) come from a front that
// forwards everything else to the server.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type MotoServer, startMoto } from '../../../e2e/src/s3/moto.js';
import {
  type ObjectInfo,
  type ObjectStore,
  type ObjectStoreOptions,
  openObjectStore,
} from '../../src/store/index.js';
import { type FaultFront, startFaultFront } from './fault-front.js';
import { startVersityGw, VERSITYGW_CREDENTIALS, type VersityGw, versityGwBinary } from './versitygw.js';

/** moto takes any keys; versitygw's root user is test/test. */
const credentials = VERSITYGW_CREDENTIALS;

interface Server {
  endpoint: string;
  createBucket(name: string): Promise<void>;
  stop(): Promise<void>;
}

interface Case {
  kind: string;
  start: () => Promise<Server>;
  bucket: string;
  options: ObjectStoreOptions;
  /**
   * versitygw checks signatures (a wrong secret gets a real 403) and request checksums (a damaged
   * body gets BadDigest); moto checks neither on a plain PUT.
   */
  verifiesRequests: boolean;
}

const versitygw = versityGwBinary();
const startMotoServer = async (): Promise<Server> => {
  const moto: MotoServer = await startMoto();
  return moto;
};
const startVersityGwServer = async (): Promise<Server> => {
  const server: VersityGw = await startVersityGw(versitygw!);
  return server;
};

const CASES: Case[] = [
  {
    kind: 'moto, standard bucket',
    start: startMotoServer,
    bucket: 'walproxy-contract',
    options: { forcePathStyle: true },
    verifiesRequests: false,
  },
  {
    kind: 'moto, directory bucket (session auth off)',
    start: startMotoServer,
    bucket: 'walproxy-contract--use1-az4--x-s3',
    options: { disableS3ExpressSessionAuth: true },
    verifiesRequests: false,
  },
  {
    kind: 'versitygw, standard bucket',
    start: startVersityGwServer,
    bucket: 'walproxy-contract',
    options: { forcePathStyle: true },
    verifiesRequests: true,
  },
];

/** A fresh prefix per test, so tests sharing a bucket never see each other's objects. */
function unique(): string {
  return randomBytes(6).toString('hex');
}

async function collect(items: AsyncIterable<ObjectInfo>): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const item of items) out.push(item);
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

async function freePortEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

for (const c of CASES) {
  const unavailable =
    c.start === startVersityGwServer && versitygw === undefined
      ? ' (skipped: no versitygw binary at .cache/bin/versitygw or $VERSITYGW_BIN; run `make versitygw`)'
      : '';
  describe.skipIf(unavailable !== '')(`S3 store contract on ${c.kind}${unavailable}`, () => {
    let server: Server;
    let front: FaultFront;

    beforeAll(async () => {
      server = await c.start();
      await server.createBucket(c.bucket);
      front = await startFaultFront(server.endpoint);
    }, 300_000);
    afterAll(async () => {
      await front?.stop();
      await server?.stop();
    });

    function open(options: ObjectStoreOptions = {}): ObjectStore {
      const store = openObjectStore(`s3://${c.bucket}/${unique()}`, {
        region: 'us-east-1',
        endpoint: server.endpoint,
        credentials,
        ...c.options,
        ...options,
      });
      onTestFinished(() => store.close());
      return store;
    }

    /** A store whose requests pass the fault front. */
    function openFronted(options: ObjectStoreOptions = {}): ObjectStore {
      return open({ endpoint: front.endpoint, ...options });
    }

    it('stores a body given as several buffers and reads it back whole', async () => {
      // Given a store and a body of several buffers (as a sealed WAL object is), one of them empty
      const store = open();
      const parts = [randomBytes(10), Buffer.alloc(0), randomBytes(300_000), randomBytes(7)];

      // When it is put and read back
      await store.put('wal/0001.obj', parts);
      const whole = await store.get('wal/0001.obj');

      // Then the bytes are the buffers in order
      expect(whole.equals(Buffer.concat(parts))).toBe(true);
    });

    it('reads exactly the requested range, the first and the last byte, and refuses ranges past the end', async () => {
      // Given a stored object of 1,000 bytes
      const store = open();
      const body = randomBytes(1000);
      await store.put('obj', body);

      // When ranges inside it are read, Then exactly those bytes come back
      expect((await store.get('obj', { offset: 100, length: 61 })).equals(body.subarray(100, 161))).toBe(
        true,
      );
      expect((await store.get('obj', { offset: 0, length: 1 })).equals(body.subarray(0, 1))).toBe(true);
      expect((await store.get('obj', { offset: 999, length: 1 })).equals(body.subarray(999))).toBe(true);
      expect((await store.get('obj', { offset: 0, length: 1000 })).equals(body)).toBe(true);
      // When a range runs past the end or starts after it, Then it fails as an invalid range
      for (const range of [
        { offset: 990, length: 20 },
        { offset: 1000, length: 1 },
        { offset: 5000, length: 10 },
      ]) {
        await expect(store.get('obj', range)).rejects.toMatchObject({
          code: 'WALPROXY_ERR_STORE_INVALID_RANGE',
          retriable: false,
        });
      }
    });

    it('reports a missing key as not found, on get (whole and range) and head', async () => {
      // Given an empty prefix
      const store = open();

      // When a missing key is read, Then it fails as not found, not retriable; head says undefined
      await expect(store.get('nope')).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_NOT_FOUND',
        retriable: false,
      });
      await expect(store.get('nope', { offset: 0, length: 10 })).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_NOT_FOUND',
      });
      expect(await store.head('nope')).toBeUndefined();
    });

    it('heads a key to its size', async () => {
      // Given one stored object, When headed, Then its size comes back
      const store = open();
      await store.put('a/b', randomBytes(1234));
      expect(await store.head('a/b')).toEqual({ size: 1234 });
    });

    it('never overwrites a key: the second put fails and the first bytes stay', async () => {
      // Given a stored object
      const store = open();
      const first = randomBytes(100);
      await store.put('k', first);

      // When another body is put under the same key
      const second = store.put('k', [randomBytes(50), randomBytes(50)]);

      // Then it fails as already existing (412) and the object is unchanged
      await expect(second).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_ALREADY_EXISTS',
        retriable: false,
        key: 'k',
      });
      expect((await store.get('k')).equals(first)).toBe(true);
    });

    it('lists keys under a prefix, relative to the store, and only its own', async () => {
      // Given objects in two stores sharing the bucket, one store's prefix inside the other's name
      const prefix = unique();
      const store = openObjectStore(`s3://${c.bucket}/${prefix}`, {
        region: 'us-east-1',
        endpoint: server.endpoint,
        credentials,
        ...c.options,
      });
      const neighbour = openObjectStore(`s3://${c.bucket}/${prefix}-other`, {
        region: 'us-east-1',
        endpoint: server.endpoint,
        credentials,
        ...c.options,
      });
      onTestFinished(() => store.close());
      onTestFinished(() => neighbour.close());
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
      const store = open();
      await store.put('x/1', Buffer.alloc(1));
      await store.put('x/2', Buffer.alloc(1));

      // When one and a missing key are deleted
      await store.delete(['x/1', 'x/never-existed']);

      // Then only the other remains
      expect((await collect(store.list(''))).map((o) => o.key)).toEqual(['x/2']);
    });

    it('validates an existing bucket and leaves nothing behind', async () => {
      const store = open();
      await store.validate();
      expect(await collect(store.list(''))).toEqual([]);
    });

    it.skipIf(!c.verifiesRequests)(
      'has a body damaged on the way refused by its CRC32, and stores nothing (not run where the server checks no checksums: moto)',
      async () => {
        // Given a store whose next put reaches the server with one byte flipped
        const store = openFronted({ maxAttempts: 1 });
        front.queue({ kind: 'corrupt' });

        // When an object is put, Then the server refuses it (BadDigest) and the key stays free
        await expect(store.put('damaged', randomBytes(1000))).rejects.toMatchObject({
          code: 'WALPROXY_ERR_STORE_OTHER',
          message: expect.stringMatching(/BadDigest|checksum/i),
        });
        expect(await store.head('damaged')).toBeUndefined();
      },
    );

    it('calls 403 access denied, not retriable, and tries once', async () => {
      // Given a store whose next request is refused with AccessDenied
      const store = openFronted();
      const before = front.requests;
      front.queue({ kind: 'answer', status: 403, code: 'AccessDenied', message: 'Access Denied' });

      // When an object is put, Then it fails as access denied after one request
      await expect(store.put('k', Buffer.from('x'))).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_ACCESS_DENIED',
        retriable: false,
        message: expect.stringContaining('AccessDenied'),
      });
      expect(front.requests - before).toBe(1);
    });

    it.skipIf(!c.verifiesRequests)(
      'calls a wrong secret key access denied (not run where the server checks no signatures: moto)',
      async () => {
        // Given a store with the right access key and a wrong secret
        const store = open({ credentials: { accessKeyId: 'test', secretAccessKey: 'wrong' } });

        // When a key is put, read and headed, Then each fails as access denied (SignatureDoesNotMatch)
        await expect(store.put('k', Buffer.from('x'))).rejects.toMatchObject({
          code: 'WALPROXY_ERR_STORE_ACCESS_DENIED',
          message: expect.stringContaining('SignatureDoesNotMatch'),
        });
        await expect(store.get('k', { offset: 0, length: 1 })).rejects.toMatchObject({
          code: 'WALPROXY_ERR_STORE_ACCESS_DENIED',
        });
        await expect(store.head('k')).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_ACCESS_DENIED' });
      },
    );

    it('retries 503 SlowDown and succeeds when the store recovers', async () => {
      // Given a store whose next two requests are throttled
      const store = openFronted({ maxAttempts: 3 });
      const body = randomBytes(2000);
      front.queue(
        { kind: 'answer', status: 503, code: 'SlowDown', message: 'Please reduce your request rate.' },
        { kind: 'answer', status: 503, code: 'SlowDown' },
      );
      const before = front.requests;

      // When an object is put, Then the third attempt stores it
      await store.put('slow', body);
      expect(front.requests - before).toBe(3);
      expect((await store.get('slow', { offset: 1, length: 1999 })).equals(body.subarray(1))).toBe(true);
    });

    it('gives up on SlowDown after maxAttempts, as a retriable error naming it', async () => {
      // Given a store that is throttled for good
      const store = openFronted({ maxAttempts: 2 });
      front.always({ kind: 'answer', status: 503, code: 'SlowDown' });
      onTestFinished(() => front.always(undefined));
      const before = front.requests;

      // When a range is read, Then it fails after two attempts, retriable, naming SlowDown
      await expect(store.get('any', { offset: 0, length: 10 })).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_OTHER',
        retriable: true,
        message: expect.stringContaining('SlowDown'),
      });
      expect(front.requests - before).toBe(2);
    });

    it('retries a connection reset and succeeds', async () => {
      // Given a store whose next request has its connection reset
      const store = openFronted();
      await store.put('r', Buffer.from('reset-proof'));
      front.queue({ kind: 'reset' });

      // When the object is read, Then the retry reads it
      expect((await store.get('r', { offset: 0, length: 5 })).toString()).toBe('reset');
    });

    it('calls a refused connection unreachable and retriable, naming the endpoint', async () => {
      // Given an endpoint where nothing listens
      const endpoint = await freePortEndpoint();
      const store = open({ endpoint, maxAttempts: 2 });

      // When a put and a get are tried, Then they fail as unreachable, naming the endpoint
      for (const call of [
        () => store.put('k', Buffer.from('x')),
        () => store.get('k', { offset: 0, length: 1 }),
      ]) {
        await expect(call()).rejects.toMatchObject({
          code: 'WALPROXY_ERR_STORE_UNREACHABLE',
          retriable: true,
          message: expect.stringContaining(endpoint),
        });
      }
    });

    it('times out a request that is never answered, each attempt, as unreachable', async () => {
      // Given a store that never answers, and a short request timeout
      const store = openFronted({ requestTimeoutMs: 200, maxAttempts: 2 });
      front.always({ kind: 'hang' });
      onTestFinished(() => front.always(undefined));
      const before = front.requests;

      // When an object is read, Then both attempts time out and the call fails as unreachable
      await expect(store.get('k', { offset: 0, length: 1 })).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_UNREACHABLE',
        retriable: true,
      });
      expect(front.requests - before).toBe(2);
    });

    it("ends a call at the caller's deadline, long before the request timeout, and drops its connection", async () => {
      // Given a store that never answers and a request timeout far beyond the test's own
      const store = openFronted({ requestTimeoutMs: 600_000 });
      front.queue({ kind: 'hang' });
      const closed = front.hungClosed();

      // When a get is given a 100 ms deadline
      const get = store.get('k', { offset: 0, length: 1 }, { signal: AbortSignal.timeout(100) });

      // Then it fails as aborted by the deadline, and the connection to the store is closed
      const err = await get.catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'WALPROXY_ERR_STORE_ABORTED', retriable: false });
      expect((err as Error).message).toContain('deadline');
      expect(((err as Error).cause as Error).name).toBe('TimeoutError');
      await closed;
    });

    it('ends a call waiting between retries when its signal fires', async () => {
      // Given a store that is throttled for good, with many attempts allowed
      const store = openFronted({ maxAttempts: 1000 });
      front.always({ kind: 'answer', status: 503, code: 'SlowDown' });
      onTestFinished(() => front.always(undefined));
      const controller = new AbortController();
      const before = front.requests;

      // When the caller aborts after the first refusals
      const put = store.put('k', Buffer.from('x'), { signal: controller.signal });
      await front.received(before + 2);
      controller.abort(new Error('shutting down'));

      // Then the put fails as aborted, with the caller's reason
      await expect(put).rejects.toMatchObject({
        code: 'WALPROXY_ERR_STORE_ABORTED',
        message: expect.stringContaining('shutting down'),
      });
    });

    it('aborts every call in flight on close, and refuses calls afterwards', async () => {
      // Given a put and a get in flight against a store that never answers
      const store = openFronted({ requestTimeoutMs: 600_000 });
      front.always({ kind: 'hang' });
      onTestFinished(() => front.always(undefined));
      const before = front.requests;
      const put = store.put('k', randomBytes(100_000));
      const get = store.get('k', { offset: 0, length: 1 });
      const closed = front.hungClosed();
      await front.received(before + 2);

      // When the store is closed
      await store.close();

      // Then both fail as aborted at once, their connections close, and a new call fails the same way
      await expect(put).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_ABORTED' });
      await expect(get).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_ABORTED' });
      await closed;
      await expect(store.head('k')).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_ABORTED' });
    });
  });
}
