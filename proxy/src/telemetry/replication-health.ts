// What the replication-health rules read from a sidecar besides its listeners' counters: the
// partitions its broker leads that are under-replicated (from the Metadata the topic-id lookups
// read anyway) and the seconds until the certificates it loaded expire. Read at collection.
import { X509Certificate } from 'node:crypto';
import type { Meter } from '@opentelemetry/api';
import type { TelemetrySources } from './sources.js';

export function observeReplicationHealth(meter: Meter, sources: TelemetrySources): void {
  const partitions = sources.wal?.partitions;
  if (partitions) {
    meter
      .createObservableGauge('walproxy.partitions.under_replicated', {
        unit: '{partition}',
        description:
          "Partitions this sidecar's broker leads whose ISR is smaller than their replica set, as its Metadata said at the last topic-id refresh (every 30 s): Kafka's UnderReplicatedPartitions; none before the first refresh",
      })
      .addCallback((r) => {
        const p = partitions();
        if (p) r.observe(p.underReplicated);
      });
  }

  const tls = sources.tls;
  if (tls) {
    // Peers refuse an expired certificate: replication over mutual TLS stops when either side's does.
    meter
      .createObservableGauge('walproxy.tls.certificate.expiry.seconds', {
        unit: 's',
        description:
          'Seconds until the earliest certificate of a loaded TLS file expires (negative: expired), by tls (the identity: client ingress, replication ingress, peer client, zone ingress, metadata client) and file (cert: the certificate and its chain; ca: the CA bundle that verifies peers)',
      })
      .addCallback((r) => {
        const now = Date.now();
        for (const { name, cert, ca } of tls()) {
          for (const [file, pem] of [
            ['cert', cert],
            ['ca', ca],
          ] as const) {
            const notAfter = pem ? earliestNotAfterMs(pem) : undefined;
            if (notAfter !== undefined) r.observe((notAfter - now) / 1000, { tls: name, file });
          }
        }
      });
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
/** Per PEM buffer (a snapshot's bytes never change; a reload brings new ones). */
const notAfterByPem = new WeakMap<Buffer, number | undefined>();

/** The earliest notAfter (epoch ms) of the certificates in a PEM file; undefined when none parses. */
export function earliestNotAfterMs(pem: Buffer): number | undefined {
  if (notAfterByPem.has(pem)) return notAfterByPem.get(pem);
  let earliest: number | undefined;
  for (const block of pem.toString('utf8').match(PEM_CERTIFICATE) ?? []) {
    let notAfter: number;
    try {
      notAfter = Date.parse(new X509Certificate(block).validTo);
    } catch {
      continue;
    }
    if (earliest === undefined || notAfter < earliest) earliest = notAfter;
  }
  notAfterByPem.set(pem, earliest);
  return earliest;
}
