import { randomBytes } from 'node:crypto';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import {
  type CreateSessionFront,
  startCreateSessionFront,
} from '../../../e2e/src/s3/create-session-front.js';
import { MOTO_AUTHORIZATION, type MotoServer, startMoto } from '../../../e2e/src/s3/moto.js';
import { type ObjectStore, type ObjectStoreOptions, openObjectStore } from '../../src/store/index.js';

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
