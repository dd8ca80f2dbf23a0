import net from 'node:net';
import tls from 'node:tls';
import { ApiKey, encodeProduceReference, encodeProduceRequest } from '@walproxy/shared';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  issueCert,
  makeCa,
  removeDir,
  type TestCa,
  type TestCert,
  tempDir,
} from '../../../e2e/src/tls/certs.js';
import { buildRecordBatch } from '../../../shared/test/helpers/record-batches.js';
import { parseSidecarConfig } from '../../src/config/sidecar-config.js';
import { createLogger } from '../../src/log.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';
import { Sidecar, SidecarConfigError } from '../../src/sidecar.js';
import { PEER_STORE_DEFAULTS } from '../../src/wal/peer-store-readers.js';
import { requestFrame } from './frames.js';

// The zone ingress hands what a peer sends to the broker, filling references from the stores
// first (zone-local produce): before the broker authenticated anybody. So only peer sidecars
// authenticated by mutual TLS may connect (issue #24, item 1; docs/security.md, "The zone
// ingress"), and a sidecar configured otherwise does not start.

let dir: string;
let ca: TestCa;
let pod: TestCert;
const cleanups: Array<() => unknown> = [];

beforeAll(() => {
  dir = tempDir();
  ca = makeCa(dir);
  pod = issueCert(ca, { cn: 'sidecar-1', san: ['IP:127.0.0.1'] });
});
afterAll(() => removeDir(dir));
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

/** A broker stand-in that never answers and records the API key of every request it gets. */
async function recordingBroker(): Promise<{ port: number; apiKeys: number[] }> {
  const apiKeys: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    const decoder = new FrameDecoder(1 << 24);
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) apiKeys.push(frame.readInt16BE(4));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  return { port: (server.address() as net.AddressInfo).port, apiKeys };
}

function capturingLog() {
  const lines: Array<{ level: number | string; msg: string }> = [];
  const log = createLogger('debug', { write: (line: string) => lines.push(JSON.parse(line)) });
  return { log, lines };
}

/** Flags of broker 1's sidecar: the WAL, a --wal-read-store-url glob, zone-local produce, a zone ingress. */
async function zonedFlags(brokerPort: number, storeRoot: string): Promise<Record<string, unknown>> {
  const ingress = await freePort();
  return {
    'broker-id': '1',
    'client-listen': `127.0.0.1:${await freePort()}`,
    'client-upstream': `127.0.0.1:${brokerPort}`,
    'replication-listen': `127.0.0.1:${await freePort()}`,
    'replication-upstream': `127.0.0.1:${brokerPort}`,
    'admin-listen': 'off',
    'wal-store-url': `file://${storeRoot}/zone-a`,
    'wal-read-store-url': [`file://${storeRoot}/zone-*`],
    'wal-topic': 'zl-*',
    'topic-config': ['zl-*:zone.local=true'],
    zone: 'zone-a',
    'zone-egress-listen-base': String(20_000 + Math.floor(Math.random() * 10_000)),
    'zone-egress-broker-ids': '1',
    'zone-ingress-listen': `127.0.0.1:${ingress}`,
    'zone-sidecar': 'zone-a=127.0.0.1',
  };
}

const mtls = () => ({
  'replication-tls-cert': pod.certPath,
  'replication-tls-key': pod.keyPath,
  'replication-tls-ca': ca.certPath,
});

/** One Produce whose 300 partitions each carry a reference to a store of its own, all under the glob. */
function referencesToDistinctStores(storeRoot: string, count = 300): Buffer {
  const batch = buildRecordBatch({ records: [{ key: null, value: Buffer.from('x') }] });
  const info = { apiKey: ApiKey.Produce, apiVersion: 9, correlationId: 7 };
  return requestFrame(
    info,
    'intruder',
    encodeProduceRequest(
      {
        transactionalId: null,
        acks: -1,
        timeoutMs: 30_000,
        topicData: [
          {
            name: 'zl-orders',
            partitionData: Array.from({ length: count }, (_, index) => ({
              index,
              records: encodeProduceReference(batch, {
                store: `file://${storeRoot}/zone-intruder-${index}`,
                objectKey: 'wal/object',
                position: 0,
                objectSize: 1 << 20,
              }),
            })),
          },
        ],
      },
      info.apiVersion,
    ),
  );
}

/** Sends `bytes` to the zone ingress over plain TCP or TLS without a certificate; resolves on close or after the first answer. */
async function sendAsIntruder(port: number, bytes: Buffer, useTls: boolean): Promise<'answered' | 'closed'> {
  const socket = useTls
    ? tls.connect({ host: '127.0.0.1', port, ca: ca.cert })
    : net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  cleanups.push(() => socket.destroy());
  return new Promise((resolve) => {
    socket.once(useTls ? 'secureConnect' : 'connect', () => socket.write(bytes));
    socket.once('data', () => resolve('answered'));
    socket.once('close', () => resolve('closed'));
  });
}

async function startSidecar(raw: Record<string, unknown>) {
  const parsed = parseSidecarConfig(raw);
  if ('errors' in parsed) return { errors: parsed.errors };
  const { log, lines } = capturingLog();
  const sidecar = new Sidecar(parsed.config, log);
  cleanups.push(() => sidecar.stop(0));
  await sidecar.start();
  return { sidecar, lines };
}

const opened = (lines: Array<{ msg: string }>) =>
  lines.filter((l) => l.msg === 'reading WAL references from a peer store').length;

