import { describe, expect, it } from 'vitest';
import { parseSidecarConfig } from '../../src/config/sidecar-config.js';
import { zoneIngressAddress } from '../../src/config/zone-flags.js';

const base = {
  'broker-id': '1',
  'client-listen': '0.0.0.0:9192',
  'client-upstream': '127.0.0.1:9092',
  'egress-listen-base': '19000',
  'peer-address-template': 'kafka-{id}.kafka-headless:9193',
  'egress-broker-ids': '1,2,3',
};

const zoned = {
  ...base,
  zone: 'zone-a',
  'zone-egress-listen-base': '29000',
  'zone-ingress-listen': '0.0.0.0:9194',
  'zone-ingress-address-template': 'kafka-{id}.kafka-headless:9194',
  'zone-sidecar': ['zone-a=kafka-zone-a', 'zone-b=kafka-zone-b', 'zone-c=10.0.3.1,zone-c=10.0.3.2'],
  // No certificates in these parse-only tests (zone-ingress-auth.test.ts has them).
  'zone-ingress-unauthenticated': 'true',
};

function parse(raw: Record<string, unknown>) {
  const result = parseSidecarConfig(raw);
  if ('errors' in result) throw new Error(result.errors.join('\n'));
  return result.config;
}

function errorsOf(raw: Record<string, unknown>): string[] {
  const result = parseSidecarConfig(raw);
  return 'errors' in result ? result.errors : [];
}

describe('zone flags', () => {
  it('leave zone routing off when --zone is unset', () => {
    expect(parse(base).zone).toBeUndefined();
  });

  it('open a zone egress for every broker the replication egress serves, and know each zone`s hosts', () => {
    const zone = parse(zoned).zone!;
    expect(zone).toMatchObject({
      zone: 'zone-a',
      egressListenHost: '0.0.0.0',
      egressListenBase: 29000,
      egressBrokerIds: [1, 2, 3],
      ingressListen: { host: '0.0.0.0', port: 9194 },
      rackFromFetch: true,
      allowUnauthenticatedPeers: true,
    });
    expect(zone.sidecarHosts).toEqual(
      new Map([
        ['zone-a', ['kafka-zone-a']],
        ['zone-b', ['kafka-zone-b']],
        ['zone-c', ['10.0.3.1', '10.0.3.2']],
      ]),
    );
    expect(zoneIngressAddress(zone, 3)).toEqual({ host: 'kafka-3.kafka-headless', port: 9194 });
  });

  it('take explicit zone ingress addresses over the template', () => {
    const zone = parse({ ...zoned, 'zone-ingress-address': ['2=10.0.0.2:7000'] }).zone!;
    expect(zoneIngressAddress(zone, 2)).toEqual({ host: '10.0.0.2', port: 7000 });
    expect(zoneIngressAddress(zone, 3)).toEqual({ host: 'kafka-3.kafka-headless', port: 9194 });
  });

  it('report each missing or bad setting naming its flag', () => {
    expect(
      errorsOf({
        ...base,
        zone: 'zone a',
        'zone-sidecar': ['zone-b'],
        'zone-client-rack': 'maybe',
        'zone-ingress-unauthenticated': 'yes',
      }),
    ).toEqual([
      "--zone: 'zone a' is not a zone name (letters, digits, . _ : -)",
      '--zone-egress-listen-base: is required with --zone (zone egress for broker N listens on base+N)',
      '--zone-ingress-address: no zone ingress for broker 2: give --zone-ingress-address=2=host:port or --zone-ingress-address-template',
      '--zone-ingress-address: no zone ingress for broker 3: give --zone-ingress-address=3=host:port or --zone-ingress-address-template',
      "--zone-sidecar: 'zone-b' is not <zone>=<host>",
      '--zone-sidecar: no host for our own zone: give --zone-sidecar=zone a=<host clients reach us at>',
      "--zone-client-rack: 'maybe' is not true or false",
      "--zone-ingress-unauthenticated: 'yes' is not true or false",
    ]);
  });

  it('refuse zone flags without --zone', () => {
    expect(errorsOf({ ...base, 'zone-egress-listen-base': '29000' })).toEqual([
      '--zone-egress-listen-base: is used only with --zone',
    ]);
  });

  it('refuse a zone egress port past 65535', () => {
    expect(errorsOf({ ...zoned, 'zone-egress-listen-base': '65534' })).toEqual([
      '--zone-egress-listen-base: base 65534 + broker id 2 is past port 65535',
      '--zone-egress-listen-base: base 65534 + broker id 3 is past port 65535',
    ]);
  });
});
