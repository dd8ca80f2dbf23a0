import type { ZoneConfig } from '../../src/config/zone-flags.js';

/** Two zones, this sidecar in zone-a, brokers 1–3: the zone-local produce tests' and fuzzers' configuration. */
export const zoneConfig: ZoneConfig = {
  zone: 'zone-a',
  egressListenHost: '0.0.0.0',
  egressListenBase: 61_000,
  egressBrokerIds: [1, 2, 3],
  ingressAddresses: new Map(),
  sidecarHosts: new Map([
    ['zone-a', ['10.0.1.1']],
    ['zone-b', ['10.0.2.1']],
  ]),
  rackFromFetch: true,
};