describe('the zone ingress and unauthenticated peers', () => {
  it('gives an unauthenticated peer no store work: 300 references to distinct glob-matched stores open no store and fill nothing', async () => {
    for (const [configuration, extra] of [
      ['the zone flags alone', {}],
      ['with replication mTLS', mtls()],
    ] as const) {
      // Given a sidecar with zone-local produce, configured as an operator might
      const broker = await recordingBroker();
      const storeRoot = tempDir('walproxy-zone-ingress-');
      cleanups.push(() => removeDir(storeRoot));
      const flags = { ...(await zonedFlags(broker.port, storeRoot)), ...extra };
      const started = await startSidecar(flags);
      if ('errors' in started) {
        // Then either it refuses to start, naming what to set...
        expect(started.errors.join('\n'), configuration).toMatch(
          /--zone-ingress-listen: .*--replication-tls-cert, --replication-tls-key and --replication-tls-ca/,
        );
        continue;
      }
      const { sidecar, lines } = started;
      const ingress = sidecar.listeners.find((l) => l.options.name === 'zone-ingress')!;

      // When a peer without a certificate sends references to 300 distinct stores the glob matches
      const outcome = await sendAsIntruder(
        ingress.address.port,
        referencesToDistinctStores(storeRoot),
        'replication-tls-cert' in extra,
      );

      // ...or it refuses the peer in the handshake: no store opened, no reader, nothing filled
      // or handed to the broker
      expect(opened(lines), configuration).toBe(0);
      expect(outcome, configuration).toBe('closed');
      expect(ingress.counters.tlsHandshakeFailures, configuration).toBe(1);
      const counters = sidecar.counters() as {
        wal: { peerStores: { opened: number; open: number } };
        zone: { produce: { fill: { requestsFilled: number; requestsRefused: number } } };
      };
      expect(counters.wal.peerStores, configuration).toMatchObject({ opened: 0, open: 0 });
      expect(counters.zone.produce.fill, configuration).toMatchObject({
        requestsFilled: 0,
        requestsRefused: 0,
      });
      expect(broker.apiKeys, configuration).not.toContain(ApiKey.Produce);
    }
  });

  it('refuses to start with a zone ingress and no replication mTLS requiring certificates, naming the flags', async () => {
    const broker = await recordingBroker();
    const storeRoot = tempDir('walproxy-zone-ingress-');
    cleanups.push(() => removeDir(storeRoot));
    const flags = await zonedFlags(broker.port, storeRoot);
    // Given no TLS at all, or TLS that lets peers in without a certificate
    for (const extra of [{}, { ...mtls(), 'replication-tls-client-auth': 'requested' }]) {
      const parsed = parseSidecarConfig({ ...flags, ...extra });
      // Then the flags are refused with one line saying what to set
      expect('errors' in parsed && parsed.errors).toEqual([
        expect.stringMatching(
          /^--zone-ingress-listen: .*--replication-tls-cert, --replication-tls-key and --replication-tls-ca .*--zone-ingress-unauthenticated=true$/,
        ),
      ]);
    }
    // And a configuration built in code is refused by the sidecar itself
    const loud = parseSidecarConfig({ ...flags, 'zone-ingress-unauthenticated': 'true' });
    if ('errors' in loud) throw new Error(loud.errors.join('\n'));
    const config = { ...loud.config, zone: { ...loud.config.zone!, allowUnauthenticatedPeers: false } };
    expect(() => new Sidecar(config, createLogger('silent'))).toThrow(SidecarConfigError);
    expect(() => new Sidecar(config, createLogger('silent'))).toThrow(/^--zone-ingress-listen: /);
    // And --zone without a zone ingress needs no TLS: nothing listens for peers
    const withoutIngress = { ...flags };
    delete withoutIngress['zone-ingress-listen'];
    expect('config' in parseSidecarConfig(withoutIngress)).toBe(true);
  });

  it('starts with --zone-ingress-unauthenticated, warns every start, and still opens at most the cap of glob stores', async () => {
    // Given a test rig's sidecar with the loud flag
    const broker = await recordingBroker();
    const storeRoot = tempDir('walproxy-zone-ingress-');
    cleanups.push(() => removeDir(storeRoot));
    const flags = {
      ...(await zonedFlags(broker.port, storeRoot)),
      'zone-ingress-unauthenticated': 'true',
    };
    const started = await startSidecar(flags);
    if ('errors' in started) throw new Error(started.errors.join('\n'));
    const { sidecar, lines } = started;
    // Then it started, and said loudly what it does
    expect(
      lines.filter((l) => l.level === 'warn' && /ZONE INGRESS WITHOUT PEER AUTHENTICATION/.test(l.msg)),
    ).toHaveLength(1);
    const ingress = sidecar.listeners.find((l) => l.options.name === 'zone-ingress')!;

    // When an unauthenticated peer sends references to 300 distinct stores the glob matches
    const outcome = await sendAsIntruder(ingress.address.port, referencesToDistinctStores(storeRoot), false);

    // Then at most the cap of stores opened, the request was refused without a fill (the
    // producer's answer, NOT_ENOUGH_REPLICAS), and the broker got no Produce
    expect(outcome).toBe('answered');
    const cap = PEER_STORE_DEFAULTS.maxGlobStores;
    expect(opened(lines)).toBeLessThanOrEqual(cap);
    const counters = sidecar.counters() as {
      wal: { peerStores: { opened: number; refusedOverCap: number } };
      zone: { produce: { fill: { requestsFilled: number; requestsRefused: number } } };
    };
    expect(counters.wal.peerStores.opened).toBe(cap);
    expect(counters.wal.peerStores.refusedOverCap).toBe(1);
    expect(counters.zone.produce.fill).toMatchObject({ requestsFilled: 0, requestsRefused: 1 });
    expect(broker.apiKeys).not.toContain(ApiKey.Produce);
  });
});
