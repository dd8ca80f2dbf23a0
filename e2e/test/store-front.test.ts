import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  isObjectStoreError,
  type ObjectStore,
  type ObjectStoreError,
  openObjectStore,
} from '@walproxy/proxy';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ZoneNetwork, zoneNetworkAvailable } from '../src/net/zone-network.js';
import { startMoto } from '../src/s3/moto.js';
import type { S3Server } from '../src/s3/s3-server.js';
import { type StoreFront, startStoreFront } from '../src/s3/store-front.js';
import { classifyRequest, lognormalOf } from '../src/s3/store-front-process.js';
import { startVersitygw } from '../src/s3/versitygw.js';

const BUCKET = 'walproxy-front';
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

/** S3ObjectStore, the client walproxy uses, on `endpoint`; one attempt unless told, so faults show at once. */
function open(
  endpoint: string,
  options: { maxAttempts?: number; requestTimeoutMs?: number } = {},
): ObjectStore {
  const store = openObjectStore(`s3://${BUCKET}/${randomBytes(4).toString('hex')}`, {
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials,
    maxAttempts: options.maxAttempts ?? 1,
    requestTimeoutMs: options.requestTimeoutMs ?? 10_000,
  });
  onTestFinished(() => store.close());
  return store;
}

/** The same keys as `store`, read straight from the S3 server behind the front. */
function direct(server: S3Server, store: ObjectStore): ObjectStore {
  const reader = openObjectStore(store.url, {
    region: 'us-east-1',
    endpoint: server.endpoint,
    forcePathStyle: true,
    credentials,
  });
  onTestFinished(() => reader.close());
  return reader;
}

async function failure(promise: Promise<unknown>): Promise<ObjectStoreError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isObjectStoreError(err)) throw new Error(`expected an ObjectStoreError, got ${String(err)}`);
  return err;
}

/** Whether `promise` is still pending after `ms`. */
async function pendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = Symbol('settled');
  const first = await Promise.race([
    promise.then(
      () => settled,
      () => settled,
    ),
    new Promise((resolve) => setTimeout(resolve, ms)),
  ]);
  return first !== settled;
}

async function timed<T>(call: () => Promise<T>): Promise<number> {
  const start = performance.now();
  await call();
  return performance.now() - start;
}

describe('the latency model', () => {
  it('fits a lognormal to the published S3 Express figures: median 3 ms, p95 and p99 near 8 and 15', () => {
    // Given the default model; When its quantiles are computed
    const { medianMs, sigma } = lognormalOf('s3-express');
    const quantile = (z: number) => medianMs * Math.exp(sigma * z);
    // Then the median is the published p50 and the tail lands between the published p95 and p99
    expect(medianMs).toBe(3);
    expect(quantile(1.6449)).toBeGreaterThan(8);
    expect(quantile(1.6449)).toBeLessThan(9.5);
    expect(quantile(2.3263)).toBeGreaterThan(13);
    expect(quantile(2.3263)).toBeLessThan(15);
  });

  it('goes through the two quantiles it is given, and is constant when they are equal', () => {
    const { medianMs, sigma } = lognormalOf({ p50Ms: 4, p99Ms: 20 });
    expect(medianMs).toBe(4);
    expect(medianMs * Math.exp(sigma * 2.3263478740408408)).toBeCloseTo(20, 6);
    expect(lognormalOf({ p50Ms: 20, p99Ms: 20 }).sigma).toBe(0);
  });

  it('names operations from path-style requests', () => {
    expect(classifyRequest('GET', '/b/wal/k1?x-id=GetObject')).toBe('get');
    expect(classifyRequest('GET', '/b?list-type=2&prefix=wal%2F')).toBe('list');
    expect(classifyRequest('GET', '/b/')).toBe('list');
    expect(classifyRequest('PUT', '/b/wal/k1')).toBe('put');
    expect(classifyRequest('PUT', '/b')).toBe('other');
    expect(classifyRequest('HEAD', '/b/k')).toBe('head');
    expect(classifyRequest('HEAD', '/b')).toBe('head');
    expect(classifyRequest('POST', '/b?delete')).toBe('delete');
    expect(classifyRequest('POST', '/b?delete=')).toBe('delete');
    expect(classifyRequest('DELETE', '/b/k')).toBe('delete');
    expect(classifyRequest('GET', '/')).toBe('other');
  });
});

