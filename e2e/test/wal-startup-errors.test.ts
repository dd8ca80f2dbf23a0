import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { kafkaClient } from '../src/clients/kafkajs.js';
import { sidecarEntry } from '../src/cluster/paths.js';
import { walSidecarEnv } from '../src/cluster/wal-settings.js';

// Issue 12, case 5: a store problem at startup is never a reason not to serve. Bad flags still
// exit 2 before any port opens; a store that is unreachable, or a bucket that does not exist yet,
// leaves the sidecar serving (inline) within 2 s, reporting the store degraded, and writing to
// the store once it is there. The sidecars here forward to broker 1 of the shared cluster.

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function baseArgs(clientPort: number, adminPort: number | 'off'): string[] {
  const { ports } = inject('cluster');
  return [
    sidecarEntry(),
    'sidecar',
    '--broker-id=1',
    `--client-listen=127.0.0.1:${clientPort}`,
    // Broker 1's CLIENT listener (base + 11, e2e/src/cluster/ports.ts).
    `--client-upstream=127.0.0.1:${ports.base + 11}`,
    `--admin-listen=${adminPort === 'off' ? 'off' : `127.0.0.1:${adminPort}`}`,
    '--wal-topic=wal-*',
  ];
}

/** Runs `walproxy sidecar` with a WAL store and returns how it ended. */
function runToExit(extra: string[]) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [...baseArgs(1, 'off'), ...extra], {
      env: { ...process.env, ...walSidecarEnv() },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const guard = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(guard);
      resolve({ code, stderr });
    });
  });
}

interface Running {
  child: ChildProcess;
  clientPort: number;
  adminUrl: string;
  /** Milliseconds from spawn until the client ingress accepted a connection. */
  listeningAfterMs: number;
  logs: () => Array<{ level: string; msg: string }>;
}

