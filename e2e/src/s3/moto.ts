/**
 * A real S3 API server for tests: moto (PyPI `moto[server]`) run from a private virtualenv, bound to
 * loopback on a port the OS picks. moto enforces If-None-Match on PutObject and decodes the SDK's
 * checksum headers (CRC32C through the `crc32c` package), which the npm emulators do not.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '../cluster/paths.js';
import { inNetns, type S3Server, type S3ServerPlacement, terminate } from './s3-server.js';

const run = promisify(execFile);

export const MOTO_VERSION = '5.2.5';
/** The `s3crc32c` extra pulls `crc32c`, which moto needs to check CRC32C checksums; pin it too. */
const REQUIREMENTS = [`moto[server,s3crc32c]==${MOTO_VERSION}`, 'crc32c==2.9.post0'];
const EXPECTED_VERSIONS = `moto=${MOTO_VERSION} crc32c=2.9.post0`;

export interface MotoServer extends S3Server {
  /** `http://127.0.0.1:<port>`: an IP, so the SDK addresses directory buckets path-style. */
  readonly endpoint: string;
  /** The server's process id: tests pause it (SIGSTOP) to simulate an object-store outage. */
  readonly pid: number;
  /**
   * Creates a bucket with a plain HTTP request, so directory-bucket names (`--x-s3`) need none of
   * the SDK's S3 Express handling.
   */
  createBucket(name: string): Promise<void>;
  /**
   * Requests on objects (`/<bucket>/<key>`, not bucket listings) so far, by HTTP method, read from
   * moto's access log: what benchmarks count GETs per object with.
   */
  objectRequests(): Readonly<Record<string, number>>;
  /** Kills the server and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * moto takes the account from the Authorization header without checking the signature, and treats
 * a request without one as anonymous (403 on private objects).
 */
export const MOTO_AUTHORIZATION =
  'AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0';

/** `readyTimeoutMs` does not count installing moto. */
export interface StartMotoOptions extends S3ServerPlacement {
  /**
   * Extra environment for the server, e.g. `INITIAL_NO_AUTH_ACTION_COUNT: '0'` to make moto check
   * access keys (any key not created through its IAM API is then refused).
   */
  env?: Record<string, string>;
}

/**
 * Makes `.cache/venv-moto` hold the pinned moto and returns its python. Idempotent, and safe when
 * several test workers call it at once: each installs into its own directory and renames it into
 * place; the loser of the rename throws its copy away. The server runs as `python -m moto.server`
 * because a renamed virtualenv's python still works while its generated scripts' shebangs do not.
 */
export async function ensureMoto(): Promise<string> {
  const cache = join(repoRoot(), '.cache');
  const venv = join(cache, 'venv-moto');
  const python = join(venv, 'bin', 'python');
  if (await hasExpectedVersions(python)) return python;
  await mkdir(cache, { recursive: true });
  const staging = join(cache, `venv-moto.${process.pid}.${Date.now()}`);
  try {
    await run('python3', ['-m', 'venv', staging]);
    await run(join(staging, 'bin', 'python'), [
      '-m',
      'pip',
      'install',
      '--quiet',
      '--disable-pip-version-check',
      ...REQUIREMENTS,
    ]);
    try {
      await rename(staging, venv);
    } catch {
      // Another worker won the race (fine), or a stale venv of another version is in the way.
      if (!(await hasExpectedVersions(python))) {
        await rm(venv, { recursive: true, force: true });
        await rename(staging, venv);
      }
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  if (!(await hasExpectedVersions(python)))
    throw new Error(`moto install in ${venv} did not give ${EXPECTED_VERSIONS}`);
  return python;
}

async function hasExpectedVersions(python: string): Promise<boolean> {
  if (!existsSync(python)) return false;
  try {
    const { stdout } = await run(python, [
      '-c',
      "import importlib.metadata as m; print(f\"moto={m.version('moto')} crc32c={m.version('crc32c')}\")",
    ]);
    return stdout.trim() === EXPECTED_VERSIONS;
  } catch {
    return false;
  }
}

/** Installs moto if needed, starts it on 127.0.0.1 (or `host`) with an OS-chosen port and waits until it answers. */
export async function startMoto(options: StartMotoOptions = {}): Promise<MotoServer> {
  const python = await ensureMoto();
  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  const serverArgs = ['-m', 'moto.server', '-H', options.host ?? '127.0.0.1', '-p', '0'];
  // `ip netns exec` execs the server, so the pid stays the server's (tests SIGSTOP it).
  const [command, args] = inNetns(options.netns, python, serverArgs);
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env, PYTHONUNBUFFERED: '1' },
  });
  // If this process dies without calling stop(), take the server with it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const stop = async () => {
    process.off('exit', killOnExit);
    await terminate(child);
  };
  const objectRequests = countObjectRequests(child);
  try {
    const endpoint = await announcedEndpoint(child, deadline);
    await waitUntilAnswering(endpoint, deadline);
    const createBucket = async (name: string) => {
      const status = await httpStatus(`${endpoint}/${name}`, 'PUT');
      if (status !== 200) throw new Error(`moto: creating bucket ${name} answered HTTP ${status}`);
    };
    return { endpoint, pid: child.pid!, createBucket, objectRequests: () => ({ ...objectRequests }), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Counts Werkzeug's access log lines (`... "GET /bucket/key HTTP/1.1" 206 -`, colored with ANSI
 * escapes) for object paths, by method, as they come.
 */
function countObjectRequests(child: ChildProcess): Record<string, number> {
  const counts: Record<string, number> = {};
  let partial = '';
  const onData = (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const match = /"(?:\x1b\[[\d;]*m)*([A-Z]+) \/[^/?\s"]+\/[^?\s"]+ HTTP\/[\d.]+/.exec(line);
      if (match) counts[match[1]!] = (counts[match[1]!] ?? 0) + 1;
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return counts;
}

/** Werkzeug prints `Running on http://<host>:<port>` once it listens; the output keeps flowing. */
function announcedEndpoint(child: ChildProcess, deadline: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const recent: string[] = [];
    const timer = setTimeout(() => fail('did not announce its port in time'), deadline - Date.now());
    const onData = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() !== '') recent.push(line);
        const match = /Running on (http:\/\/\d+\.\d+\.\d+\.\d+:\d+)/.exec(line);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      }
      recent.splice(0, Math.max(0, recent.length - 20));
    };
    const onExit = (code: number | null, signal: string | null) =>
      fail(`exited early (code ${code}, signal ${signal})`);
    function fail(why: string) {
      clearTimeout(timer);
      reject(new Error(`moto server ${why}; last output:\n${recent.join('\n')}`));
    }
    // Both pipes are read for as long as the server lives: a full pipe would block moto's logging.
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}

async function waitUntilAnswering(endpoint: string, deadline: number): Promise<void> {
  for (;;) {
    try {
      await httpStatus(`${endpoint}/moto-api/`);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`moto server at ${endpoint} never answered`, { cause: err });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

function httpStatus(url: string, method = 'GET'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { authorization: MOTO_AUTHORIZATION } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}
