import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision } from '../../src/net/frame-filter.js';
import { ProxyListener } from '../../src/net/proxy-listener.js';

// Requests whose filter decides later (a promise): a zone-local produce waits for its store write
// before it goes upstream. The upstream here is a stand-in that records the order requests reach
// it and answers each with its correlation id; what is tested is the pipe's ordering.

const METADATA = 3;
/** Requests with this key are decided by the test's filter, when the test says so. */
const HELD = 60;

function request(correlationId: number, apiKey = METADATA, payload = Buffer.alloc(0)): Buffer {
  const frame = Buffer.alloc(14 + payload.length);
  frame.writeInt32BE(10 + payload.length, 0);
  frame.writeInt16BE(apiKey, 4);
  frame.writeInt16BE(1, 6);
  frame.writeInt32BE(correlationId, 8);
  frame.writeInt16BE(-1, 12);
  payload.copy(frame, 14);
  return frame;
}

function response(correlationId: number, tag = 'up'): Buffer {
  const payload = Buffer.from(tag);
  const frame = Buffer.alloc(8 + payload.length);
  frame.writeInt32BE(4 + payload.length, 0);
  frame.writeInt32BE(correlationId, 4);
  payload.copy(frame, 8);
  return frame;
}

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An upstream that records each request's correlation id as it arrives and answers it at once. */
async function recordingUpstream(): Promise<{ port: number; arrived: number[] }> {
  const arrived: number[] = [];
  const server = net.createServer((socket) => {
    const decoder = new FrameDecoder(1 << 26);
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) {
        const id = frame.readInt32BE(8);
        arrived.push(id);
        // A correlation id below zero stands for a request the broker never answers (acks=0).
        if (id >= 0) socket.write(response(id));
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as net.AddressInfo).port, arrived };
}

/** A filter whose HELD requests are decided when the test calls `decide(correlationId, decision)`. */
function heldFilter() {
  const waiting = new Map<
    number,
    { frame: Buffer; settle: (d: RequestDecision) => void; fail: () => void }
  >();
  const filter: FrameFilter = {
    apiKeys: new Set([HELD]),
    onRequest: (info, frame) =>
      new Promise<RequestDecision>((resolve, reject) => {
        waiting.set(info.correlationId, { frame, settle: resolve, fail: () => reject(new Error('no')) });
      }),
  };
  const entry = (id: number) => {
    const found = waiting.get(id);
    if (!found) throw new Error(`request ${id} was not handed to the filter`);
    return found;
  };
  return {
    filter,
    waiting,
    forward: (id: number, expectResponse = true) =>
      entry(id).settle({ action: 'forward', frame: entry(id).frame, expectResponse }),
    respond: (id: number) => entry(id).settle({ action: 'respond', response: response(id, 'local') }),
    fail: (id: number) => entry(id).fail(),
  };
}

async function start(filter: FrameFilter | FrameFilter[], upstreamPort: number, maxBufferedBytes = 1 << 20) {
  const listener = new ProxyListener({
    name: 'client',
    listen: { host: '127.0.0.1', port: 0 },
    upstream: { host: '127.0.0.1', port: upstreamPort },
    maxFrameBytes: 1 << 24,
    maxBufferedBytes,
    filters: Array.isArray(filter) ? filter : [filter],
    log: createLogger('silent'),
  });
  await listener.start();
  cleanups.push(() => listener.drain(0));
  const socket = net.connect({ host: '127.0.0.1', port: listener.address.port });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const decoder = new FrameDecoder(1 << 26);
  const frames: Buffer[] = [];
  let closed = false;
  socket.on('data', (chunk) => frames.push(...decoder.push(chunk)));
  socket.on('close', () => {
    closed = true;
  });
  socket.on('error', () => undefined);
  cleanups.push(() => socket.destroy());
  const answers = () => frames.map((f) => `${f.readInt32BE(4)}:${f.subarray(8).toString()}`);
  return { listener, socket, answers, isClosed: () => closed };
}

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const settle = () => new Promise((r) => setTimeout(r, 50));

/** `frame` with `tag` appended, its size prefix grown to match. */
function tagged(frame: Buffer, tag: string): Buffer {
  const out = Buffer.concat([frame, Buffer.from(tag)]);
  out.writeInt32BE(out.length - 4, 0);
  return out;
}

