/**
 * Object store request latency against a local moto server, all variants in one run and
 * interleaved request by request, so a drift of the machine or the server hits every variant alike.
 *
 * - PUT of a 400 KB WAL object and range GET of 16 KB (one batch body, what a follower reads):
 *   the SDK's default NodeHttpHandler (keep-alive agent) versus an undici Agent behind a minimal
 *   smithy handler, with identical client settings; plus S3ObjectStore itself (the default handler,
 *   If-None-Match on, exact-range check) to show what the store adds.
 * - Baseline: the same requests with bare node:http and no SDK, i.e. the server's own floor.
 * - WAL object body shape: seal() yields header + batch slices + footer. One Buffer (the store
 *   concatenates) versus the same buffers as a stream body, which the SDK sends aws-chunked with a
 *   trailing checksum.
 *
 * Run: npx tsx e2e/bench/object-store.bench.ts [N]   (N defaults to 300)
 */
import { randomBytes } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { GetObjectCommand, PutObjectCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { openObjectStore } from '@walproxy/proxy';
import { Agent as UndiciAgent } from 'undici';
import { MOTO_AUTHORIZATION, startMoto } from '../src/s3/moto.js';

const N = Number(process.argv[2] ?? 300);
const WARMUP = 20;
const OBJECT_BYTES = 400 * 1024;
const RANGE = { offset: 100_000, length: 16 * 1024 };
const BUCKET = 'walproxy-bench';
const MAX_SOCKETS = 64;

/** The smallest smithy HttpHandler over undici: enough for S3 with Buffer bodies. */
class UndiciHandler {
  readonly metadata = { handlerProtocol: 'http/1.1' };
  readonly #agent = new UndiciAgent({ connections: MAX_SOCKETS });
  updateHttpClientConfig(): void {}
  httpHandlerConfigs(): Record<string, never> {
    return {};
  }
  destroy(): void {
    void this.#agent.close();
  }
  async handle(
    request: {
      protocol: string;
      hostname: string;
      port?: number;
      method: string;
      path: string;
      query?: Record<string, string | string[] | null>;
      headers: Record<string, string>;
      body?: unknown;
    },
    options: { abortSignal?: AbortSignal } = {},
  ) {
    const query = Object.entries(request.query ?? {})
      .flatMap(([k, v]) => (v === null ? [[k]] : (Array.isArray(v) ? v : [v]).map((one) => [k, one])))
      .map((pair) => pair.map(encodeURIComponent).join('='))
      .join('&');
    // undici derives Host from the origin and refuses a caller's copy.
    const { host: _host, ...headers } = request.headers;
    const res = await this.#agent.request({
      origin: `${request.protocol}//${request.hostname}${request.port ? `:${request.port}` : ''}`,
      path: query === '' ? request.path : `${request.path}?${query}`,
      method: request.method as 'GET',
      headers,
      body: (request.body ?? null) as Buffer | null,
      signal: options.abortSignal ?? null,
    });
    const flat: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers))
      if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
    return { response: { statusCode: res.statusCode, headers: flat, body: res.body } };
  }
}

const moto = await startMoto();
const base: S3ClientConfig = {
  region: 'us-east-1',
  endpoint: moto.endpoint,
  forcePathStyle: true,
  credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
};
const nodeClient = new S3Client({
  ...base,
  requestHandler: { httpAgent: new HttpAgent({ keepAlive: true, maxSockets: MAX_SOCKETS }) },
});
const undiciClient = new S3Client({ ...base, requestHandler: new UndiciHandler() as never });
const store = openObjectStore(`s3://${BUCKET}/store`, base as never);
const rawAgent = new HttpAgent({ keepAlive: true, maxSockets: MAX_SOCKETS });

await moto.createBucket(BUCKET);
const body = randomBytes(OBJECT_BYTES);
// What seal() hands over for a 400 KB object of ~16 KB batches: header, 25 slices, footer+trailer.
const parts = [
  body.subarray(0, 28),
  ...Array.from({ length: 25 }, (_, i) => body.subarray(28 + i * 16_000, 28 + (i + 1) * 16_000)),
  body.subarray(28 + 25 * 16_000),
];

