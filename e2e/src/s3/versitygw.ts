/**
 * A fast real S3 API server for benchmarks and latency tests: versitygw (Apache-2.0, Go) with its
 * posix backend in a temporary directory. Unlike moto it keeps connections alive and costs little
 * CPU, so a benchmark measures walproxy rather than the store. It checks SigV4 signatures against
 * the root credentials it was started with (the e2e sidecars' test/test), enforces
 * `If-None-Match: *`, and answers ranged GETs; what it does not do is in docs/object-store.md
 * ("Stores for tests and benchmarks").
 *
 * The binary is built by `make versitygw` into .cache/bin (pinned; the unit, e2e and bench targets
 * depend on it).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '../cluster/paths.js';
import { walSidecarEnv } from '../cluster/wal-settings.js';
import { inNetns, listeningPorts, type S3Server, type S3ServerPlacement, terminate } from './s3-server.js';

const run = promisify(execFile);

export const VERSITYGW_VERSION = 'v1.8.0';

export interface VersitygwServer extends S3Server {
  /** The posix backend's root: one directory per bucket, one file per object. Removed by stop(). */
  readonly dataDir: string;
}

export interface StartVersitygwOptions extends S3ServerPlacement {
  /** Port to listen on; default 0, and the port the kernel chose is read from /proc. */
  port?: number;
  /** The root account's keys; default the e2e sidecars' (e2e/src/cluster/wal-settings.ts). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** The region versitygw expects in signatures; default the sidecars' (us-east-1). */
  region?: string;
}

/** .cache/bin/versitygw, after checking it is the pinned version. */
export async function versitygwBinary(): Promise<string> {
  const binary = join(repoRoot(), '.cache', 'bin', 'versitygw');
  const hint = `run 'make versitygw' to build ${VERSITYGW_VERSION} into ${binary}`;
  if (!existsSync(binary)) throw new Error(`versitygw is missing: ${hint}`);
  const { stdout } = await run(binary, ['--version']);
  const version = /^Version\s*:\s*(\S+)/m.exec(stdout)?.[1];
  if (version !== VERSITYGW_VERSION) throw new Error(`versitygw reports version ${version}: ${hint}`);
  return binary;
}

/** Starts versitygw on 127.0.0.1 (or `host`) with a fresh posix root and waits until it answers. */
export async function startVersitygw(options: StartVersitygwOptions = {}): Promise<VersitygwServer> {
  const binary = await versitygwBinary();
  const sidecarEnv = walSidecarEnv();
  const credentials = options.credentials ?? {
    accessKeyId: sidecarEnv.AWS_ACCESS_KEY_ID!,
    secretAccessKey: sidecarEnv.AWS_SECRET_ACCESS_KEY!,
  };
  const region = options.region ?? sidecarEnv.AWS_REGION!;
  const host = options.host ?? '127.0.0.1';
  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  const dataDir = await mkdtemp(join(tmpdir(), 'walproxy-versitygw-'));
  const serverArgs = [
    `--port=${host}:${options.port ?? 0}`,
    `--access=${credentials.accessKeyId}`,
    `--secret=${credentials.secretAccessKey}`,
    `--region=${region}`,
    // Off by default: without it every response closes its connection, as moto's do.
    '--keep-alive',
    // No line per request on stdout.
    '--quiet',
    'posix',
    dataDir,
  ];
  const [command, args] = inNetns(options.netns, binary, serverArgs);
  // Its own environment only: versitygw also reads ROOT_ACCESS_KEY_ID and friends from it.
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH } });
  const output = keepTail(child);
  // If this process dies without calling stop(), take the server and its files with it.
  const killOnExit = () => {
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  };
  process.once('exit', killOnExit);
  const stop = async () => {
    process.off('exit', killOnExit);
    await terminate(child);
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const port = await boundPort(child, deadline, output);
    const endpoint = `http://${host}:${port}`;
    await waitUntilAnswering(endpoint, deadline);
    const createBucket = async (name: string) => {
      const status = await signedStatus('PUT', new URL(`${endpoint}/${name}`), credentials, region);
      if (status !== 200) throw new Error(`versitygw: creating bucket ${name} answered HTTP ${status}`);
    };
    return { endpoint, pid: child.pid!, dataDir, createBucket, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function keepTail(child: ChildProcess): () => string {
  let tail = '';
  const onData = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-4096);
  };
  // Both pipes are read for as long as the server lives: a full pipe would block it.
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return () => tail;
}

/** versitygw prints the address it was given (`:0`), not the port it got: ask /proc. */
async function boundPort(child: ChildProcess, deadline: number, output: () => string): Promise<number> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `versitygw exited early (code ${child.exitCode}, signal ${child.signalCode}):\n${output()}`,
      );
    }
    const ports = child.pid === undefined ? [] : listeningPortsOrNone(child.pid);
    if (ports.length > 0) return ports[0]!;
    if (Date.now() > deadline) throw new Error(`versitygw did not listen in time:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function listeningPortsOrNone(pid: number): number[] {
  try {
    return listeningPorts(pid);
  } catch {
    // not exec'd yet (`ip netns exec` still running), or just exited
    return [];
  }
}

async function waitUntilAnswering(endpoint: string, deadline: number): Promise<void> {
  for (;;) {
    try {
      // Unsigned: answered 403, which proves the S3 API is up.
      await status('GET', new URL(`${endpoint}/`), {});
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`versitygw at ${endpoint} never answered`, { cause: err });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/**
 * A bodiless request signed with SigV4 for service `s3`. The SDK signs requests on `--x-s3`
 * buckets for service `s3express`, which versitygw refuses, so creating a bucket of that name
 * (which versitygw accepts) needs a request of our own.
 */
function signedStatus(
  method: string,
  url: URL,
  credentials: { accessKeyId: string; secretAccessKey: string },
  region: string,
): Promise<number> {
  const amzDate = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const payloadHash = sha256Hex('');
  const signedHeaders = 'host;x-amz-content-sha256;x-amz-date';
  // Bucket names and the test paths here need no URI encoding; queries are not supported.
  const canonicalRequest = [
    method,
    url.pathname,
    '',
    `host:${url.host}\nx-amz-content-sha256:${payloadHash}\nx-amz-date:${amzDate}\n`,
    signedHeaders,
    payloadHash,
  ].join('\n');
  const scope = `${day}/${region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  let key: Buffer = hmac(`AWS4${credentials.secretAccessKey}`, day);
  for (const part of [region, 's3', 'aws4_request']) key = hmac(key, part);
  const signature = hmac(key, stringToSign).toString('hex');
  return status(method, url, {
    'x-amz-content-sha256': payloadHash,
    'x-amz-date': amzDate,
    authorization: `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
  });
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function hmac(key: string | Buffer, text: string): Buffer {
  return createHmac('sha256', key).update(text).digest();
}

function status(method: string, url: URL, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}