describe.each([
  { name: 'moto', start: () => startMoto() },
  { name: 'versitygw', start: () => startVersitygw() },
])('the store front before $name', ({ start }) => {
  let server: S3Server;
  let front: StoreFront;

  beforeAll(async () => {
    server = await start();
    front = await startStoreFront({ upstream: server, latency: 'none' });
    await front.createBucket(BUCKET);
  });

  afterAll(async () => {
    await front?.stop();
    await server?.stop();
  });

  it('passes PUT, GET, ranged GET, If-None-Match refusal, list and delete through byte for byte', async () => {
    // Given a store through the front and a WAL-object-sized body
    const store = open(front.endpoint);
    const body = randomBytes(400 * 1024);

    // When it is put, read whole and in part, put again, listed and deleted
    await store.put('wal/a', [body.subarray(0, 1000), body.subarray(1000)]);
    const whole = await store.get('wal/a');
    const part = await store.get('wal/a', { offset: 123_456, length: 16_384 });
    const again = await failure(store.put('wal/a', randomBytes(400 * 1024)));
    const listed = [];
    for await (const info of store.list('wal/')) listed.push(info);

    // Then the bytes are exact, on the server too, and the refusal is the store's own
    expect(whole.equals(body)).toBe(true);
    expect(part.equals(body.subarray(123_456, 123_456 + 16_384))).toBe(true);
    expect((await direct(server, store).get('wal/a')).equals(body)).toBe(true);
    expect(again.code).toBe('WALPROXY_ERR_STORE_ALREADY_EXISTS');
    expect(listed.map(({ key, size }) => ({ key, size }))).toEqual([{ key: 'wal/a', size: body.length }]);
    await store.delete(['wal/a']);
    expect(await store.head('wal/a')).toBeUndefined();
    // And the front counted what it forwarded
    const counters = (await front.stats()).counters.normal;
    expect(counters.put.requestBytes).toBeGreaterThanOrEqual(2 * body.length);
    expect(counters.get.responseBytes).toBeGreaterThanOrEqual(body.length + 16_384);
  });

  it('answers 503 SlowDown in slowdown mode, which walproxy classifies as retriable throttling', async () => {
    // Given the front throttling every request
    const store = open(front.endpoint);
    await front.setMode('slowdown');
    onTestFinished(() => front.setMode('normal'));
    const before = (await front.stats()).counters.slowdown.put.requests;

    // When a put is tried
    const err = await failure(store.put('throttled', randomBytes(1000)));

    // Then it failed as S3 fails a throttled request, and it never reached the server
    const cause = err.cause as { name?: string; $metadata?: { httpStatusCode?: number } };
    expect(cause.name).toBe('SlowDown');
    expect(cause.$metadata?.httpStatusCode).toBe(503);
    expect(err.code).toBe('WALPROXY_ERR_STORE_OTHER');
    expect(err.retriable).toBe(true);
    expect((await front.stats()).counters.slowdown.put.requests).toBe(before + 1);
    await front.setMode('normal');
    expect(await store.head('throttled')).toBeUndefined();
  });

  it('refuses connections and resets held ones in refuse mode, and serves again on the same port after', async () => {
    // Given a GET held by a freeze
    const store = open(front.endpoint);
    await store.put('k', randomBytes(1000));
    await front.setMode('freeze');
    onTestFinished(() => front.setMode('normal'));
    const held = failure(store.get('k'));
    expect(await pendingAfter(held, 200)).toBe(true);

    // When the front turns to refusing
    await front.setMode('refuse');

    // Then the held request was reset and a new one is refused: the store is unreachable
    const reset = await held;
    expect(reset.code).toBe('WALPROXY_ERR_STORE_UNREACHABLE');
    expect(reset.retriable).toBe(true);
    const refused = await failure(store.get('k'));
    expect(refused.code).toBe('WALPROXY_ERR_STORE_UNREACHABLE');
    expect(refused.message).toMatch(/ECONNREFUSED/);
    expect((await front.stats()).connections.reset).toBeGreaterThan(0);

    // And when it is back to normal the same endpoint answers
    await front.setMode('normal');
    expect((await store.get('k')).length).toBe(1000);
  });

  it('holds requests in freeze mode and completes them when thawed; a client that gives up sees a timeout', async () => {
    // Given a frozen front
    const store = open(front.endpoint);
    const body = randomBytes(300 * 1024);
    await store.put('before', body);
    await front.setMode('freeze');
    onTestFinished(() => front.setMode('normal'));

    // When a put and a get are sent, and a client with a short timeout tries too
    const put = store.put('during', body);
    const get = store.get('before');
    const impatient = failure(open(front.endpoint, { requestTimeoutMs: 300 }).get('before'));

    // Then nothing is answered while frozen, and the impatient client gets a timeout (unreachable)
    expect(await pendingAfter(Promise.race([put, get]), 500)).toBe(true);
    const timeout = await impatient;
    expect(timeout.code).toBe('WALPROXY_ERR_STORE_UNREACHABLE');
    expect(await direct(server, store).head('during')).toBeUndefined();

    // When it thaws, the held requests complete with the right bytes
    await front.setMode('normal');
    await put;
    expect((await get).equals(body)).toBe(true);
    expect((await direct(server, store).get('during')).equals(body)).toBe(true);
    expect((await front.stats()).counters.freeze.put.injectedDelayMs).toBeGreaterThanOrEqual(500);
  });

  it('freezes only the operations named, the others proceed', async () => {
    // Given only GETs frozen
    const store = open(front.endpoint);
    await store.put('one', randomBytes(100));
    await front.setMode('freeze', { operations: ['get'] });
    onTestFinished(() => front.setMode('normal'));

    // When a get is sent, then a put and a head
    const get = store.get('one');
    await store.put('two', randomBytes(100));

    // Then the put and the head were answered while the get waits, until the thaw
    expect(await store.head('two')).toEqual({ size: 100 });
    expect(await pendingAfter(get, 100)).toBe(true);
    await front.setMode('normal');
    expect((await get).length).toBe(100);
  });

  it('delays GETs by at least delayMs in slow-get mode and PUTs not at all; slow-put the other way round', async () => {
    const store = open(front.endpoint);
    await store.put('slow', randomBytes(1000));
    onTestFinished(() => front.setMode('normal'));
    const injected = async () => (await front.stats()).counters;

    // Given slow GETs; When a get and a put are sent
    await front.setMode('slow-get', { delayMs: 300 });
    const putDelayBefore = (await injected()).normal.put.injectedDelayMs;
    const getMs = await timed(() => store.get('slow'));
    await store.put('fast', randomBytes(1000));
    // Then the get took the delay, and the front held the put for nothing (latency is 'none')
    expect(getMs).toBeGreaterThanOrEqual(300);
    expect((await injected()).normal.put.injectedDelayMs - putDelayBefore).toBeLessThan(50);
    expect((await injected())['slow-get'].get.injectedDelayMs).toBeGreaterThanOrEqual(300);

    // Given slow PUTs instead (slow-get lifted first); When a put and a get are sent
    await front.setMode('normal');
    await front.setMode('slow-put', { delayMs: 300 });
    const getDelayBefore = (await injected()).normal.get.injectedDelayMs;
    const putMs = await timed(() => store.put('slower', randomBytes(1000)));
    await store.get('slow');
    // Then only the put took the delay
    expect(putMs).toBeGreaterThanOrEqual(300);
    expect((await injected()).normal.get.injectedDelayMs - getDelayBefore).toBeLessThan(50);
  });

  it('with a fixed 20 ms latency, holds every request at least 20 ms', async () => {
    // Given a second front with a constant first-byte latency of 20 ms
    const slow = await startStoreFront({ upstream: server, latency: { p50Ms: 20, p99Ms: 20 } });
    onTestFinished(() => slow.stop());
    const store = open(slow.endpoint);

    // When each kind of request is sent; Then each took at least the latency
    expect(await timed(() => store.put('lat', randomBytes(50_000)))).toBeGreaterThanOrEqual(20);
    expect(await timed(() => store.get('lat'))).toBeGreaterThanOrEqual(20);
    expect(await timed(() => store.get('lat', { offset: 10, length: 10 }))).toBeGreaterThanOrEqual(20);
    expect(await timed(() => store.head('lat'))).toBeGreaterThanOrEqual(20);
    expect(await timed(() => store.delete(['lat']))).toBeGreaterThanOrEqual(20);
    const stats = await slow.stats();
    expect(stats.counters.normal.put.injectedDelayMs).toBeGreaterThan(0);
  });
});

