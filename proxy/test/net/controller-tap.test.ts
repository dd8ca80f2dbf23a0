import net from 'node:net';
import {
  ApiKey,
  decodeBrokerHeartbeatRequest,
  decodeRequestHeader,
  encodeBrokerHeartbeatRequest,
  encodeBrokerHeartbeatResponse,
  encodeRequestHeader,
  encodeResponseHeader,
} from '@walproxy/shared';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { BrokerFence, FrameScanner } from '../../src/net/controller-tap.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';
import { ProxyListener } from '../../src/net/proxy-listener.js';

// The fake controller here answers only heartbeats, as the active KRaft controller does; the e2e
// rolling-restart test runs the same path in front of a real controller, whose log must show the
// fencing asked for and the broker unfenced again.

const NOT_CONTROLLER = 41;

function frame(parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const size = Buffer.alloc(4);
  size.writeInt32BE(body.length, 0);
  return Buffer.concat([size, body]);
}

function heartbeat(
  correlationId: number,
  fields: { wantFence?: boolean; wantShutDown?: boolean; apiVersion?: number } = {},
): Buffer {
  const apiVersion = fields.apiVersion ?? 2;
  return frame([
    encodeRequestHeader({
      apiKey: ApiKey.BrokerHeartbeat,
      apiVersion,
      correlationId,
      clientId: 'broker-1-heartbeat',
    }),
    encodeBrokerHeartbeatRequest(
      {
        brokerId: 1,
        brokerEpoch: 42n,
        currentMetadataOffset: 1000n + BigInt(correlationId),
        wantFence: fields.wantFence ?? false,
        wantShutDown: fields.wantShutDown ?? false,
      },
      apiVersion,
    ),
  ]);
}

/** Another request the broker sends on the same connection (an AlterPartition-sized blob). */
function otherRequest(correlationId: number, payloadBytes: number): Buffer {
  return frame([
    encodeRequestHeader({ apiKey: ApiKey.AlterPartition, apiVersion: 3, correlationId, clientId: 'b' }),
    Buffer.alloc(payloadBytes, 7),
  ]);
}

function heartbeatResponse(correlationId: number, answer: { errorCode?: number; isFenced: boolean }): Buffer {
  return frame([
    encodeResponseHeader({ correlationId }, 1),
    encodeBrokerHeartbeatResponse(
      {
        throttleTimeMs: 0,
        errorCode: answer.errorCode ?? 0,
        isCaughtUp: true,
        isFenced: answer.isFenced,
        shouldShutDown: false,
      },
      1,
    ),
  ]);
}

interface Seen {
  correlationId: number;
  apiKey: number;
  wantFence?: boolean;
  wantShutDown?: boolean;
}

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A controller that answers heartbeats as KRaft's does: a broker asking WantFence is fenced
 * from then on, one asking without it is unfenced. `refuse` answers the next N with an error.
 */
