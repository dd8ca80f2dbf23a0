import { describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../src/config/sidecar-config.js';
import { createLogger } from '../../src/log.js';
import { Sidecar } from '../../src/sidecar.js';

describe('a sidecar with --zone', () => {
  it('opens a zone egress per broker id, the zone ingress and the zone bootstrap beside its other listeners', async () => {
    const parsed = parseSidecarConfig({
      'broker-id': '2',
      'client-listen': '127.0.0.1:9',
      'client-upstream': '127.0.0.1:1',
      'replication-listen': '127.0.0.1:9',
      'replication-upstream': '127.0.0.1:1',
      'egress-listen-base': '1000',
      'egress-broker-ids': '1,2,3',
      'peer-address-template': 'kafka-{id}:9193',
      'admin-listen': 'off',
      zone: 'zone-b',
      'zone-egress-listen-base': '2000',
      'zone-ingress-listen': '127.0.0.1:9',
      'zone-bootstrap-listen': '127.0.0.1:9',
      'zone-ingress-address-template': 'kafka-{id}:9194',
      'zone-sidecar': 'zone-b=kafka-zone-b',
      // The listeners' layout only (zone-ingress-auth.test.ts starts one with mTLS).
      'zone-ingress-unauthenticated': 'true',
    });
    if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
    const sidecar = new Sidecar(parsed.config, createLogger('silent'));
    // In stop's drain order: the zone listeners carry client traffic, so they drain with the
    // client ingress, before the replication paths.
    expect(sidecar.listeners.map((l) => `${l.options.name} ${l.options.listen.port}`)).toEqual([
      'client 9',
      'zone-egress-1 2001',
      'zone-egress-2 2002',
      'zone-egress-3 2003',
      'zone-bootstrap 9',
      'zone-ingress 9',
      'replication 9',
      'egress-1 1001',
      'egress-2 1002',
      'egress-3 1003',
    ]);
    expect(sidecar.counters().zone).toMatchObject({ clientIngress: { metadataRewritten: 0 } });
  });
});