describe('the store front process', () => {
  let server: S3Server;
  beforeAll(async () => {
    server = await startVersitygw();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('refuses a bad mode on its control API and reports its own CPU', async () => {
    const front = await startStoreFront({ upstream: server });
    onTestFinished(() => front.stop());
    const bad = await fetch(`${front.controlUrl}/mode`, {
      method: 'POST',
      body: JSON.stringify({ mode: 'sideways' }),
    });
    expect(bad.status).toBe(400);
    await expect(front.setMode('slow-get', { operations: ['put'] })).rejects.toThrow(/applies to get only/);
    expect((await front.stats()).modes.get.mode).toBe('normal');
    expect(front.cpuSeconds()).toBeGreaterThan(0);
  });

  it('exits when the process that started it dies, even by SIGKILL', async () => {
    // Given a front started by another process (a stand-in for a test worker)
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const module = pathToFileURL(fileURLToPath(new URL('../src/s3/store-front.ts', import.meta.url))).href;
    const script = `const { startStoreFront } = await import(${JSON.stringify(module)});
      const front = await startStoreFront({ upstream: { endpoint: ${JSON.stringify(server.endpoint)}, pid: 0, createBucket: async () => {}, stop: async () => {} } });
      console.log(front.pid); setInterval(() => {}, 1000);`;
    const parent = spawn(process.execPath, ['--import', tsx, '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const frontPid = await new Promise<number>((resolve, reject) => {
      parent.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
      parent.once('exit', (code) => reject(new Error(`parent exited with ${code}`)));
    });
    expect(existsSync(`/proc/${frontPid}`)).toBe(true);

    // When that process is killed without a chance to stop it
    parent.kill('SIGKILL');

    // Then the front goes too
    const deadline = Date.now() + 5_000;
    while (existsSync(`/proc/${frontPid}`) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(`/proc/${frontPid}`)).toBe(false);
  });

  it.skipIf(!zoneNetworkAvailable())(
    'runs with versitygw inside the object store network namespace, reachable from outside',
    async () => {
      // Given versitygw and a front in a zone network's store namespace, on the store address
      const zones = ZoneNetwork.create(new Map());
      onTestFinished(() => zones.remove());
      const placed = await startVersitygw({ netns: zones.store.netns, host: zones.store.address });
      onTestFinished(() => placed.stop());
      const front = await startStoreFront({
        upstream: placed,
        netns: zones.store.netns,
        host: zones.store.address,
        latency: 'none',
      });
      onTestFinished(() => front.stop());
      await front.createBucket(BUCKET);

      // When the test runner (root namespace) puts and gets through it, and freezes it
      const store = open(front.endpoint);
      const body = randomBytes(100_000);
      await store.put('zoned', body);

      // Then the bytes came through, and the control port answers from outside too
      expect(front.endpoint).toContain(zones.store.address);
      expect((await store.get('zoned')).equals(body)).toBe(true);
      await front.setMode('refuse');
      expect((await failure(store.get('zoned'))).code).toBe('WALPROXY_ERR_STORE_UNREACHABLE');
    },
  );
});