async function fakeController(options: { refuseFirstWantFence?: number; bigResponseBytes?: number } = {}) {
  const seen: Seen[] = [];
  let fenced = false;
  let refusals = options.refuseFirstWantFence ?? 0;
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    const decoder = new FrameDecoder(1 << 26);
    socket.on('data', (chunk) => {
      for (const withSize of decoder.push(chunk)) {
        const f = withSize.subarray(4);
        const header = decodeRequestHeader(f);
        if (header.apiKey !== ApiKey.BrokerHeartbeat || header.apiVersion > 2) {
          seen.push({ correlationId: header.correlationId, apiKey: header.apiKey });
          // Any other request: a large answer, as a metadata fetch's may be.
          socket.write(
            frame([
              encodeResponseHeader({ correlationId: header.correlationId }, 1),
              Buffer.alloc(options.bigResponseBytes ?? 16, 3),
            ]),
          );
          continue;
        }
        const hb = decodeBrokerHeartbeatRequest(f.subarray(header.headerLength), header.apiVersion);
        seen.push({
          correlationId: header.correlationId,
          apiKey: header.apiKey,
          wantFence: hb.wantFence,
          wantShutDown: hb.wantShutDown,
        });
        if (hb.wantFence && refusals > 0) {
          refusals--;
          socket.write(
            heartbeatResponse(header.correlationId, { errorCode: NOT_CONTROLLER, isFenced: false }),
          );
          continue;
        }
        fenced = hb.wantFence;
        socket.write(heartbeatResponse(header.correlationId, { isFenced: fenced }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as net.AddressInfo).port, seen, isFenced: () => fenced };
}

async function controllerPath(controllerPort: number) {
  const log = createLogger('silent');
  const fence = new BrokerFence(log);
  const listener = new ProxyListener({
    name: 'controller-9',
    listen: { host: '127.0.0.1', port: 0 },
    upstream: { host: '127.0.0.1', port: controllerPort },
    maxFrameBytes: 1024,
    maxBufferedBytes: 1 << 20,
    filters: [],
    opaque: true,
    fence,
    log,
  });
  await listener.start();
  cleanups.push(() => listener.drain(0));
  return { fence, listener };
}

/** The broker's side of the connection: what it receives, as frames. */
async function broker(port: number) {
  const socket = net.connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const decoder = new FrameDecoder(1 << 26);
  const received: Buffer[] = [];
  socket.on('data', (chunk) => received.push(...decoder.push(chunk)));
  socket.on('error', () => undefined);
  cleanups.push(() => socket.destroy());
  return { socket, received, correlationIds: () => received.map((f) => f.readInt32BE(4)) };
}

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Writes `bytes` in pieces of `step`, each a separate write, so frames straddle reads. */
async function writeInPieces(socket: net.Socket, bytes: Buffer, step: number): Promise<void> {
  for (let i = 0; i < bytes.length; i += step) {
    socket.write(bytes.subarray(i, i + step));
    await new Promise((r) => setImmediate(r));
  }
}

describe('FrameScanner', () => {
  it('passes every byte on unchanged however frames are split, holding whole only the frames it asks for', () => {
    const held: Buffer[] = [];
    const scanner = new FrameScanner(
      6,
      (head) => head.readInt16BE(4) === ApiKey.BrokerHeartbeat,
      (f) => {
        held.push(Buffer.from(f));
        return f;
      },
    );
    const stream = Buffer.concat([
      heartbeat(1),
      otherRequest(2, 300_000),
      heartbeat(3),
      otherRequest(4, 5),
      heartbeat(5, { apiVersion: 0 }),
    ]);
    for (const step of [1, 3, 7, 64, 4096, stream.length]) {
      held.length = 0;
      const out: Buffer[] = [];
      for (let i = 0; i < stream.length; i += step) scanner.push(stream.subarray(i, i + step), out);
      expect(Buffer.concat(out).equals(stream), `step ${step}`).toBe(true);
      expect(
        held.map((f) => f.readInt32BE(8)),
        `step ${step}`,
      ).toEqual([1, 3, 5]);
      expect(scanner.atBoundary).toBe(true);
    }
  });

  it('lets bytes that are not Kafka framing (a TLS record) pass unread for the rest of the stream', () => {
    let asked = 0;
    const scanner = new FrameScanner(
      6,
      () => {
        asked++;
        return true;
      },
      (f) => f,
    );
    // A TLS ClientHello's first bytes read as a size of ~370 MB
    const tls = Buffer.concat([
      Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]),
      Buffer.alloc(600, 9),
      heartbeat(1),
    ]);
    const out: Buffer[] = [];
    scanner.push(tls.subarray(0, 100), out);
    scanner.push(tls.subarray(100), out);
    expect(Buffer.concat(out).equals(tls)).toBe(true);
    expect(scanner.unframed).toBe(true);
    expect(asked).toBe(0);
  });
});

describe('BrokerFence on the controller path', () => {
  it('passes the conversation through unchanged until a stop asks', async () => {
    const controller = await fakeController({ bigResponseBytes: 200_000 });
    const { fence, listener } = await controllerPath(controller.port);
    const b = await broker(listener.address.port);
    const requests = Buffer.concat([heartbeat(0), otherRequest(1, 70_000), heartbeat(2)]);
    await writeInPieces(b.socket, requests, 1000);
    await until(() => b.received.length === 3);
    expect(b.correlationIds()).toEqual([0, 1, 2]);
    expect(controller.seen.map((s) => s.wantFence)).toEqual([false, undefined, false]);
    expect(controller.isFenced()).toBe(false);
    expect(fence.broker).toEqual({ id: 1, epoch: 42n });
    expect(listener.counters.bytesToUpstream).toBe(requests.length);
  });

  it('at a stop, asks the controller to fence the broker on its heartbeat connection, hides the answer from it, and keeps every later heartbeat fencing', async () => {
    const controller = await fakeController();
    const { fence, listener } = await controllerPath(controller.port);
    const b = await broker(listener.address.port);
    b.socket.write(heartbeat(0));
    await until(() => b.received.length === 1);

    // When a stop asks for the fence
    const outcome = await fence.fence(2_000);

    // Then the controller got a heartbeat of the sidecar's own saying WantFence, and fenced the broker
    expect(outcome).toMatchObject({ fenced: true, by: 'sidecar heartbeat' });
    expect(controller.isFenced()).toBe(true);
    expect(controller.seen.at(-1)).toMatchObject({
      apiKey: ApiKey.BrokerHeartbeat,
      wantFence: true,
      wantShutDown: false,
    });
    expect(controller.seen.at(-1)!.correlationId).toBeLessThan(0);
    // And the broker never saw an answer it did not ask for
    await new Promise((r) => setTimeout(r, 50));
    expect(b.correlationIds()).toEqual([0]);

    // And the broker's own next heartbeat (WantFence false) is sent on with WantFence, so it
    // cannot unfence itself while the sidecar drains; its answer reaches it
    b.socket.write(heartbeat(1));
    await until(() => b.received.length === 2);
    expect(controller.seen.at(-1)).toMatchObject({ correlationId: 1, wantFence: true });
    expect(controller.isFenced()).toBe(true);
    expect(fence.stats.heartbeatsRewritten).toBe(1);
    // But a controlled shutdown of the broker's own is left as it is
    b.socket.write(heartbeat(2, { wantShutDown: true }));
    await until(() => b.received.length === 3);
    expect(controller.seen.at(-1)).toMatchObject({ correlationId: 2, wantFence: false, wantShutDown: true });
  });

  it('injects between two frames, never inside a frame the broker is still sending', async () => {
    const controller = await fakeController();
    const { fence, listener } = await controllerPath(controller.port);
    const b = await broker(listener.address.port);
    b.socket.write(heartbeat(0));
    await until(() => b.received.length === 1);
    // Given a large request of the broker's half sent
    const big = otherRequest(1, 100_000);
    b.socket.write(big.subarray(0, 50_000));
    await new Promise((r) => setTimeout(r, 50));
    // When the fence is asked meanwhile, then the rest of the request follows
    const fencing = fence.fence(2_000);
    await new Promise((r) => setTimeout(r, 50));
    b.socket.write(big.subarray(50_000));
    // Then the controller read the broker's request whole, then the sidecar's heartbeat
    expect(await fencing).toMatchObject({ fenced: true });
    expect(controller.seen.map((s) => s.apiKey)).toEqual([
      ApiKey.BrokerHeartbeat,
      ApiKey.AlterPartition,
      ApiKey.BrokerHeartbeat,
    ]);
    await until(() => b.received.length === 2);
    expect(b.correlationIds()).toEqual([0, 1]);
  });

  it("falls back to the broker's own next heartbeat when the controller refuses the sidecar's (NOT_CONTROLLER)", async () => {
    const controller = await fakeController({ refuseFirstWantFence: 1 });
    const { fence, listener } = await controllerPath(controller.port);
    const b = await broker(listener.address.port);
    b.socket.write(heartbeat(0));
    await until(() => b.received.length === 1);
    const fencing = fence.fence(2_000);
    await until(() => fence.stats.fenceRefusals === 1);
    b.socket.write(heartbeat(1));
    expect(await fencing).toMatchObject({ fenced: true, by: 'broker heartbeat' });
    expect(controller.isFenced()).toBe(true);
  });

  it('leaves a heartbeat of a version it does not know untouched and unread (a later one could move WantFence)', async () => {
    const controller = await fakeController();
    const { fence, listener } = await controllerPath(controller.port);
    const b = await broker(listener.address.port);
    // A v2 heartbeat whose header says v3
    const future = heartbeat(0);
    future.writeInt16BE(3, 6);
    b.socket.write(future);
    await until(() => controller.seen.length === 1);
    expect(fence.broker).toBeUndefined();
    expect(await fence.fence(200)).toMatchObject({
      fenced: false,
      reason: expect.stringContaining('no heartbeat'),
    });
  });

  it('asks nothing when no heartbeat went through (the broker stopped first, or never registered), and gives up after its timeout', async () => {
    const controller = await fakeController({ refuseFirstWantFence: 100 });
    const { fence, listener } = await controllerPath(controller.port);
    expect(await fence.fence(1_000)).toMatchObject({ fenced: false });
    expect(controller.seen).toEqual([]);

    const b = await broker(listener.address.port);
    b.socket.write(heartbeat(0));
    await until(() => b.received.length === 1);
    const outcome = await fence.fence(200);
    expect(outcome).toMatchObject({ fenced: false });
    expect(outcome.ms).toBeGreaterThanOrEqual(190);

    b.socket.destroy();
    await until(() => listener.counters.connectionsActive === 0);
    expect(await fence.fence(1_000)).toMatchObject({
      fenced: false,
      reason: expect.stringContaining('no heartbeat'),
    });
  });
});
