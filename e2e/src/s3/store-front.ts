/**
 * A store front: its own process between S3 clients (the sidecars, a benchmark) and a real S3
 * server (moto or versitygw), adding S3 Express One Zone-like first-byte latency in user space
 * (this kernel has no netem) and the store faults a test switches on: freeze, refuse, 503
 * SlowDown, slow GETs, slow PUTs. The forwarding lives in store-front-process.ts; this is the
 * handle that starts it and talks to its control port.
 *
 *   const front = await startStoreFront({ upstream: await startVersitygw() });
 *   await front.setMode('slowdown');          // every request: 503 SlowDown
 *   await front.setMode('freeze', { operations: ['get'] });
 *   await front.setMode('normal');            // held GETs proceed
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { inNetns, processCpuSeconds, type S3Server, terminate } from './s3-server.js';
import type {
  LatencySpec,
  ProcessConfig,
  SetModeRequest,
  StoreFrontMode,
  StoreFrontStats,
  StoreOperation,
} from './store-front-process.js';

export type {
  LatencySpec,
  OperationCounters,
  StoreFrontMode,
  StoreFrontStats,
  StoreOperation,
} from './store-front-process.js';

export interface StoreFrontOptions {
  /** The S3 server to forward to. */
  upstream: S3Server;
  /** Address to listen on (data and control ports), default 127.0.0.1. */
  host?: string;
  /** Data port, default 0 (the kernel picks). */
  port?: number;
  /** Control port, default 0. */
  controlPort?: number;
  /** Network namespace to run in (e2e/src/net/zone-network.ts), like the S3 servers. */
  netns?: string;
  /** First-byte latency of every request; default `'s3-express'` (p50 3 ms, p99 ~14 ms). */
  latency?: LatencySpec;
  /** PutObject's first-byte latency; default the same as `latency`. */
  putLatency?: LatencySpec;
  /** Milliseconds to wait for the front to listen. */
  readyTimeoutMs?: number;
}

export interface SetModeOptions {
  /** Operations the mode applies to, default all (`slow-get` and `slow-put` name their own). */
  operations?: readonly StoreOperation[];
  /** `slow-get` / `slow-put`: extra milliseconds before the first byte (default 1,000). */
  delayMs?: number;
}

/** The front as an S3 server: `endpoint` is the front's, `createBucket` goes to the upstream directly. */
export interface StoreFront extends S3Server {
  /** `http://<host>:<port>` of the control API: `GET /stats`, `POST /mode` `{mode, operations?, delayMs?}`. */
  readonly controlUrl: string;
  /** Sets the mode of the given operations (default all); resolves once the front applied it. */
  setMode(mode: StoreFrontMode, options?: SetModeOptions): Promise<void>;
  stats(): Promise<StoreFrontStats>;
  /** CPU-seconds the front's process has used (all threads), from /proc. */
  cpuSeconds(): number;
  /** Stops the front (not the upstream). */
  stop(): Promise<void>;
}

/** Starts the front process and waits until both ports listen. */
export async function startStoreFront(options: StoreFrontOptions): Promise<StoreFront> {
  const host = options.host ?? '127.0.0.1';
  const config: ProcessConfig = {
    upstream: options.upstream.endpoint,
    host,
    port: options.port ?? 0,
    controlPort: options.controlPort ?? 0,
    latency: options.latency ?? 's3-express',
    putLatency: options.putLatency ?? options.latency ?? 's3-express',
  };
  const [command, args] = inNetns(options.netns, process.execPath, [
    ...processEntry(),
    JSON.stringify(config),
  ]);
  // stdin stays a pipe the front watches: it exits when this process is gone, however it died.
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const stop = async () => {
    process.off('exit', killOnExit);
    await terminate(child);
  };
  try {
    const { port, controlPort } = await announcedPorts(child, options.readyTimeoutMs ?? 30_000);
    const controlUrl = `http://${host}:${controlPort}`;
    const pid = child.pid!;
    return {
      endpoint: `http://${host}:${port}`,
      controlUrl,
      pid,
      createBucket: (name) => options.upstream.createBucket(name),
      async setMode(mode, modeOptions = {}) {
        const body: SetModeRequest = { mode, ...modeOptions, operations: modeOptions.operations?.slice() };
        await control(controlUrl, '/mode', body);
      },
      stats: () => control(controlUrl, '/stats') as Promise<StoreFrontStats>,
      cpuSeconds: () => processCpuSeconds(pid),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * How to run store-front-process: its compiled .js beside this file's, or, when this file runs
 * as TypeScript source (vitest, tsx), the .ts through tsx's loader, so the child always runs the
 * same code as its parent.
 */
function processEntry(): string[] {
  const self = fileURLToPath(import.meta.url);
  if (self.endsWith('.js')) return [self.replace(/store-front\.js$/, 'store-front-process.js')];
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return ['--import', tsx, self.replace(/store-front\.ts$/, 'store-front-process.ts')];
}

function announcedPorts(
  child: ChildProcess,
  timeoutMs: number,
): Promise<{ port: number; controlPort: number }> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => fail('did not listen in time'), timeoutMs);
    const onExit = (code: number | null, signal: string | null) =>
      fail(`exited early (code ${code}, signal ${signal})`);
    function fail(why: string) {
      clearTimeout(timer);
      reject(new Error(`store front ${why}:\n${stderr.slice(-3000)}`));
    }
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      const line = stdout.split('\n', 2);
      if (line.length < 2) return;
      clearTimeout(timer);
      child.off('exit', onExit);
      resolve(JSON.parse(line[0]!) as { port: number; controlPort: number });
    });
    // Read for as long as the front lives (a full pipe would block it); kept for the error above.
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-8192);
    });
    child.once('exit', onExit);
  });
}

async function control(controlUrl: string, path: string, body?: SetModeRequest): Promise<unknown> {
  const response = await fetch(`${controlUrl}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    ...(body === undefined
      ? {}
      : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const answer = (await response.json()) as { error?: string };
  if (!response.ok) throw new Error(`store front ${path}: HTTP ${response.status}: ${answer.error}`);
  return answer;
}