type Op = (i: number) => Promise<unknown>;
const sdkPut =
  (client: S3Client, name: string): Op =>
  (i) =>
    client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${name}/${i}`, Body: body }));
const sdkGet =
  (client: S3Client, name: string): Op =>
  async (i) => {
    const out = await client.send(
      new GetObjectCommand({
        Bucket: BUCKET,
        Key: `${name}/${i}`,
        Range: `bytes=${RANGE.offset}-${RANGE.offset + RANGE.length - 1}`,
      }),
    );
    return out.Body!.transformToByteArray();
  };
const raw = (method: 'PUT' | 'GET', path: string, payload?: Buffer) =>
  new Promise<void>((resolve, reject) => {
    const headers: Record<string, string> =
      payload === undefined
        ? {
            authorization: MOTO_AUTHORIZATION,
            range: `bytes=${RANGE.offset}-${RANGE.offset + RANGE.length - 1}`,
          }
        : { authorization: MOTO_AUTHORIZATION, 'content-length': String(payload.length) };
    const req = httpRequest(`${moto.endpoint}${path}`, { method, agent: rawAgent, headers }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () =>
        res.statusCode! < 300 ? resolve() : reject(new Error(`${method} ${path}: ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
    req.end(payload);
  });

const putVariants: Record<string, Op> = {
  'node:http (SDK default)': sdkPut(nodeClient, 'node'),
  'undici Agent': sdkPut(undiciClient, 'undici'),
  'S3ObjectStore (default)': (i) => store.put(`store/${i}`, body),
  'raw node:http, no SDK': (i) => raw('PUT', `/${BUCKET}/raw/${i}`, body),
  'Buffer[] concat → PUT': (i) => store.put(`parts/${i}`, parts),
  'Buffer[] stream → PUT': (i) =>
    nodeClient.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: `stream/${i}`,
        Body: Readable.from(parts),
        ContentLength: OBJECT_BYTES,
      }),
    ),
};
const getVariants: Record<string, Op> = {
  'node:http (SDK default)': sdkGet(nodeClient, 'node'),
  'undici Agent': sdkGet(undiciClient, 'undici'),
  'S3ObjectStore (default)': (i) => store.get(`store/${i}`, RANGE),
  'raw node:http, no SDK': (i) => raw('GET', `/${BUCKET}/raw/${i}`),
};

async function measure(variants: Record<string, Op>): Promise<Map<string, number[]>> {
  const samples = new Map<string, number[]>(Object.keys(variants).map((name) => [name, []]));
  for (let i = 0; i < WARMUP + N; i++) {
    for (const [name, op] of Object.entries(variants)) {
      const start = performance.now();
      await op(i);
      if (i >= WARMUP) samples.get(name)!.push(performance.now() - start);
    }
  }
  return samples;
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

function report(title: string, samples: Map<string, number[]>, reference: string): void {
  const ref = samples.get(reference)!;
  console.log(`\n${title} (N=${N} each, ms)`);
  console.log(`${'variant'.padEnd(26)}${'p50'.padStart(8)}${'p99'.padStart(8)}  p50/ref  p99/ref`);
  for (const [name, values] of samples) {
    const p50 = quantile(values, 0.5);
    const p99 = quantile(values, 0.99);
    console.log(
      `${name.padEnd(26)}${p50.toFixed(2).padStart(8)}${p99.toFixed(2).padStart(8)}  ${(p50 / quantile(ref, 0.5)).toFixed(2).padStart(7)}  ${(p99 / quantile(ref, 0.99)).toFixed(2).padStart(7)}`,
    );
  }
}

function concatCost(): number {
  const rounds = 2_000;
  const start = performance.now();
  for (let i = 0; i < rounds; i++) Buffer.concat(parts);
  return ((performance.now() - start) / rounds) * 1000;
}

try {
  console.log(
    `moto ${moto.endpoint}; ${OBJECT_BYTES / 1024} KB PUTs, ${RANGE.length / 1024} KB range GETs, warm-up ${WARMUP}`,
  );
  report(`PUT ${OBJECT_BYTES / 1024} KB`, await measure(putVariants), 'node:http (SDK default)');
  report(`GET range ${RANGE.length / 1024} KB`, await measure(getVariants), 'node:http (SDK default)');
  console.log(
    `\nBuffer.concat of seal()'s ${parts.length} parts (${OBJECT_BYTES / 1024} KB): ${concatCost().toFixed(1)} µs`,
  );
} finally {
  nodeClient.destroy();
  undiciClient.destroy();
  await store.close();
  rawAgent.destroy();
  await moto.stop();
}
