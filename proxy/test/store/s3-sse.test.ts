import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ObjectStoreOptions, openObjectStore } from '../../src/store/index.js';

// What the SDK puts on the wire for server-side encryption, seen by a plain HTTP server standing in
// for S3 (moto does not check encryption headers, so it would prove nothing more).

const puts: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
let endpoint: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'PUT') puts.push({ url: req.url ?? '', headers: req.headers });
      res.writeHead(200, { ETag: '"0"' });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise((resolve) => server.close(() => resolve()));
});
afterAll(() => close());

async function putWith(options: ObjectStoreOptions): Promise<IncomingHttpHeaders> {
  const store = openObjectStore('s3://wal-bucket/prefix', {
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    ...options,
  });
  try {
    puts.length = 0;
    await store.put('objects/one', Buffer.from('batch bytes'));
    expect(puts).toHaveLength(1);
    expect(puts[0]!.url.split('?')[0]).toBe('/wal-bucket/prefix/objects/one');
    return puts[0]!.headers;
  } finally {
    await store.close();
  }
}

describe('S3ObjectStore server-side encryption on PutObject', () => {
  it('SSE-KMS: names the algorithm and the key', async () => {
    const headers = await putWith({
      serverSideEncryption: 'aws:kms',
      sseKmsKeyId: 'arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    });
    expect(headers['x-amz-server-side-encryption']).toBe('aws:kms');
    expect(headers['x-amz-server-side-encryption-aws-kms-key-id']).toBe(
      'arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    );
  });

  it('SSE-KMS without a key id: S3 picks the AWS managed key, no key header is sent', async () => {
    const headers = await putWith({ serverSideEncryption: 'aws:kms' });
    expect(headers['x-amz-server-side-encryption']).toBe('aws:kms');
    expect(headers['x-amz-server-side-encryption-aws-kms-key-id']).toBeUndefined();
  });

  it('SSE-S3: AES256 and never a key id', async () => {
    const headers = await putWith({ serverSideEncryption: 'AES256', sseKmsKeyId: 'ignored' });
    expect(headers['x-amz-server-side-encryption']).toBe('AES256');
    expect(headers['x-amz-server-side-encryption-aws-kms-key-id']).toBeUndefined();
  });

  it('unset: no encryption header, the bucket default applies; the conditional put stays', async () => {
    const headers = await putWith({});
    expect(headers['x-amz-server-side-encryption']).toBeUndefined();
    expect(headers['if-none-match']).toBe('*');
  });
});
