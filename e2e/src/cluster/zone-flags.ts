import path from 'node:path';
import { issueCert, makeCa, removeDir, tempDir } from '../tls/certs.js';
import { BROKER_IDS, RACKS } from './kafka-cluster.js';

/** Where the zone listeners of one e2e cluster listen (issue #15): the same ports on every pod. */
export interface ZonePorts {
  /** The zone egress of broker N listens on egressBase + N. */
  egressBase: number;
  ingress: number;
  bootstrap: number;
}

/** The ports the three-zone e2e files and benchmarks use, clear of the harness's own listeners. */
export const ZONE_PORTS: ZonePorts = { egressBase: 61_000, ingress: 61_010, bootstrap: 61_020 };

/**
 * The sidecar flags that put broker `id`'s sidecar in its rack's zone, with zone listeners on
 * `host(id)` and every peer's zone ingress and sidecar named by `host(peer)`.
 */
export function zoneSidecarFlags(
  id: number,
  host: (id: number) => string,
  ports: ZonePorts = ZONE_PORTS,
): string[] {
  return [
    `--zone=${RACKS[id]}`,
    `--zone-egress-listen-base=${ports.egressBase}`,
    `--zone-egress-listen-host=${host(id)}`,
    `--zone-ingress-listen=${host(id)}:${ports.ingress}`,
    ...BROKER_IDS.map((peer) => `--zone-ingress-address=${peer}=${host(peer)}:${ports.ingress}`),
    `--zone-bootstrap-listen=${host(id)}:${ports.bootstrap}`,
    ...BROKER_IDS.map((peer) => `--zone-sidecar=${RACKS[peer]}=${host(peer)}`),
  ];
}

/** Peer certificates of one e2e cluster's sidecars: see zonePeerTls. */
export interface ZonePeerTls {
  /** Sidecar `id`'s replication TLS flags: its certificate, its key and the peer CA. */
  flags(id: number): string[];
  /** Deletes the certificates. */
  remove(): void;
}

/**
 * Mutual TLS between the sidecars, as a sidecar with a zone ingress requires (docs/security.md,
 * "The zone ingress"): a peer CA and a certificate per broker id naming `host(id)`, the address
 * its peers dial for both its replication ingress and its zone ingress (--replication-tls-* turns
 * on TLS for both, and for the egresses dialling them).
 */
export function zonePeerTls(host: (id: number) => string): ZonePeerTls {
  const dir = tempDir('walproxy-zone-peers-');
  const ca = makeCa(dir, 'zone-peer-ca');
  for (const id of BROKER_IDS) {
    const address = host(id);
    const san = /^[\d.]+$/.test(address) ? `IP:${address}` : `DNS:${address}`;
    issueCert(ca, { cn: `sidecar-${id}`, san: [san, 'IP:127.0.0.1'], name: `sidecar-${id}` });
  }
  return {
    flags: (id) => [
      `--replication-tls-cert=${path.join(dir, `sidecar-${id}.crt`)}`,
      `--replication-tls-key=${path.join(dir, `sidecar-${id}.key`)}`,
      `--replication-tls-ca=${ca.certPath}`,
    ],
    remove: () => removeDir(dir),
  };
}
