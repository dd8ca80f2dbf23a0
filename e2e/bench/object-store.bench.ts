/**
 * What one WAL object request costs the client: the issue #13 experiment. N PUTs of a 400 KB WAL
 * object (given as seal()'s header + 25 batch slices + footer), then N range GETs of 16 KB (one
 * batch body, what a follower reads), per variant, interleaved request by request so a drift of
 * the machine or the server hits every variant alike. Per variant: client CPU per request (user +
 * system of this process, process.cpuUsage around each request; the server is another process)
 * and p50/p99 wall time.
 *
 * - SDK, as before the lean path: @aws-sdk/client-s3 with the store's settings (keep-alive
 *   agent, If-None-Match, Buffer.concat of the parts, GET body through transformToByteArray).
 * - lean S3ObjectStore: the store as it is (S3DataPath over node:http keep-alive).
 * - lean signer over undici: the same signing (resolveS3Signing) and headers sent through an
 *   undici Pool, to compare the two HTTP clients under the same work.
 *
 * Server: versitygw (posix backend in a temporary directory, keep-alive; the default, it checks
 * signatures and is not the bottleneck) or moto (closes every connection; slow).
 *
 * Run: flock /tmp/walproxy-e2e.lock npx tsx e2e/bench/object-store.bench.ts [N] [versitygw|moto]
 * (N defaults to 300; versitygw from .cache/bin/versitygw or $VERSITYGW_BIN, see `make versitygw`)
 */
import { randomBytes } from 'node:crypto';
import { Agent as HttpAgent } from 'node:http';
import { crc32 } from 'node:zlib';
import { GetObjectCommand, PutObjectCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { encodeKey, openObjectStore, resolveS3Signing } from '@walproxy/proxy';
import { Pool } from 'undici';
import { startMoto } from '../src/s3/moto.js';
import { startVersitygw } from '../src/s3/versitygw.js';

const N = Number(process.argv[2] ?? 300);
const SERVER = process.argv[3] ?? 'versitygw';
const WARMUP = 20;
const OBJECT_BYTES = 400 * 1024;
const RANGE = { offset: 100_000, length: 16 * 1024 };
const BUCKET = 'walproxy-bench';
const MAX_SOCKETS = 64;
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

interface Server {
  endpoint: string;
  createBucket(name: string): Promise<void>;
  stop(): Promise<void>;
}

async function startServer(): Promise<Server> {
  return SERVER === 'moto' ? startMoto() : startVersitygw();
}

const server = await startServer();
await server.createBucket(BUCKET);
const base: S3ClientConfig = {
  region: 'us-east-1',
  endpoint: server.endpoint,
  forcePathStyle: true,
  credentials,
};
const sdk = new S3Client({
  ...base,
  requestHandler: { httpAgent: new HttpAgent({ keepAlive: true, maxSockets: MAX_SOCKETS }) },
});
const store = openObjectStore(`s3://${BUCKET}/lean`, base as never);
const signing = await resolveS3Signing(sdk, BUCKET);
const pool = new Pool(`${signing.protocol}//${signing.host}`, { connections: MAX_SOCKETS });

const body = randomBytes(OBJECT_BYTES);
// What seal() hands over for a 400 KB object of ~16 KB batches: header, 25 slices, footer+trailer.
const parts = [
  body.subarray(0, 28),
  ...Array.from({ length: 25 }, (_, i) => body.subarray(28 + i * 16_000, 28 + (i + 1) * 16_000)),
  body.subarray(28 + 25 * 16_000),
];

async function undiciPut(key: string): Promise<void> {
  let crc = 0;
  for (const part of parts) crc = crc32(part, crc);
  const checksum = Buffer.alloc(4);
  checksum.writeUInt32BE(crc >>> 0);
  const path = `${signing.basePath}/${encodeKey(key)}`;
  const { host: _host, ...headers } = await signing.sign(
    {
      method: 'PUT',
      path,
      headers: {
        host: signing.host,
        'content-length': String(OBJECT_BYTES),
        'x-amz-content-sha256': 'UNSIGNED-PAYLOAD',
        'x-amz-checksum-crc32': checksum.toString('base64'),
        'if-none-match': '*',
      },
    },
    new Date(),
  );
  // undici derives Host from the origin (the same value) and refuses a caller's copy. It writes an
  // iterable body chunk by chunk (its types list only single-buffer and stream bodies).
  const res = await pool.request({ path, method: 'PUT', headers, body: parts as unknown as Buffer });
  await res.body.dump();
  if (res.statusCode !== 200) throw new Error(`undici PUT ${key}: ${res.statusCode}`);
}

async function undiciGet(key: string): Promise<Buffer> {
  const path = `${signing.basePath}/${encodeKey(key)}`;
  const { host: _host, ...headers } = await signing.sign(
    {
      method: 'GET',
      path,
      headers: {
        host: signing.host,
        range: `bytes=${RANGE.offset}-${RANGE.offset + RANGE.length - 1}`,
        'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      },
    },
    new Date(),
  );
  const res = await pool.request({ path, method: 'GET', headers });
  const out = Buffer.allocUnsafe(RANGE.length);
  let filled = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    chunk.copy(out, filled);
    filled += chunk.length;
  }
  if (res.statusCode !== 206 || filled !== RANGE.length)
    throw new Error(`undici GET ${key}: ${res.statusCode}`);
  return out;
}

type Op = (i: number) => Promise<unknown>;
const putVariants: Record<string, Op> = {
  'SDK, as before': (i) =>
    sdk.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: `sdk/${i}`,
        Body: Buffer.concat(parts),
        ContentLength: OBJECT_BYTES,
        IfNoneMatch: '*',
      }),
    ),
  'lean S3ObjectStore': (i) => store.put(`${i}`, parts),
  'lean signer, undici': (i) => undiciPut(`undici/${i}`),
};
const getVariants: Record<string, Op> = {
  'SDK, as before': async (i) => {
    const out = await sdk.send(
      new GetObjectCommand({
        Bucket: BUCKET,
        Key: `sdk/${i}`,
        Range: `bytes=${RANGE.offset}-${RANGE.offset + RANGE.length - 1}`,
      }),
    );
    return out.Body!.transformToByteArray();
  },
  'lean S3ObjectStore': (i) => store.get(`${i}`, RANGE),
  'lean signer, undici': (i) => undiciGet(`undici/${i}`),
};

