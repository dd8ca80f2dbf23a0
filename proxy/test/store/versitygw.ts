/**
 * versitygw (Apache-2.0, `make versitygw` puts v1.8.0 in .cache/bin) as a second real S3 API
 * server for the store's contract tests: unlike moto it checks SigV4 signatures, keeps
 * connections alive and is fast. Posix backend in a fresh temporary directory, root credentials
 * test/test, bound to 127.0.0.1 on a port the OS picks.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { repoRoot } from '../../../e2e/src/cluster/paths.js';

export const VERSITYGW_CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

export interface VersityGw {
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  createBucket(name: string): Promise<void>;
  /** Kills the server, waits for it to exit and removes its directory. */
  stop(): Promise<void>;
}

/** `.cache/bin/versitygw` (from `make versitygw`) or `$VERSITYGW_BIN`; undefined when neither exists. */
export function versityGwBinary(): string | undefined {
  const candidates = [process.env.VERSITYGW_BIN, join(repoRoot(), '.cache', 'bin', 'versitygw')];
  return candidates.find((path): path is string => path !== undefined && path !== '' && existsSync(path));
}

export async function startVersityGw(binary: string, readyTimeoutMs = 20_000): Promise<VersityGw> {
  const root = await mkdtemp(join(tmpdir(), 'walproxy-versitygw-'));
  const child = spawn(binary, ['--port', '127.0.0.1:0', '--keep-alive', '--quiet', 'posix', root], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ROOT_ACCESS_KEY: VERSITYGW_CREDENTIALS.accessKeyId,
      ROOT_SECRET_KEY: VERSITYGW_CREDENTIALS.secretAccessKey,
    },
  });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString('utf8'));
    output.splice(0, Math.max(0, output.length - 50));
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const stop = async () => {
    process.off('exit', killOnExit);
    await terminate(child);
    await rm(root, { recursive: true, force: true });
  };
  try {
    // It binds port 0 but prints `:0`, so the port is read from the kernel's socket table.
    const port = await listeningPort(child, readyTimeoutMs, output);
    const endpoint = `http://127.0.0.1:${port}`;
    await waitUntilAnswering(endpoint, Date.now() + readyTimeoutMs);
    const client = new S3Client({
      region: 'us-east-1',
      endpoint,
      forcePathStyle: true,
      credentials: VERSITYGW_CREDENTIALS,
    });
    return {
      endpoint,
      async createBucket(name) {
        await client.send(new CreateBucketCommand({ Bucket: name }));
      },
      async stop() {
        client.destroy();
        await stop();
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function listeningPort(child: ChildProcess, timeoutMs: number, output: string[]): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`versitygw exited (${child.exitCode ?? child.signalCode}): ${output.join('')}`);
    }
    const port = await portOf(child.pid!);
    if (port !== undefined) return port;
    if (Date.now() > deadline) throw new Error(`versitygw did not listen in time: ${output.join('')}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The port of a listening TCP socket the process holds, from /proc. */
async function portOf(pid: number): Promise<number | undefined> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [])) {
    const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const match = /^socket:\[(\d+)\]$/.exec(link);
    if (match) inodes.add(match[1]!);
  }
  for (const table of ['tcp', 'tcp6']) {
    const text = await readFile(`/proc/${pid}/net/${table}`, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; field 9 is the inode.
      if (fields[3] === '0A' && inodes.has(fields[9] ?? ''))
        return Number.parseInt(fields[1]!.split(':')[1]!, 16);
    }
  }
  return undefined;
}

async function waitUntilAnswering(endpoint: string, deadline: number): Promise<void> {
  for (;;) {
    try {
      await new Promise<void>((resolve, reject) => {
        const req = request(endpoint, (res) => {
          res.resume();
          resolve();
        });
        req.on('error', reject);
        req.end();
      });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`versitygw at ${endpoint} never answered`, { cause: err });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