describe('ConnectionPipe, the filter chain', () => {
  it('runs every filter that claims a key, requests in the declared order and responses in reverse', async () => {
    // Given a listener whose two filters both claim Metadata, listed downstream side first
    const upstream = await recordingUpstream();
    const seen: string[] = [];
    const tagging = (name: string): FrameFilter => ({
      apiKeys: new Set([METADATA]),
      onRequest: (_info, frame) => {
        seen.push(`${name}:request`);
        return { action: 'forward', frame, expectResponse: true };
      },
      onResponse: (_info, frame) => {
        seen.push(`${name}:response`);
        return tagged(frame, name);
      },
    });
    const c = await start([tagging('A'), tagging('B')], upstream.port);
    // When a Metadata request and its answer pass
    c.socket.write(request(1));
    await until(() => c.answers().length === 1);
    // Then both filters saw both, the one nearest the upstream first on the way back
    expect(seen).toEqual(['A:request', 'B:request', 'B:response', 'A:response']);
    expect(c.answers()).toEqual(['1:upBA']);
  });
});

describe('ConnectionPipe, requests decided later', () => {
  it('tells each filter once that a connection closed, naming the connection its requests came with', async () => {
    const upstream = await recordingUpstream();
    const seen: FilterConnection[] = [];
    const closed: FilterConnection[] = [];
    const filter: FrameFilter = {
      apiKeys: new Set([HELD]),
      onRequest: (_info, frame, connection) => {
        seen.push(connection);
        return { action: 'forward', frame, expectResponse: true };
      },
      onClose: (connection) => closed.push(connection),
    };
    const c = await start(filter, upstream.port);
    c.socket.write(Buffer.concat([request(1, HELD), request(2, HELD)]));
    await until(() => c.answers().length === 2);
    expect(closed).toEqual([]);
    // When the client goes away
    c.socket.destroy();
    await until(() => closed.length > 0);
    await settle();
    // Then the filter hears of it once, about the very connection it saw
    expect(closed).toHaveLength(1);
    expect(closed[0]).toBe(seen[0]);
    expect(seen[1]).toBe(seen[0]);
  });

  it('forwards the requests behind a pending decision only after it, in arrival order', async () => {
    const upstream = await recordingUpstream();
    const held = heldFilter();
    const c = await start(held.filter, upstream.port);
    // Given a held request followed by two ordinary ones
    c.socket.write(Buffer.concat([request(1, HELD), request(2), request(3)]));
    await until(() => held.waiting.has(1));
    await settle();
    // Then nothing went upstream while the first is undecided
    expect(upstream.arrived).toEqual([]);
    // When it is decided
    held.forward(1);
    // Then all three go upstream in the order they were sent, and the answers come back in it
    await until(() => c.answers().length === 3);
    expect(upstream.arrived).toEqual([1, 2, 3]);
    expect(c.answers()).toEqual(['1:up', '2:up', '3:up']);
  });

  it('decides later requests at once, while forwarding in arrival order however the decisions finish', async () => {
    const upstream = await recordingUpstream();
    const held = heldFilter();
    const c = await start(held.filter, upstream.port);
    // Given two held requests, both handed to the filter before either is decided
    c.socket.write(Buffer.concat([request(1, HELD), request(2, HELD)]));
    await until(() => held.waiting.has(1) && held.waiting.has(2));
    // When the second is decided first
    held.forward(2);
    await settle();
    expect(upstream.arrived).toEqual([]);
    held.forward(1);
    // Then the upstream still sees the first before the second
    await until(() => c.answers().length === 2);
    expect(upstream.arrived).toEqual([1, 2]);
  });

  it('answers a request decided locally in its place among the upstream answers', async () => {
    const upstream = await recordingUpstream();
    const held = heldFilter();
    const c = await start(held.filter, upstream.port);
    c.socket.write(Buffer.concat([request(1), request(2, HELD), request(3)]));
    await until(() => held.waiting.has(2));
    held.respond(2);
    await until(() => c.answers().length === 3);
    expect(c.answers()).toEqual(['1:up', '2:local', '3:up']);
    expect(upstream.arrived).toEqual([1, 3]);
  });

  it('keeps no response slot for a request decided to go up without one (acks=0)', async () => {
    const upstream = await recordingUpstream();
    const held = heldFilter();
    const c = await start(held.filter, upstream.port);
    c.socket.write(Buffer.concat([request(-5, HELD), request(6)]));
    await until(() => held.waiting.has(-5));
    held.forward(-5, false);
    // The later response is not kept waiting for an answer that never comes
    await until(() => c.answers().length === 1);
    expect(c.answers()).toEqual(['6:up']);
    expect(upstream.arrived).toEqual([-5, 6]);
  });

  it('closes the connection when a decision fails', async () => {
    const upstream = await recordingUpstream();
    const held = heldFilter();
    const c = await start(held.filter, upstream.port);
    c.socket.write(Buffer.concat([request(1, HELD), request(2)]));
    await until(() => held.waiting.has(1));
    held.fail(1);
    await until(c.isClosed);
    expect(c.listener.counters.closedForProtocolError).toBe(1);
    expect(upstream.arrived).toEqual([]);
  });

  it('stops reading the downstream while the requests waiting for a decision pass the buffer bound', async () => {
    const upstream = await recordingUpstream();
    const held = heldFilter();
    const c = await start(held.filter, upstream.port, 64 * 1024);
    // Given a held request that stays undecided, and 32 MiB of requests behind it
    c.socket.write(request(1, HELD));
    await until(() => held.waiting.has(1));
    const big = Buffer.alloc(256 * 1024);
    for (let i = 0; i < 128; i++) c.socket.write(request(100 + i, METADATA, big));
    await new Promise((r) => setTimeout(r, 500));
    // Then the sidecar read only a bounded part of them (the bound, one chunk, the kernel's buffers)
    expect(c.listener.counters.bytesFromDownstream).toBeLessThan(16 << 20);
    // And once the decision comes, every request goes up and is answered, in order
    held.forward(1);
    await until(() => c.answers().length === 129, 20_000);
    expect(upstream.arrived).toEqual([1, ...Array.from({ length: 128 }, (_, i) => 100 + i)]);
  });

  it('on drain, waits for a pending decision and delivers its answer before closing', async () => {
    const upstream = await recordingUpstream();
    const held = heldFilter();
    const c = await start(held.filter, upstream.port);
    c.socket.write(request(1, HELD));
    await until(() => held.waiting.has(1));
    const drained = c.listener.drain(5_000);
    setTimeout(() => held.forward(1), 100);
    expect(await drained).toBe(0);
    // The drain ends once the answer is handed to the kernel; the client reads it before our FIN.
    await until(c.isClosed);
    expect(c.answers()).toEqual(['1:up']);
  });
});

