// The lean data path against a scripted HTTP server standing in for S3, for what real servers do
// not do on demand: lie about lengths, cut a body short, run on another clock. The contract
// suite (s3-contract.test.ts) covers the real servers.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { type ObjectStore, type ObjectStoreOptions, openObjectStore } from '../../src/store/index.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

type Handler = (req: Seen, res: ServerResponse, raw: IncomingMessage) => void;

let endpoint: string;
let handler: Handler;
const seen: Seen[] = [];
let stopServer: () => Promise<void>;

beforeAll(async () => {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const one = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      seen.push(one);
      handler(one, res, req);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  stopServer = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
});
afterAll(() => stopServer());
beforeEach(() => {
  seen.length = 0;
});

function open(options: ObjectStoreOptions = {}): ObjectStore {
  const store = openObjectStore('s3://wal-bucket/prefix', {
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    ...options,
  });
  onTestFinished(() => store.close());
  return store;
}

function errorXml(code: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>scripted</Message></Error>`;
}

describe('S3 data path: PutObject', () => {
  it('writes the buffers in order with their summed length, an unsigned payload and their CRC32', async () => {
    // Given a server that takes every put, and a body of several buffers
    handler = (_req, res) => {
      res.writeHead(200, { etag: '"1"' });
      res.end();
    };
    const parts = [randomBytes(28), randomBytes(16_000), Buffer.alloc(0), randomBytes(99)];
    const whole = Buffer.concat(parts);

    // When it is put
    await open().put('objects/one', parts);

    // Then one request carried exactly those bytes, not chunked, with the headers S3 checks
    expect(seen).toHaveLength(1);
    const put = seen[0]!;
    expect(put.method).toBe('PUT');
    expect(put.url).toBe('/wal-bucket/prefix/objects/one');
    expect(put.body.equals(whole)).toBe(true);
    expect(put.headers['content-length']).toBe(String(whole.length));
    expect(put.headers['transfer-encoding']).toBeUndefined();
    expect(put.headers['x-amz-content-sha256']).toBe('UNSIGNED-PAYLOAD');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(whole));
    expect(put.headers['x-amz-checksum-crc32']).toBe(crc.toString('base64'));
    expect(put.headers['if-none-match']).toBe('*');
    expect(put.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=test\/\d{8}\/us-east-1\/s3\/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
    );
  });

  it('sends no checksum header when the SDK is told to send checksums only where required', async () => {
    // Given the SDK's own switch for stores that reject checksum headers
    vi.stubEnv('AWS_REQUEST_CHECKSUM_CALCULATION', 'WHEN_REQUIRED');
    onTestFinished(() => {
      vi.unstubAllEnvs();
    });
    handler = (_req, res) => {
      res.writeHead(200);
      res.end();
    };

    // When a put is sent, Then it has no x-amz-checksum-crc32
    await open().put('k', Buffer.from('x'));
    expect(seen[0]!.headers['x-amz-checksum-crc32']).toBeUndefined();
  });
});

describe('S3 data path: GetObject', () => {
  it('refuses an answer with fewer bytes than the range asked, as an invalid range', async () => {
    // Given a server whose object ends 5 bytes into the asked range
    handler = (_req, res) => {
      res.writeHead(206, { 'content-range': 'bytes 10-14/15', 'content-length': '5' });
      res.end(Buffer.alloc(5));
    };

    // When 20 bytes at offset 10 are read, Then it fails as an invalid range without retrying
    await expect(open().get('k', { offset: 10, length: 20 })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_RANGE',
      message: expect.stringContaining('bytes 10-14/15'),
    });
    expect(seen).toHaveLength(1);
  });

  it('refuses a server that ignored the Range header', async () => {
    // Given a server that answers the whole object to a range request
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.end(Buffer.alloc(100));
    };

    // When a range is read, Then it fails, naming the answer, rather than returning other bytes
    await expect(open().get('k', { offset: 10, length: 20 })).rejects.toMatchObject({
      code: 'WALPROXY_ERR_STORE_OTHER',
      message: expect.stringContaining('answered 200'),
    });
  });

  it('retries a body cut short and returns the bytes of the complete answer', async () => {
    // Given a server that breaks the connection halfway through the first answer
    const body = randomBytes(64 * 1024);
    let calls = 0;
    handler = (req, res, raw) => {
      calls++;
      res.writeHead(206, {
        'content-range': `bytes 0-${body.length - 1}/${body.length}`,
        'content-length': body.length,
      });
      if (calls === 1) {
        res.write(body.subarray(0, 1000), () => raw.socket.destroy());
      } else {
        res.end(body);
      }
      expect(req.headers.range).toBe(`bytes=0-${body.length - 1}`);
    };

    // When the range is read, Then the second attempt's bytes come back
    const back = await open().get('k', { offset: 0, length: body.length });
    expect(back.equals(body)).toBe(true);
    expect(calls).toBe(2);
  });

  it('corrects its signing clock from the server when the server says the clocks are skewed', async () => {
    // Given a server an hour ahead that refuses requests signed more than 15 minutes off its clock
    const skewMs = 60 * 60_000;
    handler = (req, res) => {
      const amzDate = String(req.headers['x-amz-date']);
      const signed = Date.parse(
        `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
      );
      const serverNow = Date.now() + skewMs;
      if (Math.abs(serverNow - signed) > 15 * 60_000) {
        const xml = errorXml('RequestTimeTooSkewed');
        res.writeHead(403, {
          date: new Date(serverNow).toUTCString(),
          'content-length': Buffer.byteLength(xml),
        });
        res.end(xml);
        return;
      }
      res.writeHead(200, { 'content-length': '3' });
      res.end();
    };

    // When an object is headed, Then the retry is signed on the server's clock and succeeds
    expect(await open().head('k')).toEqual({ size: 3 });
    expect(seen).toHaveLength(2);
  });
});
