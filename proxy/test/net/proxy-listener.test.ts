import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';
import type { FrameFilter } from '../../src/net/frame-filter.js';
import { ProxyListener } from '../../src/net/proxy-listener.js';

// A fake upstream is used here only for what a real broker never does (wrong correlation ids,
// stalling on purpose, answering huge responses to a reader that stops); the e2e suite runs the
// same listener in front of real brokers.

const METADATA = 3;
/** Requests with this key ask the fake upstream for a response of the size in their payload. */
const SIZED_RESPONSE = 60;

function request(
  correlationId: number,
  payload = Buffer.alloc(0),
  apiKey = METADATA,
  apiVersion = 1,
): Buffer {
  const frame = Buffer.alloc(4 + 10 + payload.length);
  frame.writeInt32BE(10 + payload.length, 0);
  frame.writeInt16BE(apiKey, 4);
  frame.writeInt16BE(apiVersion, 6);
  frame.writeInt32BE(correlationId, 8);
  frame.writeInt16BE(-1, 12); // null client id
  payload.copy(frame, 14);
  return frame;
}

function response(correlationId: number, payload: Buffer): Buffer {
  const frame = Buffer.alloc(8 + payload.length);
  frame.writeInt32BE(4 + payload.length, 0);
  frame.writeInt32BE(correlationId, 4);
  payload.copy(frame, 8);
  return frame;
}

type Answer = (frame: Buffer, socket: net.Socket) => void;