/** Starts a sidecar and waits until its client ingress accepts connections. */
async function startSidecar(extra: string[]): Promise<Running> {
  const [clientPort, adminPort] = [await freePort(), await freePort()];
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [...baseArgs(clientPort, adminPort), ...extra], {
    env: { ...process.env, ...walSidecarEnv() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  for (;;) {
    const connected = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: clientPort });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (connected) break;
    if (child.exitCode !== null) throw new Error(`sidecar exited ${child.exitCode}:\n${out}`);
    if (performance.now() - spawnedAt > 30_000) throw new Error(`sidecar not listening after 30 s:\n${out}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const listeningAfterMs = performance.now() - spawnedAt;
  return {
    child,
    clientPort,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    listeningAfterMs,
    logs: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l)),
  };
}

async function readyz(
  s: Running,
): Promise<{ status: number; body: { ready: boolean; store?: Record<string, unknown> } }> {
  const response = await fetch(`${s.adminUrl}/readyz`);
  return {
    status: response.status,
    body: (await response.json()) as { ready: boolean; store?: Record<string, unknown> },
  };
}

async function storeHealthyGauge(s: Running): Promise<number | undefined> {
  const text = await (await fetch(`${s.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('walproxy_store_healthy'));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

/** The cluster's brokers, as a Metadata request through the sidecar answers them. */
async function brokersThrough(s: Running): Promise<number[]> {
  const admin = kafkaClient(`127.0.0.1:${s.clientPort}`).admin();
  await admin.connect();
  try {
    const cluster = await admin.describeCluster();
    return cluster.brokers.map((b) => b.nodeId).sort();
  } finally {
    await admin.disconnect();
  }
}

async function until<T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`not met in ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('WAL store problems at startup', () => {
  it('an invalid store URL is a bad flag: one clear error, exit 2', async () => {
    const { code, stderr } = await runToExit(['--wal-store-url=s3://Not_A_Bucket/wal']);
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/--wal-store-url: invalid object store URL .*is not a valid bucket name/);
  });

  it('an unreachable endpoint: serves within 2 s, reports degraded, and uses the store once it answers', async () => {
    // Given an S3 endpoint where nothing listens yet
    const { s3 } = inject('cluster');
    const storePort = await freePort();
    const s = await startSidecar([
      `--wal-store-url=s3://${s3.bucket}/startup-unreachable`,
      `--s3-endpoint=http://127.0.0.1:${storePort}`,
      '--s3-force-path-style=true',
    ]);
    console.log(`[startup] listening ${Math.round(s.listeningAfterMs)} ms after spawn, store unreachable`);

    // Then it listens within 2 s and answers through to the broker
    expect(s.listeningAfterMs).toBeLessThan(2_000);
    expect(await brokersThrough(s)).toEqual([1, 2, 3]);
    // And it is ready, with the store reported degraded and why
    const degraded = await until(
      () => readyz(s),
      (r) => typeof r.body.store?.lastError === 'string',
    );
    expect(degraded.status).toBe(200);
    expect(degraded.body).toMatchObject({ ready: true, store: { usable: false, state: 'degraded' } });
    expect(await storeHealthyGauge(s)).toBe(0);
    // And says so once, as an error naming the flag
    const errors = () => s.logs().filter((l) => l.level === 'error');
    expect(errors()).toHaveLength(1);
    expect(errors()[0]!.msg).toMatch(/^--wal-store-url: the object store is not usable: /);

    // When the store comes back (a forwarder to the S3 server appears on that port)
    const target = new URL(s3.endpoint);
    const forwarder = net.createServer((socket) => {
      const upstream = net.connect({ host: target.hostname, port: Number(target.port) });
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => forwarder.listen(storePort, '127.0.0.1', resolve));
    cleanups.push(() => forwarder.close());
    // Then the next probes find it usable
    const healthy = await until(
      () => readyz(s),
      (r) => r.body.store?.usable === true,
    );
    expect(healthy.body.store).toMatchObject({ state: 'healthy' });
    expect(await storeHealthyGauge(s)).toBe(1);
    expect(errors()).toHaveLength(1);
  });

  it('a bucket that does not exist: serves, reports degraded, and uses the bucket once it is created', async () => {
    // Given a bucket that does not exist on the S3 server
    const { s3 } = inject('cluster');
    const bucket = `startup-late-${Date.now()}`;
    const s = await startSidecar([
      `--wal-store-url=s3://${bucket}/wal`,
      `--s3-endpoint=${s3.endpoint}`,
      '--s3-force-path-style=true',
    ]);
    console.log(`[startup] listening ${Math.round(s.listeningAfterMs)} ms after spawn, bucket missing`);
    expect(s.listeningAfterMs).toBeLessThan(2_000);
    expect(await brokersThrough(s)).toEqual([1, 2, 3]);
    const degraded = await until(
      () => readyz(s),
      (r) => typeof r.body.store?.lastError === 'string',
    );
    expect(degraded.status).toBe(200);
    expect(String(degraded.body.store!.lastError)).toMatch(/no such bucket|NoSuchBucket|does not exist/i);
    const errors = s.logs().filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toMatch(
      /^--wal-store-url: the object store is not usable: .*(no such bucket|NoSuchBucket|does not exist)/i,
    );

    // When an operator creates the bucket
    const status = (await fetch(`${s3.endpoint}/${bucket}`, { method: 'PUT' })).status;
    expect(status).toBe(200);
    // Then the sidecar uses it, without a restart
    await until(
      () => readyz(s),
      (r) => r.body.store?.usable === true,
    );
    expect(await storeHealthyGauge(s)).toBe(1);
    expect(s.child.exitCode).toBeNull();
  });

  it('a directory that cannot be written: serves, reports degraded', async () => {
    const s = await startSidecar(['--wal-store-url=file:///proc/walproxy-cannot-write-here']);
    expect(await brokersThrough(s)).toEqual([1, 2, 3]);
    const degraded = await until(
      () => readyz(s),
      (r) => typeof r.body.store?.lastError === 'string',
    );
    expect(degraded.body).toMatchObject({ ready: true, store: { usable: false } });
  });
});
