import net from 'node:net';
import {
  decodeApiVersionsResponse,
  decodeResponseHeader,
  encodeApiVersionsResponse,
  encodeRequestHeader,
  encodeResponseHeader,
  responseHeaderVersion,
} from '@walproxy/shared';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiVersionsFilter } from '../../src/filters/api-versions.js';
import { SaslHandshakeFilter } from '../../src/filters/sasl-handshake.js';
import { createLogger } from '../../src/log.js';
import { type Exchange, Secret, saslAuthenticate } from '../../src/metadata/sasl-client.js';
import { decodeSaslHandshakeResponse, encodeSaslHandshakeRequest } from '../../src/metadata/sasl-messages.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';
import { ProxyListener } from '../../src/net/proxy-listener.js';
import { ANSWER, PROTECTED_API, startFakeSaslBroker } from '../metadata/fake-sasl-broker.js';

const USERS = { alice: 'alice-secret' };

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function capture() {
  const lines: Array<{ level: string; msg: string; peer?: string }> = [];
  const log = createLogger('debug', { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, log };
}

async function sidecarIngress(upstreamPort: number) {
  const { lines, log } = capture();
  const saslHandshake = new SaslHandshakeFilter();
  const listener = new ProxyListener({
    name: 'client',
    listen: { host: '127.0.0.1', port: 0 },
    upstream: { host: '127.0.0.1', port: upstreamPort },
    maxFrameBytes: 1 << 20,
    maxBufferedBytes: 1 << 20,
    filters: [new ApiVersionsFilter(), saslHandshake],
    log,
  });
  await listener.start();
  cleanups.push(() => listener.drain(0));
  return { listener, lines, saslHandshake };
}

/** A Kafka client connection: frames requests, pairs responses in order. */
async function kafkaConnection(port: number) {
  const socket = net.connect({ host: '127.0.0.1', port });
  await new Promise((resolve) => socket.once('connect', resolve));
  cleanups.push(() => socket.destroy());
  const decoder = new FrameDecoder(1 << 20);
  const waiting: Array<{ apiKey: number; apiVersion: number; resolve: (body: Buffer) => void }> = [];
  let closed = false;
  socket.on('close', () => {
    closed = true;
  });
  socket.on('error', () => undefined);
  socket.on('data', (chunk) => {
    for (const frame of decoder.push(chunk)) {
      const w = waiting.shift()!;
      const payload = frame.subarray(4);
      const { headerLength } = decodeResponseHeader(payload, responseHeaderVersion(w.apiKey, w.apiVersion)!);
      w.resolve(payload.subarray(headerLength));
    }
  });
  let correlationId = 100;
  const exchange: Exchange = (apiKey, apiVersion, body) =>
    new Promise((resolve) => {
      const header = encodeRequestHeader({
        apiKey,
        apiVersion,
        correlationId: correlationId++,
        clientId: 'test',
      });
      const size = Buffer.alloc(4);
      size.writeInt32BE(header.length + body.length);
      waiting.push({ apiKey, apiVersion, resolve });
      socket.write(Buffer.concat([size, header, body]));
    });
  return { exchange, isClosed: () => closed, socket };
}

const alice = { mechanism: 'SCRAM-SHA-512' as const, username: 'alice', password: new Secret(USERS.alice) };

describe('SASL through the sidecar', () => {
  it('SaslHandshake v1, SaslAuthenticate and KIP-368 re-authentication reach the broker untouched', async () => {
    // Given a sidecar in front of a SASL listener
    const broker = await startFakeSaslBroker(USERS);
    cleanups.push(() => broker.stop());
    const { listener } = await sidecarIngress(broker.port);
    const client = await kafkaConnection(listener.address.port);
    // When a client authenticates with SCRAM, asks something, re-authenticates and asks again
    await saslAuthenticate(client.exchange, alice);
    expect(await client.exchange(PROTECTED_API.apiKey, PROTECTED_API.apiVersion, Buffer.alloc(0))).toEqual(
      ANSWER,
    );
    await saslAuthenticate(client.exchange, alice);
    expect(await client.exchange(PROTECTED_API.apiKey, PROTECTED_API.apiVersion, Buffer.alloc(0))).toEqual(
      ANSWER,
    );
    // Then the broker authenticated the client twice on the one connection, and the sidecar
    // counted the SASL requests as forwarded
    expect(broker.authenticated).toEqual(['alice', 'alice']);
    expect(broker.handshakes).toEqual(['v1 SCRAM-SHA-512', 'v1 SCRAM-SHA-512']);
    expect(listener.counters.requests).toMatchObject({ 'SaslHandshake v1': 2, 'SaslAuthenticate v2': 4 });
    expect(client.isClosed()).toBe(false);
  });

  it('answers SaslHandshake v0 with UNSUPPORTED_VERSION and keeps the connection, so v1 can follow', async () => {
    const broker = await startFakeSaslBroker(USERS);
    cleanups.push(() => broker.stop());
    const { listener, lines, saslHandshake } = await sidecarIngress(broker.port);
    const client = await kafkaConnection(listener.address.port);
    // When a client asks for the pre-KIP-152 handshake
    const response = decodeSaslHandshakeResponse(
      await client.exchange(17, 0, encodeSaslHandshakeRequest('PLAIN', 0)),
      0,
    );
    // Then the sidecar answers it, the broker never sees it, and one warn line names the peer
    expect(response).toEqual({ errorCode: 35, mechanisms: [] });
    expect(broker.handshakes).toEqual([]);
    expect(saslHandshake.refusedV0).toBe(1);
    const warning = lines.find((l) => l.msg.startsWith('SaslHandshake v0 refused'));
    expect(warning).toMatchObject({
      level: 'warn',
      peer: `${client.socket.localAddress}:${client.socket.localPort}`,
    });
    // And the same connection authenticates with v1 afterwards
    await saslAuthenticate(client.exchange, { ...alice, mechanism: 'PLAIN' });
    expect(broker.authenticated).toEqual(['alice']);
  });

  it('an upstream frame too short for a correlation id (a raw SASL token) closes that connection only', async () => {
    // Given an upstream that answers with an empty raw token, as a broker does after a v0 PLAIN exchange
    const upstream = net.createServer((socket) => {
      socket.on('data', () => socket.write(Buffer.alloc(4)));
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => upstream.close(resolve)));
    const { listener, lines } = await sidecarIngress((upstream.address() as net.AddressInfo).port);
    const client = await kafkaConnection(listener.address.port);
    void client.exchange(PROTECTED_API.apiKey, PROTECTED_API.apiVersion, Buffer.alloc(0));
    // Then the pipe reports a malformed response and closes, the process carries on
    const deadline = Date.now() + 5_000;
    while (!client.isClosed() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(client.isClosed()).toBe(true);
    expect(listener.counters.closedForProtocolError).toBe(1);
    expect(lines.find((l) => l.msg.startsWith('closing connection: malformed response'))).toBeDefined();
  });
});

describe('ApiVersions filter and SASL', () => {
  it('leaves the SaslHandshake and SaslAuthenticate ranges as the broker wrote them', () => {
    // Given a broker's ApiVersions v3 answer with Produce above the codec's range and the SASL keys
    const apiKeys = [
      { apiKey: 0, minVersion: 0, maxVersion: 14 },
      { apiKey: 17, minVersion: 0, maxVersion: 1 },
      { apiKey: 36, minVersion: 0, maxVersion: 2 },
    ];
    const body = encodeApiVersionsResponse({ errorCode: 0, apiKeys }, 3);
    const header = encodeResponseHeader({ correlationId: 5 }, 0);
    const frame = Buffer.alloc(4 + header.length + body.length);
    frame.writeInt32BE(header.length + body.length);
    header.copy(frame, 4);
    body.copy(frame, 4 + header.length);
    // When the filter rewrites it
    const out = new ApiVersionsFilter().onResponse({ apiKey: 18, apiVersion: 3, correlationId: 5 }, frame);
    const decoded = decodeApiVersionsResponse(out.subarray(8), 3);
    // Then only Produce is capped; SASL keeps 0-1 and 0-2 (librdkafka checks SaslHandshake 0)
    expect(
      decoded.apiKeys.map(({ apiKey, minVersion, maxVersion }) => [apiKey, minVersion, maxVersion]),
    ).toEqual([
      [0, 0, 13],
      [17, 0, 1],
      [36, 0, 2],
    ]);
  });
});