/** A TCP server that hands every request frame to `answer`. */
async function fakeUpstream(answer: Answer): Promise<net.Server> {
  const server = net.createServer((socket) => {
    const decoder = new FrameDecoder(1 << 26);
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) answer(frame, socket);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return server;
}

/** Echoes the request payload back; a SIZED_RESPONSE request gets the number of bytes it names. */
const echo: Answer = (frame, socket) => {
  const correlationId = frame.readInt32BE(8);
  const payload = frame.subarray(14);
  const sized = frame.readInt16BE(4) === SIZED_RESPONSE;
  socket.write(
    response(correlationId, sized ? Buffer.alloc(payload.readInt32BE(0), correlationId & 0xff) : payload),
  );
};

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startListener(
  upstreamPort: number,
  overrides: {
    maxFrameBytes?: number;
    maxBufferedBytes?: number;
    filters?: FrameFilter[];
    opaque?: boolean;
  } = {},
) {
  const logs: string[] = [];
  const log = createLogger('debug', { write: (line: string) => logs.push(line) });
  const listener = new ProxyListener({
    name: 'client',
    listen: { host: '127.0.0.1', port: 0 },
    upstream: { host: '127.0.0.1', port: upstreamPort },
    maxFrameBytes: overrides.maxFrameBytes ?? 1 << 24,
    maxBufferedBytes: overrides.maxBufferedBytes ?? 1 << 20,
    filters: overrides.filters ?? [],
    ...(overrides.opaque ? { opaque: true } : {}),
    log,
  });
  await listener.start();
  cleanups.push(() => listener.drain(0));
  return { listener, logs };
}

/** A downstream client that collects response frames. */
async function client(port: number) {
  const socket = net.connect({ host: '127.0.0.1', port });
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
  return { socket, frames, isClosed: () => closed };
}

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('ProxyListener', () => {
  it('forwards pipelined requests and their responses byte for byte, in order', async () => {
    const upstream = await fakeUpstream(echo);
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    // Given 200 pipelined requests with distinct payloads, written in odd-sized pieces
    const requests = Array.from({ length: 200 }, (_, i) => request(i, Buffer.from(`payload-${i}`)));
    const stream = Buffer.concat(requests);
    for (let i = 0; i < stream.length; i += 37) c.socket.write(stream.subarray(i, i + 37));
    // Then every response comes back in request order with the upstream's exact bytes
    await until(() => c.frames.length === 200);
    c.frames.forEach((frame, i) => {
      expect(frame.equals(response(i, Buffer.from(`payload-${i}`)))).toBe(true);
    });
    expect(listener.counters.requests['Metadata v1']).toBe(200);
    // And the counters say what was sent on each side, not only what was received
    expect(listener.counters.bytesToUpstream).toBe(stream.length);
    expect(listener.counters.bytesToDownstream).toBe(c.frames.reduce((n, f) => n + f.length, 0));
  });

  it('stops reading the upstream while the downstream does not read, then delivers everything', async () => {
    const upstream = await fakeUpstream(echo);
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port, {
      maxBufferedBytes: 1 << 20,
    });
    const c = await client(listener.address.port);
    // Given a client that asks for 64 responses of 1 MiB and stops reading
    c.socket.pause();
    const sizeRequest = Buffer.alloc(4);
    sizeRequest.writeInt32BE(1 << 20, 0);
    for (let i = 0; i < 64; i++) c.socket.write(request(i, sizeRequest, SIZED_RESPONSE));
    await new Promise((r) => setTimeout(r, 1_000));
    // Then the sidecar has read only a bounded part of the 64 MiB the upstream wants to send
    // (its 1 MiB bound plus one frame and the kernel's socket buffers)
    expect(listener.counters.bytesFromUpstream).toBeLessThan(24 << 20);
    // And when the client reads again, all 64 responses arrive intact
    c.socket.resume();
    await until(() => c.frames.length === 64, 20_000);
    expect(c.frames.every((f, i) => f.readInt32BE(4) === i && f.length === 8 + (1 << 20))).toBe(true);
  });

  it('closes a connection whose upstream answers with an unexpected correlation id', async () => {
    const upstream = await fakeUpstream((frame, socket) =>
      socket.write(response(frame.readInt32BE(8) + 1, Buffer.alloc(0))),
    );
    const { listener, logs } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    c.socket.write(request(41));
    await until(c.isClosed);
    expect(listener.counters.closedForProtocolError).toBe(1);
    expect(logs.join('')).toMatch(/response correlation id 42 does not match the oldest request \(41\)/);
  });

  it('closes only the connection that sends an oversized frame, naming peer and size', async () => {
    const upstream = await fakeUpstream(echo);
    const { listener, logs } = await startListener((upstream.address() as net.AddressInfo).port, {
      maxFrameBytes: 4096,
    });
    const good = await client(listener.address.port);
    const bad = await client(listener.address.port);
    // When one client declares a 5000-byte frame
    const prefix = Buffer.alloc(4);
    prefix.writeInt32BE(5000, 0);
    bad.socket.write(prefix);
    await until(bad.isClosed);
    // Then the reason is logged with the peer and the size, and the other client is still served
    const line = logs.find((l) => l.includes('closing connection'))!;
    expect(JSON.parse(line)).toMatchObject({
      frameSize: 5000,
      peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
    });
    good.socket.write(request(1, Buffer.from('still here')));
    await until(() => good.frames.length === 1);
    expect(good.isClosed()).toBe(false);
  });

  it('closes the downstream when the upstream cannot be reached', async () => {
    const upstream = await fakeUpstream(echo);
    const port = (upstream.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    const { listener } = await startListener(port);
    const c = await client(listener.address.port);
    await until(c.isClosed);
    expect(listener.counters.upstreamConnectFailures).toBe(1);
  });

  it('on drain, delivers the responses still due and then closes', async () => {
    const upstream = await fakeUpstream((frame, socket) => setTimeout(() => echo(frame, socket), 300));
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    c.socket.write(request(7, Buffer.from('slow')));
    await until(() => listener.counters.connectionsActive === 1 && listener.counters.bytesFromDownstream > 0);
    // When the listener drains while a response is due
    const forced = await listener.drain(5_000);
    // Then the response arrived before the close, and nothing had to be forced
    expect(forced).toBe(0);
    await until(c.isClosed);
    expect(c.frames.map((f) => f.readInt32BE(4))).toEqual([7]);
  });

  it('on drain, closes once a streamed response, the last one due, has passed', async () => {
    // Given an upstream that answers a 1 MiB response (streamed: no filter reads it) after 300 ms
    const upstream = await fakeUpstream((frame, socket) => setTimeout(() => echo(frame, socket), 300));
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    const sizeRequest = Buffer.alloc(4);
    sizeRequest.writeInt32BE(1 << 20, 0);
    c.socket.write(request(12, sizeRequest, SIZED_RESPONSE));
    await until(() => listener.counters.bytesFromDownstream > 0);
    // When the listener drains with a 5 s timeout
    const started = Date.now();
    const forced = await listener.drain(5_000);
    // Then the response arrived whole and the connection closed when it had, not at the timeout
    expect(forced).toBe(0);
    expect(Date.now() - started).toBeLessThan(4_000);
    await until(c.isClosed);
    expect(c.frames.map((f) => f.length)).toEqual([8 + (1 << 20)]);
    expect(listener.counters.responsesStreamed).toBe(1);
  });

  it('on drain, force-closes a connection whose response does not come in time', async () => {
    const upstream = await fakeUpstream(() => undefined);
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    c.socket.write(request(8));
    await until(() => listener.counters.bytesFromDownstream > 0);
    expect(await listener.drain(200)).toBe(1);
    await until(c.isClosed);
  });
  it('on drain with a held grace, closes a connection whose only responses left are held by a filter', async () => {
    // Given a filter that holds Metadata responses forever (a durable ack waiting for a frozen store)
    const holding: FrameFilter = {
      apiKeys: new Set([METADATA]),
      onResponse: () => new Promise<Buffer>(() => {}),
    };
    const upstream = await fakeUpstream(echo);
    const { listener, logs } = await startListener((upstream.address() as net.AddressInfo).port, {
      filters: [holding],
    });
    const c = await client(listener.address.port);
    c.socket.write(request(9));
    await until(() => listener.counters.bytesFromUpstream > 0);
    // When the listener drains with a grace of 200 ms for held responses and a 10 s timeout
    const forced = await listener.drain(10_000, { heldGraceMs: 200 });
    // Then the connection was closed for being held, not at the timeout
    expect(forced).toBe(1);
    expect(logs.some((l) => l.includes('only responses held for the store are left'))).toBe(true);
    expect(logs.some((l) => l.includes('drain timeout'))).toBe(false);
    await until(c.isClosed);
  });

  it('streams a large response no filter reads: its first bytes reach the client before the broker has sent the rest', async () => {
    // Given an upstream that sends a 4 MiB response in two halves, a second apart, then a small one
    const big = Buffer.alloc(4 << 20);
    for (let i = 0; i < big.length; i += 4096) big[i] = (i / 4096) & 0xff;
    const whole = response(7, big);
    let halfSentAt = 0;
    // (answering in request order, as a broker does: the small one after the big one's last byte)
    let bigSent: Promise<void> = Promise.resolve();
    const upstream = await fakeUpstream((frame, socket) => {
      const correlationId = frame.readInt32BE(8);
      if (correlationId !== 7)
        return void bigSent.then(() => socket.write(response(correlationId, Buffer.from('small'))));
      socket.write(whole.subarray(0, whole.length / 2));
      halfSentAt = Date.now();
      bigSent = new Promise((resolve) =>
        setTimeout(() => {
          socket.write(whole.subarray(whole.length / 2));
          resolve();
        }, 1_000),
      );
    });
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const socket = net.connect({ host: '127.0.0.1', port: listener.address.port });
    cleanups.push(() => socket.destroy());
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const received: Buffer[] = [];
    let receivedBytes = 0;
    let halfReceivedAt = 0;
    socket.on('data', (chunk) => {
      received.push(chunk);
      receivedBytes += chunk.length;
      if (!halfReceivedAt && receivedBytes >= whole.length / 2) halfReceivedAt = Date.now();
    });
    // When the client asks for it and, pipelined, for a small one
    socket.write(Buffer.concat([request(7), request(8)]));
    await until(() => receivedBytes === whole.length + 8 + 5, 10_000);
    // Then half of it was passed on while the other half was still to come
    expect(halfReceivedAt - halfSentAt).toBeLessThan(900);
    // And every byte arrived as sent, the small response after it
    const bytes = Buffer.concat(received);
    expect(bytes.subarray(0, whole.length).equals(whole)).toBe(true);
    expect(bytes.subarray(whole.length).readInt32BE(4)).toBe(8);
    expect(listener.counters.responsesStreamed).toBe(1);
    expect(listener.counters.bytesToDownstream).toBe(bytes.length);
  });

  it('streams a large request no filter reads upstream as it arrives, and pairs its response', async () => {
    // Given an upstream that notes when it has received half of a 1 MiB request
    const payload = Buffer.alloc(1 << 20);
    for (let i = 0; i < payload.length; i += 4096) payload[i] = (i / 4096) & 0xff;
    const big = request(21, payload);
    let upstreamBytes = 0;
    let halfReceivedAt = 0;
    const upstream = net.createServer((socket) => {
      const decoder = new FrameDecoder(1 << 26);
      socket.on('data', (chunk) => {
        upstreamBytes += chunk.length;
        if (!halfReceivedAt && upstreamBytes >= big.length / 2) halfReceivedAt = Date.now();
        for (const frame of decoder.push(chunk)) echo(frame, socket);
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    // When the client sends its first half, then after a second the rest and a small request
    c.socket.write(big.subarray(0, big.length / 2));
    await until(() => halfReceivedAt > 0, 5_000);
    const halfSentAt = Date.now();
    c.socket.write(Buffer.concat([big.subarray(big.length / 2), request(22, Buffer.from('small'))]));
    await until(() => c.frames.length === 2, 10_000);
    // Then the first half reached the upstream before the second was sent
    expect(halfReceivedAt).toBeLessThanOrEqual(halfSentAt);
    // And both answers came back in order, the large one with every byte the upstream got
    expect(c.frames[0]!.equals(response(21, payload))).toBe(true);
    expect(c.frames[1]!.equals(response(22, Buffer.from('small')))).toBe(true);
    expect(listener.counters.requestsStreamed).toBe(1);
    expect(listener.counters.requests['Metadata v1']).toBe(2);
    expect(listener.counters.bytesToUpstream).toBe(big.length + request(22, Buffer.from('small')).length);
  });

  it('assembles a large request whole when a filter reads its key', async () => {
    // Given a filter that reads Metadata requests
    const seenByFilter: number[] = [];
    const reading: FrameFilter = {
      apiKeys: new Set([METADATA]),
      onRequest: (_info, frame) => {
        seenByFilter.push(frame.length);
        return { action: 'forward', frame, expectResponse: true };
      },
    };
    const upstream = await fakeUpstream(echo);
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port, {
      filters: [reading],
    });
    const c = await client(listener.address.port);
    // When a 1 MiB Metadata request arrives in two pieces
    const big = request(23, Buffer.alloc(1 << 20, 7));
    c.socket.write(big.subarray(0, 300_000));
    await until(() => listener.counters.bytesFromDownstream >= 300_000);
    c.socket.write(big.subarray(300_000));
    await until(() => c.frames.length === 1, 10_000);
    // Then the filter got it whole, and nothing was streamed
    expect(seenByFilter).toEqual([big.length]);
    expect(listener.counters.requestsStreamed).toBe(0);
  });

  it('streams a large acks=0 Produce without waiting for an answer, and serves the requests after it', async () => {
    // Given an upstream that, as a broker, never answers acks=0 Produce
    const upstream = await fakeUpstream((frame, socket) => {
      if (frame.readInt16BE(4) !== 0) echo(frame, socket);
    });
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    // Produce v3: header v1 (null client id), null transactional id, acks 0, timeout, then bytes
    const body = Buffer.alloc(6 + 200_000, 1);
    body.writeInt16BE(-1, 0);
    body.writeInt16BE(0, 2);
    body.writeInt32BE(30_000, 4);
    const produce = request(30, body, 0, 3);
    // When it arrives in two pieces, the second with a Metadata request behind it
    c.socket.write(produce.subarray(0, 100_000));
    await until(() => listener.counters.requestsStreamed === 1);
    c.socket.write(Buffer.concat([produce.subarray(100_000), request(31, Buffer.from('after'))]));
    // Then the Metadata request is answered, nothing waits for the Produce, and every byte went up
    await until(() => c.frames.length === 1, 5_000);
    expect(c.frames[0]!.readInt32BE(4)).toBe(31);
    expect(listener.counters.requests['Produce v3']).toBe(1);
    await until(
      () => listener.counters.bytesToUpstream === produce.length + request(31, Buffer.from('after')).length,
    );
  });

  it('on drain, finishes a request half streamed upstream and delivers its answer before closing', async () => {
    const upstream = await fakeUpstream(echo);
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    const payload = Buffer.alloc(500_000, 3);
    const big = request(40, payload);
    // Given a large request of which half has been streamed upstream
    c.socket.write(big.subarray(0, 250_000));
    await until(() => listener.counters.requestsStreamed === 1);
    // When the listener drains, and the client then sends the rest
    const drained = listener.drain(5_000);
    await new Promise((r) => setTimeout(r, 100));
    c.socket.write(big.subarray(250_000));
    // Then the request went up whole, its answer arrived, and the connection closed without force
    expect(await drained).toBe(0);
    await until(c.isClosed);
    expect(c.frames.length).toBe(1);
    expect(c.frames[0]!.equals(response(40, payload))).toBe(true);
  });

  it('assembles a large response whole when a filter reads it, and never streams one ahead of a response still held', async () => {
    // Given a filter that reads Metadata responses and holds the first for 300 ms
    const seenByFilter: number[] = [];
    let first = true;
    const reading: FrameFilter = {
      apiKeys: new Set([METADATA]),
      onResponse: (_info, frame) => {
        seenByFilter.push(frame.length);
        if (!first) return frame;
        first = false;
        return new Promise<Buffer>((resolve) => setTimeout(() => resolve(frame), 300));
      },
    };
    const upstream = await fakeUpstream(echo);
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port, {
      filters: [reading],
    });
    const c = await client(listener.address.port);
    const sizeRequest = Buffer.alloc(4);
    sizeRequest.writeInt32BE(1 << 20, 0);
    // When the client asks for a small held Metadata, a large unfiltered response, and a large Metadata
    c.socket.write(
      Buffer.concat([
        request(1),
        request(2, sizeRequest, SIZED_RESPONSE),
        request(3, Buffer.alloc(1 << 20, 5)),
      ]),
    );
    await until(() => c.frames.length === 3, 10_000);
    // Then they arrived in order, intact; the filter got the large Metadata whole; and the large
    // unfiltered one was not streamed, for a response ahead of it was held
    expect(c.frames.map((f) => f.readInt32BE(4))).toEqual([1, 2, 3]);
    expect(c.frames[1]!.length).toBe(8 + (1 << 20));
    expect(seenByFilter).toEqual([8, 8 + (1 << 20)]);
    expect(listener.counters.responsesStreamed).toBe(0);
  });

  it('on drain with a held grace, still waits for a response the upstream owes', async () => {
    // Given an upstream that answers after 600 ms
    const upstream = await fakeUpstream((frame, socket) => setTimeout(() => echo(frame, socket), 600));
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const c = await client(listener.address.port);
    c.socket.write(request(10, Buffer.from('owed')));
    await until(() => listener.counters.bytesFromDownstream > 0);
    // When the listener drains with a 100 ms held grace
    const forced = await listener.drain(5_000, { heldGraceMs: 100 });
    // Then the broker's answer was delivered: only filter-held responses are cut short
    expect(forced).toBe(0);
    await until(c.isClosed);
    expect(c.frames.map((f) => f.readInt32BE(4))).toEqual([10]);
  });

  it('opaque: passes bytes that are not Kafka frames both ways, unread, and counts them', async () => {
    // Given a byte echo upstream (no Kafka framing at all) and an opaque listener
    const upstream = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port, {
      opaque: true,
      maxFrameBytes: 1024,
    });
    const socket = net.connect({ host: '127.0.0.1', port: listener.address.port });
    cleanups.push(() => socket.destroy());
    const received: Buffer[] = [];
    socket.on('data', (chunk) => received.push(chunk));
    // When it sends 64 KiB that a frame decoder would refuse (a negative size, then more than maxFrameBytes)
    const bytes = Buffer.alloc(65_536, 0xff);
    socket.write(bytes);
    await until(() => Buffer.concat(received).length === bytes.length);
    // Then every byte came back unchanged, and the listener counted them both ways
    expect(Buffer.concat(received).equals(bytes)).toBe(true);
    expect(listener.counters).toMatchObject({
      bytesFromDownstream: 65_536,
      bytesToUpstream: 65_536,
      bytesFromUpstream: 65_536,
      bytesToDownstream: 65_536,
      closedForProtocolError: 0,
    });
    // And a drain closes it at once: there are no request boundaries to wait for
    expect(await listener.drain(5_000)).toBe(0);
    await until(() => socket.destroyed || socket.readableEnded);
  });
  it('on drain, resolves once the responses are flushed, while a peer still holds its half of the connection open', async () => {
    // Given a client that does not answer our FIN (half-open, as a busy Java client may for seconds)
    const upstream = await fakeUpstream(echo);
    const { listener } = await startListener((upstream.address() as net.AddressInfo).port);
    const socket = net.connect({ host: '127.0.0.1', port: listener.address.port, allowHalfOpen: true });
    cleanups.push(() => socket.destroy());
    const decoder = new FrameDecoder(1 << 20);
    const frames: Buffer[] = [];
    let ended = false;
    socket.on('data', (chunk) => frames.push(...decoder.push(chunk)));
    socket.on('end', () => {
      ended = true;
    });
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(request(11, Buffer.from('last')));
    await until(() => frames.length === 1);
    // When the listener drains
    const begun = performance.now();
    expect(await listener.drain(10_000)).toBe(0);
    // Then it is done at once, not when the socket a peer never closes is finally destroyed (5 s)
    expect(performance.now() - begun).toBeLessThan(2_500);
    expect(listener.openConnections).toBe(0);
    // And the client got its response and our FIN
    await until(() => ended);
    expect(frames.map((f) => f.readInt32BE(4))).toEqual([11]);
  });
});
