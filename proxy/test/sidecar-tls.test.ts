import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  issueCert,
  makeCa,
  removeDir,
  type TestCa,
  type TestCert,
  tempDir,
} from '../../e2e/src/tls/certs.js';
import { parseSidecarConfig } from '../src/config/sidecar-config.js';
import { createLogger } from '../src/log.js';
import { FrameDecoder } from '../src/net/frame-decoder.js';
import { Sidecar } from '../src/sidecar.js';
import { echoRequest, startEchoBroker } from './net/echo-broker.js';

// One sidecar wired from flags: TLS on the client ingress, mTLS on the replication ingress, and an
// egress that dials that same replication ingress as its "peer" (broker 2 at 127.0.0.1), so the
// whole follower path — plaintext egress, TLS hop, TLS ingress, broker — is exercised in-process.

let dir: string;
let ca: TestCa;
let pod: TestCert;

beforeAll(() => {
  dir = tempDir();
  ca = makeCa(dir);
  pod = issueCert(ca, { cn: 'kafka-1', san: ['DNS:kafka-2.kafka-headless', 'IP:127.0.0.1'] });
});
afterAll(() => removeDir(dir));

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function roundTrip(socket: net.Socket, text: string): Promise<string> {
  const decoder = new FrameDecoder(1 << 20);
  return new Promise((resolve, reject) => {
    socket.on('data', (chunk) => {
      const [frame] = decoder.push(chunk);
      if (frame) resolve(frame.subarray(8).toString());
    });
    socket.on('close', () => reject(new Error('closed')));
    socket.write(echoRequest(1, Buffer.from(text)));
  });
}

describe('Sidecar with TLS from flags', () => {
  it('serves TLS clients, and replicates over mutual TLS between egress and replication ingress', async () => {
    const broker = await startEchoBroker();
    const brokerPort = broker.port;
    const [clientPort, replicationPort, egressBase, adminPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    const parsed = parseSidecarConfig({
      'broker-id': '1',
      'client-listen': `127.0.0.1:${clientPort}`,
      'client-upstream': `127.0.0.1:${brokerPort}`,
      'client-tls-cert': pod.certPath,
      'client-tls-key': pod.keyPath,
      'replication-listen': `127.0.0.1:${replicationPort}`,
      'replication-upstream': `127.0.0.1:${brokerPort}`,
      'replication-tls-cert': pod.certPath,
      'replication-tls-key': pod.keyPath,
      'replication-tls-ca': ca.certPath,
      // egress for broker 2 on base+2, dialling our own replication ingress by address, verified by name
      'egress-listen-base': String(egressBase - 2),
      'peer-address': [`2=127.0.0.1:${replicationPort}`],
      'peer-tls-server-name': 'kafka-{id}.kafka-headless',
      'admin-listen': `127.0.0.1:${adminPort}`,
    });
    if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
    const sidecar = new Sidecar(parsed.config, createLogger('silent'));
    await sidecar.start();
    try {
      // A client over TLS on the client ingress
      const client = tls.connect({ host: '127.0.0.1', port: clientPort, ca: ca.cert });
      client.on('error', () => undefined);
      expect(await roundTrip(client, 'produce')).toBe('produce');
      client.destroy();
      // A follower broker, plaintext on loopback, through its egress and the mTLS hop
      const follower = net.connect({ host: '127.0.0.1', port: egressBase });
      follower.on('error', () => undefined);
      expect(await roundTrip(follower, 'fetch')).toBe('fetch');
      follower.destroy();
      // A client with no certificate straight at the replication ingress gets nothing
      const intruder = tls.connect({ host: '127.0.0.1', port: replicationPort, ca: ca.cert });
      intruder.on('error', () => undefined);
      await expect(roundTrip(intruder, 'fetch')).rejects.toThrow('closed');
      const replication = sidecar.listeners.find((l) => l.options.name === 'replication')!;
      expect(replication.counters.tlsHandshakeFailures).toBe(1);
      expect(sidecar.tlsMaterials).toHaveLength(3);
      // Each loaded identity's files on /metrics with the seconds until they expire (30-day certificates)
      const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
      const expiry = [...metrics.matchAll(/^walproxy_tls_certificate_expiry_seconds\{([^}]*)\} (\S+)/gm)].map(
        (m) => [m[1]!.replace(/,?otel_scope_[a-z_]+="[^"]*"/g, ''), Number(m[2])] as const,
      );
      expect(expiry.map(([labels]) => labels).sort()).toEqual([
        'tls="client ingress",file="cert"',
        // The egress presents the replication ingress's certificate (inherited files)
        'tls="peer client",file="ca"',
        'tls="peer client",file="cert"',
        'tls="replication ingress",file="ca"',
        'tls="replication ingress",file="cert"',
      ]);
      for (const [labels, seconds] of expiry) expect(seconds, labels).toBeGreaterThan(29 * 86_400);
    } finally {
      await sidecar.stop(0);
      await broker.close();
    }
  });
});