describe("ConnectionPipe, the sidecar's own requests (FilterConnection.sendUpstream)", () => {
  /** An upstream that answers every request, negative correlation ids included, in order. */
  async function answeringUpstream(): Promise<{ port: number; arrived: number[]; sockets: net.Socket[] }> {
    const arrived: number[] = [];
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => {
      sockets.push(socket);
      const decoder = new FrameDecoder(1 << 26);
      socket.on('data', (chunk) => {
        for (const frame of decoder.push(chunk)) {
          const id = frame.readInt32BE(8);
          arrived.push(id);
          socket.write(response(id, id < 0 ? 'own' : 'up'));
        }
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return { port: (server.address() as net.AddressInfo).port, arrived, sockets };
  }

  it('pairs its response with it, hands it to the filter alone, and keeps the downstream answers in order', async () => {
    // Given a filter that, on the response to request 1, asks the upstream twice on its own
    const upstream = await answeringUpstream();
    const own: string[] = [];
    let connection: FilterConnection | undefined;
    const filter: FrameFilter = {
      apiKeys: new Set([METADATA]),
      onRequest: (_info, frame, c) => {
        connection = c;
        return { action: 'forward', frame, expectResponse: true };
      },
      onResponse: async (info, frame) => {
        if (info.correlationId !== 1) return frame;
        for (const id of [-5, -6]) {
          const answer = await connection!.sendUpstream!(request(id), id);
          own.push(`${answer.readInt32BE(4)}:${answer.subarray(8).toString()}`);
        }
        return tagged(frame, '+asked');
      },
    };
    const c = await start(filter, upstream.port);
    // When the client sends requests 1 and 2 back to back
    c.socket.write(Buffer.concat([request(1), request(2)]));
    await until(() => c.answers().length === 2);
    // Then the filter got its own answers, the client only its own, in its order
    expect(own).toEqual(['-5:own', '-6:own']);
    expect(c.answers()).toEqual(['1:up+asked', '2:up']);
    expect(upstream.arrived).toEqual([1, 2, -5, -6]);
  });

  it('rejects a request of its own whose connection closes before the answer', async () => {
    // Given an upstream that never answers negative ids and closes on the test's word
    const upstream = await recordingUpstream();
    let connection: FilterConnection | undefined;
    const filter: FrameFilter = {
      apiKeys: new Set([METADATA]),
      onRequest: (_info, frame, c) => {
        connection = c;
        return { action: 'forward', frame, expectResponse: true };
      },
    };
    const c = await start(filter, upstream.port);
    c.socket.write(request(1));
    await until(() => c.answers().length === 1);
    const pending = connection!.sendUpstream!(request(-9), -9);
    await until(() => upstream.arrived.includes(-9));
    // When the client goes away
    c.socket.destroy();
    // Then the caller hears so
    await expect(pending).rejects.toThrow(/closed/);
  });
});
