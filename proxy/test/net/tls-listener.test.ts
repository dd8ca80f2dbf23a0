import { copyFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  issueCert,
  makeCa,
  removeDir,
  type TestCa,
  type TestCert,
  tempDir,
} from '../../../e2e/src/tls/certs.js';
import { createLogger } from '../../src/log.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';
import { type ListenerTls, ProxyListener, type UpstreamTls } from '../../src/net/proxy-listener.js';
import { type ClientAuth, TlsMaterial } from '../../src/net/tls-material.js';
import { echoRequest, startEchoBroker } from './echo-broker.js';

// TLS termination on the ingress listeners and mutual TLS from the egress, against certificates
// made by openssl at test time. The upstream is a plain echo server: what is under test is the
// handshake and what the pipe does after it.

let dir: string;
let ca: TestCa;
let otherCa: TestCa;
let server: TestCert;
let renewed: TestCert;
let peer: TestCert;
let expiredPeer: TestCert;
let strangerPeer: TestCert;

beforeAll(() => {
  dir = tempDir();
  ca = makeCa(dir);
  otherCa = makeCa(dir, 'other-ca');
  const san = ['DNS:kafka-1.kafka-headless', 'DNS:localhost', 'IP:127.0.0.1'];
  server = issueCert(ca, { cn: 'kafka-1', san });
  renewed = issueCert(ca, { cn: 'kafka-1-renewed', san });
  peer = issueCert(ca, { cn: 'sidecar-2' });
  expiredPeer = issueCert(ca, { cn: 'sidecar-old', expired: true });
  strangerPeer = issueCert(otherCa, { cn: 'stranger' });
});
afterAll(() => removeDir(dir));

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function echoUpstream(): Promise<{ port: number; connections: () => number }> {
  const broker = await startEchoBroker();
  cleanups.push(broker.close);
  return broker;
}

type LogLine = { level: string; msg: string; listener?: string; peer?: string; reason?: string };

