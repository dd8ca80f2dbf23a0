// S3 Express session requests from the lean data path are signed as the SDK signs them. No
// emulator implements CreateSession or checks `s3express` signatures, so a local server stands in
// for a directory bucket's zonal endpoint: it answers CreateSession with fixed session credentials
// and records every other request. The SDK's own PutObject/GetObject/HeadObject are captured there,
// and the data path's signer, given the same request, clock and credentials, must produce the
// same Authorization header; then the store's own requests are checked for the session headers.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { SignatureV4SignWithCredentials } from '@aws-sdk/signature-v4-multi-region';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { type ObjectStoreOptions, openObjectStore } from '../../src/store/index.js';
import { encodeKey, resolveS3Signing } from '../../src/store/s3-signing.js';

const BUCKET = 'walproxy-sign--use1-az4--x-s3';
const REGION = 'us-east-1';
/** IAM credentials with a session token (as from STS or IRSA): it must never reach a data request. */
const IAM = { accessKeyId: 'AKIAIAMUSER', secretAccessKey: 'iam-secret', sessionToken: 'iam-session-token' };
const SESSION = {
  accessKeyId: 'ASIASESSIONKEY',
  secretAccessKey: 'session-secret',
  sessionToken: 'session-token-from-create-session',
};

interface Captured {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

let endpoint: string;
const captured: Captured[] = [];
const createSessions: Captured[] = [];
/** How long issued sessions live, and whether CreateSession fails after the first. */
let sessionLifetimeMs = 5 * 60_000;
let refuseLaterSessions = false;
/** Error codes to answer data requests with, in order (S3 refusing a session early). */
const refusals: string[] = [];
let stop: () => Promise<void>;

beforeAll(async () => {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const one = { method: req.method ?? '', url: req.url ?? '', headers: req.headers };
      if (one.method === 'GET' && new URL(one.url, 'http://x').searchParams.has('session')) {
        createSessions.push(one);
        if (refuseLaterSessions && createSessions.length > 1) {
          res.writeHead(500, { 'content-type': 'application/xml' });
          res.end('<Error><Code>InternalError</Code><Message>scripted</Message></Error>');
          return;
        }
        const body =
          '<?xml version="1.0" encoding="UTF-8"?>\n<CreateSessionResult><Credentials>' +
          `<SessionToken>${SESSION.sessionToken}</SessionToken><SecretAccessKey>${SESSION.secretAccessKey}</SecretAccessKey>` +
          `<AccessKeyId>${SESSION.accessKeyId}</AccessKeyId>` +
          `<Expiration>${new Date(Date.now() + sessionLifetimeMs).toISOString()}</Expiration>` +
          '</Credentials></CreateSessionResult>';
        res.writeHead(200, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
        res.end(body);
        return;
      }
      captured.push(one);
      const refusal = refusals.shift();
      if (refusal !== undefined) {
        const body = `<Error><Code>${refusal}</Code><Message>scripted</Message></Error>`;
        res.writeHead(400, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      } else if (one.method === 'GET' && new URL(one.url, 'http://x').searchParams.has('list-type')) {
        const body = '<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>';
        res.writeHead(200, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      } else if (one.method === 'GET') {
        res.writeHead(206, { 'content-range': 'bytes 10-19/100', 'content-length': '10' });
        res.end(Buffer.alloc(10));
      } else {
        res.writeHead(200, { etag: '"1"', 'content-length': one.method === 'HEAD' ? '100' : '0' });
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  stop = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
});
afterAll(() => stop());
beforeEach(() => {
  captured.length = 0;
  createSessions.length = 0;
  sessionLifetimeMs = 5 * 60_000;
  refuseLaterSessions = false;
  refusals.length = 0;
});

function sdkClient(): S3Client {
  const config: S3ClientConfig = { region: REGION, endpoint, credentials: IAM };
  const client = new S3Client(config);
  onTestFinished(() => client.destroy());
  return client;
}

function openStore(options: ObjectStoreOptions = {}) {
  const store = openObjectStore(`s3://${BUCKET}/wal`, {
    region: REGION,
    endpoint,
    credentials: IAM,
    ...options,
  });
  onTestFinished(() => store.close());
  return store;
}

/** `x-amz-date` (`20260101T000000Z`) as a Date. */
function amzDate(value: string): Date {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value)!;
  return new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
}

function signedHeaderNames(authorization: string): string[] {
  return /SignedHeaders=([^,]+)/.exec(authorization)![1]!.split(';');
}

function pick(headers: IncomingHttpHeaders, names: readonly string[]): Record<string, string> {
  return Object.fromEntries(names.map((name) => [name, String(headers[name])]));
}

describe('S3 Express session signing', () => {
  it.each([
    {
      op: 'PutObject',
      key: 'wal/2026/01/obj-0001',
      send: (c: S3Client, Key: string) =>
        c.send(new PutObjectCommand({ Bucket: BUCKET, Key, Body: randomBytes(300), IfNoneMatch: '*' })),
    },
    {
      op: 'GetObject',
      key: "odd key/with!*'()=+&é",
      send: (c: S3Client, Key: string) =>
        c.send(new GetObjectCommand({ Bucket: BUCKET, Key, Range: 'bytes=10-19' })),
    },
    {
      op: 'HeadObject',
      key: 'wal/x',
      send: (c: S3Client, Key: string) => c.send(new HeadObjectCommand({ Bucket: BUCKET, Key })),
    },
  ])('signs $op exactly as the SDK does, for the same request, clock and session', async ({ key, send }) => {
    // Given the request the SDK sent to a directory bucket with session auth
    await send(sdkClient(), key);
    const sdk = captured.at(-1)!;
    const authorization = String(sdk.headers.authorization);
    expect(createSessions).toHaveLength(1);

    // When the data path's signer signs the same method, path and signed headers at the same time
    const signing = await resolveS3Signing(sdkClient(), BUCKET);
    const names = signedHeaderNames(authorization).filter((name) => name !== 'x-amz-date');
    const url = new URL(sdk.url, 'http://x');
    const headers = await signing.sign(
      {
        method: sdk.method,
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: pick(sdk.headers, names),
      },
      amzDate(String(sdk.headers['x-amz-date'])),
      { ...SESSION, expiration: new Date(Date.now() + 60_000) },
    );

    // Then the Authorization header is the SDK's, byte for byte
    expect(headers.authorization).toBe(authorization);
    // And the endpoint is the SDK's: its host, and its path without the doubled slash of IP endpoints
    expect(signing).toMatchObject({ signingName: 's3express', signingRegion: REGION, session: true });
    expect(headers.host).toBe(sdk.headers.host);
    expect(`${signing.basePath}/${encodeKey(key)}`).toBe(url.pathname.replace('//', '/'));
  });

  it("sends the store's data requests with the session token, scope s3express, and no IAM token", async () => {
    // Given a store on the directory bucket
    const store = openStore();

    // When it puts, reads and heads
    await store.put('a/b', [randomBytes(10), randomBytes(20)]);
    await store.get('a/b', { offset: 10, length: 10 });
    await store.head('a/b');

    // Then every data request carries the session, signed as an S3 Express request
    expect(captured).toHaveLength(3);
    const verifier = new SignatureV4SignWithCredentials({
      credentials: { accessKeyId: SESSION.accessKeyId, secretAccessKey: SESSION.secretAccessKey },
      region: REGION,
      service: 's3express',
      sha256: sdkClient().config.sha256,
      uriEscapePath: false,
    });
    for (const request of captured) {
      const authorization = String(request.headers.authorization);
      expect(request.headers['x-amz-s3session-token']).toBe(SESSION.sessionToken);
      expect(request.headers['x-amz-security-token']).toBeUndefined();
      expect(authorization).toContain(`Credential=${SESSION.accessKeyId}/`);
      expect(authorization).toContain(`/${REGION}/s3express/aws4_request`);
      const names = signedHeaderNames(authorization);
      expect(names).toEqual(
        expect.arrayContaining(['host', 'x-amz-content-sha256', 'x-amz-date', 'x-amz-s3session-token']),
      );
      // And the request that arrived is the one that was signed: SigV4 over what the server saw
      const [path, query] = request.url.split('?');
      expect(query).toBeUndefined();
      const again = await verifier.sign(
        {
          method: request.method,
          protocol: 'http:',
          hostname: '127.0.0.1',
          path: path!,
          query: {},
          headers: pick(
            request.headers,
            names.filter((name) => name !== 'x-amz-date'),
          ),
        },
        { signingDate: amzDate(String(request.headers['x-amz-date'])) },
      );
      expect(again.headers.authorization).toBe(authorization);
    }
    // And CreateSession ran once, signed with the IAM credentials (token included), scope s3express
    expect(createSessions).toHaveLength(1);
    expect(String(createSessions[0]!.headers.authorization)).toContain(`Credential=${IAM.accessKeyId}/`);
    expect(String(createSessions[0]!.headers.authorization)).toContain('/s3express/aws4_request');
    expect(createSessions[0]!.headers['x-amz-security-token']).toBe(IAM.sessionToken);
  });

  it("shares one session between the data path and the SDK's own calls", async () => {
    // Given a store on the directory bucket
    const store = openStore();

    // When it puts (data path) and lists (SDK)
    await store.put('a', Buffer.from('x'));
    for await (const _ of store.list('')) {
      // nothing listed
    }

    // Then one CreateSession served both, and the list carried its token
    expect(createSessions).toHaveLength(1);
    expect(captured.map((r) => r.headers['x-amz-s3session-token'])).toEqual([
      SESSION.sessionToken,
      SESSION.sessionToken,
    ]);
  });

  it('survives a failed background refresh of the session (the SDK would leave an unhandled rejection)', async () => {
    // Given sessions that live 30 s, inside the 60 s refresh window from the start, and a
    // CreateSession that fails after the first
    sessionLifetimeMs = 30_000;
    refuseLaterSessions = true;
    const store = openStore({ maxAttempts: 1 });

    // When the store lists twice through the SDK and puts twice through the data path, each
    // call after the first starting a background refresh that fails
    for await (const _ of store.list('')) {
      // nothing listed
    }
    for await (const _ of store.list('')) {
      // nothing listed
    }
    await store.put('a', Buffer.from('x'));
    await store.put('b', Buffer.from('y'));
    // (and the refresh's failure has had time to reach whoever would not handle it)
    while (createSessions.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 100));

    // Then every call succeeded with the first session, and the failures surfaced nowhere
    // (vitest fails the run on an unhandled rejection)
    expect(createSessions.length).toBeGreaterThanOrEqual(2);
    expect(captured.every((r) => r.headers['x-amz-s3session-token'] === SESSION.sessionToken)).toBe(true);
  });

  it('creates a new session when S3 refuses the current one, and retries the request with it', async () => {
    // Given a store whose first data request is answered ExpiredToken
    const store = openStore();
    refusals.push('ExpiredToken');

    // When an object is put, Then it succeeds on the second attempt with a second session
    await store.put('a', Buffer.from('x'));
    expect(captured).toHaveLength(2);
    expect(createSessions).toHaveLength(2);
  });
});
