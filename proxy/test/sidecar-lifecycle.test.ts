import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../src/config/sidecar-config.js';
import { createLogger } from '../src/log.js';
import { FrameDecoder } from '../src/net/frame-decoder.js';
import { Sidecar } from '../src/sidecar.js';
import { TELEMETRY_STOP_TIMEOUT_MS } from '../src/telemetry/telemetry.js';
import { echoRequest } from './net/echo-broker.js';

// A Sidecar wired from flags in front of fake brokers and a fake controller, for what the order of
// a stop and a start without a store look like from the sockets. The e2e suite runs the same
// against real brokers (e2e/test/sidecar-restart.test.ts, lifecycle-*.test.ts).

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

/**
 * A broker stand-in that answers each request frame with its payload; while `hold` is set,
 * answers wait until `release()`.
 */
async function fakeBroker() {
  let held: Array<() => void> = [];
  let hold = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    const decoder = new FrameDecoder(1 << 20);
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) {
        const payload = frame.subarray(14);
        const out = Buffer.alloc(8 + payload.length);
        out.writeInt32BE(4 + payload.length, 0);
        out.writeInt32BE(frame.readInt32BE(8), 4);
        payload.copy(out, 8);
        if (hold) held.push(() => socket.write(out));
        else socket.write(out);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    holdResponses: () => {
      hold = true;
    },
    release: () => {
      hold = false;
      for (const send of held) send();
      held = [];
    },
  };
}

/** A controller stand-in: echoes raw bytes. */
async function fakeController() {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return (server.address() as net.AddressInfo).port;
}

interface Peer {
  socket: net.Socket;
  frames: Buffer[];
  closedAt: () => number | undefined;
}