function capture() {
  const lines: LogLine[] = [];
  const log = createLogger('debug', { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, log };
}

async function tlsIngress(
  upstreamPort: number,
  clientAuth: ClientAuth,
  material?: TlsMaterial,
): Promise<{ listener: ProxyListener; lines: LogLine[]; material: TlsMaterial }> {
  const { lines, log } = capture();
  const m =
    material ??
    new TlsMaterial(
      { cert: server.certPath, key: server.keyPath, ca: ca.certPath },
      { name: 'ingress', log },
    );
  const listenerTls: ListenerTls = { material: m, clientAuth };
  const listener = new ProxyListener({
    name: 'replication',
    listen: { host: '127.0.0.1', port: 0 },
    upstream: { host: '127.0.0.1', port: upstreamPort },
    maxFrameBytes: 1 << 20,
    maxBufferedBytes: 1 << 20,
    filters: [],
    log,
    tls: listenerTls,
  });
  await listener.start();
  cleanups.push(() => listener.drain(0));
  return { listener, lines, material: m };
}

interface TlsClient {
  socket: tls.TLSSocket;
  frames: Buffer[];
  closed: Promise<void>;
  isClosed: () => boolean;
}

/** A TLS client that has finished its handshake (TLS 1.3: before the server checked its certificate). */
async function tlsClient(port: number, options: tls.ConnectionOptions = {}): Promise<TlsClient> {
  const socket = tls.connect({ host: '127.0.0.1', port, ca: ca.cert, servername: 'localhost', ...options });
  const decoder = new FrameDecoder(1 << 20);
  const frames: Buffer[] = [];
  let closed = false;
  const closedPromise = new Promise<void>((resolve) =>
    socket.on('close', () => {
      closed = true;
      resolve();
    }),
  );
  socket.on('data', (chunk) => frames.push(...decoder.push(chunk)));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', () => resolve());
    socket.once('close', () => reject(new Error('closed before the handshake finished')));
  });
  cleanups.push(() => socket.destroy());
  return { socket, frames, closed: closedPromise, isClosed: () => closed };
}

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not in time`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function roundTrip(client: TlsClient, correlationId: number, text: string): Promise<string> {
  const before = client.frames.length;
  client.socket.write(echoRequest(correlationId, Buffer.from(text)));
  await until(() => client.frames.length > before, 'response');
  const frame = client.frames[before]!;
  expect(frame.readInt32BE(4)).toBe(correlationId);
  return frame.subarray(8).toString();
}

const refusals = (lines: LogLine[]) => lines.filter((l) => l.msg.startsWith('TLS client refused'));

describe('TLS termination on an ingress listener', () => {
  it('decrypts and forwards frames; without client auth no certificate is asked for', async () => {
    const upstream = await echoUpstream();
    const { listener } = await tlsIngress(upstream.port, 'none');
    const client = await tlsClient(listener.address.port);
    expect(await roundTrip(client, 7, 'over tls')).toBe('over tls');
    expect(listener.counters.tlsHandshakeFailures).toBe(0);
  });

  it('clientAuth required: accepts a peer certificate from the CA and refuses the rest, one line each naming peer and reason', async () => {
    // Given a replication ingress that requires certificates from the CA
    const upstream = await echoUpstream();
    const { listener, lines } = await tlsIngress(upstream.port, 'required');
    // When a sidecar with a certificate from the CA connects, it is served
    const good = await tlsClient(listener.address.port, { cert: peer.cert, key: peer.key });
    expect(await roundTrip(good, 1, 'replica fetch')).toBe('replica fetch');
    // When clients without a certificate, with an expired one, and with one from another CA connect
    const attempts = [
      { options: {}, reason: 'peer did not return a certificate' },
      { options: { cert: expiredPeer.cert, key: expiredPeer.key }, reason: 'certificate has expired' },
      {
        options: { cert: strangerPeer.cert, key: strangerPeer.key },
        reason: 'unable to verify the first certificate (not signed by the configured CA)',
      },
    ];
    for (const [i, attempt] of attempts.entries()) {
      // TLS 1.3 finishes the client's side of the handshake before the server checks the certificate
      const client = await tlsClient(listener.address.port, attempt.options).catch(() => undefined);
      const local = client ? `${client.socket.localAddress}:${client.socket.localPort}` : undefined;
      if (client) await client.closed;
      await until(() => refusals(lines).length === i + 1, `refusal ${i + 1} logged`);
      // Then each is refused with one warn line naming the peer's address and the reason
      const line = refusals(lines)[i]!;
      expect(line).toMatchObject({ level: 'warn', listener: 'replication', reason: attempt.reason });
      expect(line.msg).toBe(`TLS client refused: ${attempt.reason}`);
      if (local) expect(line.peer).toBe(local);
    }
    expect(listener.counters.tlsHandshakeFailures).toBe(3);
    // And none of them reached the upstream broker; the good connection still works
    expect(upstream.connections()).toBe(1);
    expect(await roundTrip(good, 2, 'still here')).toBe('still here');
  });

  it('clientAuth requested: a client without a certificate is served, one with a bad certificate is refused', async () => {
    const upstream = await echoUpstream();
    const { listener, lines } = await tlsIngress(upstream.port, 'requested');
    const anonymous = await tlsClient(listener.address.port);
    expect(await roundTrip(anonymous, 1, 'anonymous')).toBe('anonymous');
    const stranger = await tlsClient(listener.address.port, {
      cert: strangerPeer.cert,
      key: strangerPeer.key,
    });
    await stranger.closed;
    await until(() => refusals(lines).length === 1, 'refusal logged');
    expect(refusals(lines)[0]!.reason).toContain('unable to verify the first certificate');
  });

  it('refuses a plaintext Kafka client on a TLS port, naming the reason', async () => {
    const upstream = await echoUpstream();
    const { listener, lines } = await tlsIngress(upstream.port, 'none');
    const socket = net.connect({ host: '127.0.0.1', port: listener.address.port });
    socket.on('error', () => undefined);
    socket.write(echoRequest(1, Buffer.from('plaintext')));
    await new Promise((resolve) => socket.on('close', resolve));
    await until(() => refusals(lines).length === 1, 'refusal logged');
    expect(refusals(lines)[0]).toMatchObject({ reason: 'wrong version number' });
    expect(upstream.connections()).toBe(0);
  });

  it('a TCP probe that connects and leaves is not a refusal', async () => {
    const upstream = await echoUpstream();
    const { listener, lines } = await tlsIngress(upstream.port, 'required');
    const socket = net.connect({ host: '127.0.0.1', port: listener.address.port });
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.end();
    await new Promise((resolve) => socket.on('close', resolve));
    await until(() => lines.some((l) => l.msg === 'TLS handshake abandoned by the client'), 'debug line');
    expect(refusals(lines)).toEqual([]);
    expect(listener.counters.tlsHandshakeFailures).toBe(0);
  });

  it('picks up replaced certificate files for new handshakes; an established connection keeps working', async () => {
    // Given an ingress whose certificate files live in a directory that gets rewritten
    const live = tempDir();
    cleanups.push(() => removeDir(live));
    const files = { cert: path.join(live, 'tls.crt'), key: path.join(live, 'tls.key') };
    copyFileSync(server.certPath, files.cert);
    copyFileSync(server.keyPath, files.key);
    const { log } = capture();
    const material = new TlsMaterial(files, { name: 'ingress', log, reloadIntervalMs: 20 });
    material.start();
    cleanups.push(() => material.stop());
    const upstream = await echoUpstream();
    const { listener } = await tlsIngress(upstream.port, 'none', material);
    const established = await tlsClient(listener.address.port);
    expect(established.socket.getPeerCertificate().subject.CN).toBe('kafka-1');
    // When the files are replaced by a renewed certificate
    copyFileSync(renewed.certPath, files.cert);
    copyFileSync(renewed.keyPath, files.key);
    // Then new connections get the renewed certificate once the poll sees the files, no restart
    const served = async () => {
      const c = await tlsClient(listener.address.port);
      const cn = String(c.socket.getPeerCertificate().subject.CN);
      c.socket.destroy();
      return cn;
    };
    let seen = await served();
    const deadline = Date.now() + 10_000;
    while (seen !== 'kafka-1-renewed' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      seen = await served();
    }
    expect(seen).toBe('kafka-1-renewed');
    // And the connection opened before the rotation still works, on its original session
    expect(established.isClosed()).toBe(false);
    expect(await roundTrip(established, 9, 'after rotation')).toBe('after rotation');
    expect(established.socket.getPeerCertificate().subject.CN).toBe('kafka-1');
    expect(material.reloads).toBe(1);
  });
});

describe('mutual TLS from an egress to a peer replication ingress', () => {
  async function egress(
    ingressPort: number,
    upstreamTls: Omit<UpstreamTls, 'material'>,
    clientCert: TestCert | null = peer,
  ) {
    const { lines, log } = capture();
    const material = new TlsMaterial(
      { ca: ca.certPath, ...(clientCert ? { cert: clientCert.certPath, key: clientCert.keyPath } : {}) },
      { name: 'peer client', log },
    );
    const listener = new ProxyListener({
      name: 'egress-1',
      listen: { host: '127.0.0.1', port: 0 },
      upstream: { host: '127.0.0.1', port: ingressPort },
      maxFrameBytes: 1 << 20,
      maxBufferedBytes: 1 << 20,
      filters: [],
      log,
      upstreamTls: { material, ...upstreamTls },
    });
    await listener.start();
    cleanups.push(() => listener.drain(0));
    return { listener, lines };
  }

  /** A plaintext client of the egress, as the follower broker is. */
  async function follower(port: number) {
    const socket = net.connect({ host: '127.0.0.1', port });
    const decoder = new FrameDecoder(1 << 20);
    const frames: Buffer[] = [];
    let closed = false;
    socket.on('data', (chunk) => frames.push(...decoder.push(chunk)));
    socket.on('close', () => {
      closed = true;
    });
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    cleanups.push(() => socket.destroy());
    return { socket, frames, isClosed: () => closed };
  }

  async function fetchThrough(port: number): Promise<string> {
    const f = await follower(port);
    f.socket.write(echoRequest(3, Buffer.from('fetch')));
    await until(() => f.frames.length === 1 || f.isClosed(), 'answer or close');
    return f.frames[0]?.subarray(8).toString() ?? 'closed';
  }

  it('verifies the peer by the IP address it dials and presents its own certificate', async () => {
    const upstream = await echoUpstream();
    const ingress = await tlsIngress(upstream.port, 'required');
    const { listener } = await egress(ingress.listener.address.port, { verifyHostname: true });
    expect(await fetchThrough(listener.address.port)).toBe('fetch');
    expect(refusals(ingress.lines)).toEqual([]);
  });

  it('verifies the peer by --peer-tls-server-name when peers are dialled by address', async () => {
    const upstream = await echoUpstream();
    const ingress = await tlsIngress(upstream.port, 'required');
    const { listener } = await egress(ingress.listener.address.port, {
      verifyHostname: true,
      serverName: 'kafka-1.kafka-headless',
    });
    expect(await fetchThrough(listener.address.port)).toBe('fetch');
  });

  it('refuses a peer whose certificate lacks the expected name, with one line saying so', async () => {
    const upstream = await echoUpstream();
    const ingress = await tlsIngress(upstream.port, 'required');
    const { listener, lines } = await egress(ingress.listener.address.port, {
      verifyHostname: true,
      serverName: 'kafka-2.kafka-headless',
    });
    expect(await fetchThrough(listener.address.port)).toBe('closed');
    const failed = lines.filter((l) => l.msg.startsWith('upstream TLS handshake failed'));
    expect(failed).toHaveLength(1);
    expect(failed[0]!.reason).toContain("Hostname/IP does not match certificate's altnames");
    expect(listener.counters.upstreamConnectFailures).toBe(1);
    expect(listener.counters.upstreamTlsHandshakeFailures).toBe(1);
    expect(upstream.connections()).toBe(0);
  });

  it('with hostname verification off, trusts any certificate from the CA', async () => {
    const upstream = await echoUpstream();
    const ingress = await tlsIngress(upstream.port, 'required');
    const { listener } = await egress(ingress.listener.address.port, {
      verifyHostname: false,
      serverName: 'kafka-2.kafka-headless',
    });
    expect(await fetchThrough(listener.address.port)).toBe('fetch');
  });

  it('an egress without a client certificate is refused by the ingress, and nothing reaches the broker', async () => {
    const upstream = await echoUpstream();
    const ingress = await tlsIngress(upstream.port, 'required');
    const { listener } = await egress(ingress.listener.address.port, { verifyHostname: true }, null);
    expect(await fetchThrough(listener.address.port)).toBe('closed');
    await until(() => refusals(ingress.lines).length === 1, 'refusal logged');
    expect(refusals(ingress.lines)[0]!.reason).toBe('peer did not return a certificate');
    expect(upstream.connections()).toBe(0);
  });
});