interface Samples {
  wallMs: number[];
  cpuUs: number;
  /** The kernel's share of cpuUs: mostly copying the bodies through the sockets. */
  systemUs: number;
}

async function measure(variants: Record<string, Op>): Promise<Map<string, Samples>> {
  const samples = new Map<string, Samples>(
    Object.keys(variants).map((name) => [name, { wallMs: [], cpuUs: 0, systemUs: 0 }]),
  );
  for (let i = 0; i < WARMUP + N; i++) {
    for (const [name, op] of Object.entries(variants)) {
      const cpu = process.cpuUsage();
      const start = performance.now();
      await op(i);
      const wall = performance.now() - start;
      const used = process.cpuUsage(cpu);
      if (i >= WARMUP) {
        const s = samples.get(name)!;
        s.wallMs.push(wall);
        s.cpuUs += used.user + used.system;
        s.systemUs += used.system;
      }
    }
  }
  return samples;
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

function report(title: string, samples: Map<string, Samples>): void {
  console.log(`\n${title} (N=${N} each)`);
  console.log(
    `${'variant'.padEnd(22)}${'CPU ms/req'.padStart(12)}${'of it sys'.padStart(11)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}`,
  );
  for (const [name, s] of samples) {
    console.log(
      `${name.padEnd(22)}${(s.cpuUs / 1000 / N).toFixed(2).padStart(12)}${(s.systemUs / 1000 / N).toFixed(2).padStart(11)}${quantile(s.wallMs, 0.5).toFixed(2).padStart(9)}${quantile(s.wallMs, 0.99).toFixed(2).padStart(9)}`,
    );
  }
}

try {
  console.log(
    `${SERVER} ${server.endpoint}; ${OBJECT_BYTES / 1024} KB PUTs (${parts.length} buffers), ${RANGE.length / 1024} KB range GETs, warm-up ${WARMUP}`,
  );
  report(`PUT ${OBJECT_BYTES / 1024} KB`, await measure(putVariants));
  report(`GET range ${RANGE.length / 1024} KB`, await measure(getVariants));
} finally {
  sdk.destroy();
  await store.close();
  await pool.close();
  await server.stop();
}