/** A downstream peer; `raw`: bytes are not Kafka frames (the controller path), so none are decoded. */
async function connect(port: number, { raw = false } = {}): Promise<Peer> {
  const socket = net.connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  const decoder = new FrameDecoder(1 << 20);
  const frames: Buffer[] = [];
  let closedAt: number | undefined;
  socket.on('data', (chunk) => {
    if (raw) frames.push(chunk);
    else frames.push(...decoder.push(chunk));
  });
  socket.on('close', () => {
    closedAt ??= performance.now();
  });
  socket.on('error', () => undefined);
  cleanups.push(() => socket.destroy());
  return { socket, frames, closedAt: () => closedAt };
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

async function until(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function capturingLog() {
  const lines: Array<{ level: string; msg: string }> = [];
  const log = createLogger('debug', { write: (line: string) => lines.push(JSON.parse(line)) });
  return { log, lines };
}

async function sidecar(
  extra: Record<string, unknown> = {},
  telemetry: ConstructorParameters<typeof Sidecar>[3] = {},
) {
  const client = await fakeBroker();
  const replication = await fakeBroker();
  const controller = await fakeController();
  const ports = {
    client: await freePort(),
    replication: await freePort(),
    controllerBase: (await freePort()) - 100,
  };
  const parsed = parseSidecarConfig({
    'broker-id': '1',
    'client-listen': `127.0.0.1:${ports.client}`,
    'client-upstream': `127.0.0.1:${client.port}`,
    'replication-listen': `127.0.0.1:${ports.replication}`,
    'replication-upstream': `127.0.0.1:${replication.port}`,
    'controller-listen-base': String(ports.controllerBase),
    'controller-address': `100=127.0.0.1:${controller}`,
    'admin-listen': 'off',
    ...extra,
  });
  if (!('config' in parsed)) throw new Error(parsed.errors.join('\n'));
  const { log, lines } = capturingLog();
  const instance = new Sidecar(parsed.config, log, undefined, telemetry);
  cleanups.push(() => instance.stop(0));
  await instance.start();
  return { instance, client, replication, ports, lines };
}

describe('Sidecar stop', () => {
  it('drains the clients first while replication serves and accepts reconnects, and the controller path closes last', async () => {
    // Given a client with an acks=all produce in flight (its broker answers once followers fetched)
    const s = await sidecar();
    s.client.holdResponses();
    const producer = await connect(s.ports.client);
    producer.socket.write(echoRequest(1, Buffer.from('produce')));
    const follower = await connect(s.ports.replication);
    const controllerPort = s.ports.controllerBase + 100;
    const broker = await connect(controllerPort, { raw: true });
    await until(() => s.instance.counters().listeners.client!.bytesToUpstream > 0);

    // When the sidecar is told to stop
    const stopped = s.instance.stop(10_000);

    // Then it logs what was in flight when the stop began
    await until(() => s.lines.some((l) => l.msg.startsWith('draining')));
    expect(s.lines.find((l) => l.msg.startsWith('draining'))).toMatchObject({
      inFlight: { client: { Metadata: 1 } },
    });
    // And the client ingress takes no new connection
    await until(() => !s.instance.listeners[0]!.isAccepting);
    expect(await refused(s.ports.client)).toBe(true);
    // While the replication ingress still serves its follower and takes a reconnect, and the
    // broker's controller connection still carries bytes
    follower.socket.write(echoRequest(2, Buffer.from('fetch')));
    await until(() => follower.frames.length === 1);
    const reconnected = await connect(s.ports.replication);
    reconnected.socket.write(echoRequest(3, Buffer.from('fetch again')));
    await until(() => reconnected.frames.length === 1);
    broker.socket.write(Buffer.from('heartbeat bytes'));
    await until(() => Buffer.concat(broker.frames).toString() === 'heartbeat bytes');
    expect(producer.closedAt()).toBeUndefined();

    // When the broker answers the produce (its followers fetched)
    s.client.release();
    await stopped;

    // Then the producer got its answer before its connection closed
    await until(() => [producer, follower, reconnected, broker].every((p) => p.closedAt() !== undefined));
    expect(producer.frames.map((f) => f.readInt32BE(4))).toEqual([1]);
    // And the sidecar closed the paths in order: client, then replication, then the controller
    const closedBy = s.lines
      .filter((l) => l.msg === 'connection closed')
      .map((l) => (l as unknown as { listener: string }).listener);
    expect(closedBy).toEqual(['client', 'replication', 'replication', 'controller-100']);
    expect(s.lines.find((l) => l.msg === 'sidecar stopped')).toMatchObject({
      forcedClosed: 0,
      clientsForcedClosed: 0,
      replicationForcedClosed: 0,
    });
  });
});

describe('Sidecar memory bounds', () => {
  it("gives the follower's read cache its share of --memory-limit-bytes, not the reader's own default", async () => {
    // Given a WAL sidecar with a 256 MiB memory limit (the read cache's 12 % share: 30.7 MiB)
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-bounds-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const s = await sidecar({
      'wal-store-url': `file://${dir}`,
      'wal-topic': 'wal-*',
      'memory-limit-bytes': String(256 * 1024 * 1024),
    });

    // Then the reader it built keeps to that share, and the bounds it logs are the applied ones
    const bounds = s.lines.find((l) => l.msg === 'memory bounds') as unknown as { readCacheMiB: number };
    expect(bounds.readCacheMiB).toBe(30.7);
  });

  it("asks for V8's initial old generation when node was started without it, and not when it was", async () => {
    const oldGenerationWarning = (lines: ReadonlyArray<{ msg: string }>) =>
      lines.find((l) => l.msg.includes('start node with --initial-old-space-size'));
    // Given a sidecar with a 256 MiB limit, in this process (node started without the flag)
    const bare = await sidecar({ 'memory-limit-bytes': String(256 * 1024 * 1024) });
    // Then it names the flag and its value (22 % of the limit), and logs that none was given
    expect(oldGenerationWarning(bare.lines)).toMatchObject({ level: 'warn', initialOldSpaceMiB: 56.3 });
    expect(bare.lines.find((l) => l.msg === 'memory bounds')).toMatchObject({ v8InitialOldSpaceMiB: null });

    // Given node's command line with the flag
    process.execArgv.push('--initial-old-space-size=56');
    cleanups.push(() => {
      process.execArgv.splice(process.execArgv.indexOf('--initial-old-space-size=56'), 1);
    });
    const configured = await sidecar({ 'memory-limit-bytes': String(256 * 1024 * 1024) });
    // Then it does not warn, and logs what node was given
    expect(oldGenerationWarning(configured.lines)).toBeUndefined();
    expect(configured.lines.find((l) => l.msg === 'memory bounds')).toMatchObject({
      v8InitialOldSpaceMiB: 56,
    });
  });
});

describe('Sidecar start without a usable store', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('serves at once, reports degraded with one error line naming --wal-store-url, and turns healthy once the store exists', async () => {
    // Given a WAL store whose directory does not exist yet
    dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-lifecycle-'));
    const root = path.join(dir, 'wal');
    const s = await sidecar({ 'wal-store-url': `file://${root}`, 'wal-topic': 'wal-*' });

    // Then it serves: a request goes through to the broker and back
    const c = await connect(s.ports.client);
    c.socket.write(echoRequest(5, Buffer.from('inline')));
    await until(() => c.frames.length === 1);
    expect(s.lines.find((l) => l.msg === 'sidecar ready')).toMatchObject({ store: 'degraded' });
    // And the store is reported degraded, with the reason, logged once however often it is probed
    await until(() => (s.instance.storeReport()?.probeFailures ?? 0) >= 2);
    expect(s.instance.storeReport()).toMatchObject({ usable: false, state: 'degraded' });
    expect(s.instance.storeReport()?.lastError).toContain(root);
    const errors = s.lines.filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toMatch(/^--wal-store-url: the object store is not usable: .*replicates inline/);

    // When the operator creates the directory
    mkdirSync(root);
    // Then the next probe finds it usable
    await until(() => s.instance.storeReport()?.usable === true);
    expect(s.instance.storeReport()?.lastError).toBeUndefined();
  });

  it('starts and stops promptly while the store does not answer at all', async () => {
    // Given an S3 endpoint that accepts connections and never answers (a frozen store)
    const frozen = net.createServer((socket) => socket.on('error', () => undefined));
    await new Promise<void>((resolve) => frozen.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      frozen.close();
    });
    const endpoint = `http://127.0.0.1:${(frozen.address() as net.AddressInfo).port}`;
    process.env.AWS_ACCESS_KEY_ID ??= 'test';
    process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
    const s = await sidecar({
      'wal-store-url': 's3://frozen/wal',
      's3-endpoint': endpoint,
      's3-force-path-style': 'true',
      's3-region': 'us-east-1',
      'wal-topic': 'wal-*',
    });
    // Then it serves while the probe waits
    const c = await connect(s.ports.client);
    c.socket.write(echoRequest(6, Buffer.from('served')));
    await until(() => c.frames.length === 1);
    // And the probe's timeout is the reason reported
    await until(() => (s.instance.storeReport()?.probeFailures ?? 0) >= 1);
    expect(s.instance.storeReport()?.lastError).toMatch(/did not answer within/);
    // And a stop returns although the store never answers (its calls are abandoned)
    await s.instance.stop(1_000);
    expect(s.lines.find((l) => l.msg === 'sidecar stopped')).toBeDefined();
  });

  it('does not wait on a hung OTLP collector longer than the telemetry stop bound', async () => {
    // Given a sidecar exporting over OTLP to a collector that accepts and never answers
    const hung = new Set<net.Socket>();
    const collector = net.createServer((socket) => {
      hung.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      for (const socket of hung) socket.destroy();
      collector.close();
    });
    const otlpEndpoint = `http://127.0.0.1:${(collector.address() as net.AddressInfo).port}`;
    const s = await sidecar({}, { otlpEndpoint });
    // When it stops (nothing to drain)
    const began = performance.now();
    await s.instance.stop(0);
    const tookMs = performance.now() - began;
    // Then the stop ends at the telemetry's bound, not at the exporter's 10 s, and says why
    expect(tookMs).toBeLessThan(TELEMETRY_STOP_TIMEOUT_MS + SCHEDULING_SLACK_MS);
    expect(s.lines.find((l) => l.msg === 'sidecar stopped')).toBeDefined();
    expect(s.lines.find((l) => l.msg.includes('telemetry shutdown abandoned'))).toBeDefined();
  });
});

/** Timers and the event loop on a loaded machine: what a bound may be overrun by. */
const SCHEDULING_SLACK_MS = 500;
