// The `--zone*` flags of `walproxy sidecar` (issue #15, docs/zone-local.md) and their validation.
// With `--zone` unset the sidecar routes nothing by zone and every client works as before.
import type { Argv } from 'yargs';
import type { HostPort } from '../net/proxy-listener.js';
import {
  addressTemplate,
  boolFlag,
  boolOption,
  brokerAddresses,
  brokerIds,
  type FlagErrorSink,
  flagText,
  hostPortFlag,
  list,
  parseHostPort,
  present,
} from './flag-values.js';

/** Zone-local routing: where zone-aware clients are sent and which listeners carry them. */
export interface ZoneConfig {
  /** This sidecar's zone; also the rack id its broker's replicas carry (`broker.rack`). */
  zone: string;
  /** The zone egress for broker id N listens on egressListenHost:egressListenBase+N. */
  egressListenHost: string;
  egressListenBase: number;
  egressBrokerIds: number[];
  /** Zone ingress of each broker id: explicit entries win over the template. */
  ingressAddresses: Map<number, HostPort>;
  ingressAddressTemplate?: string;
  /** Where peers' zone egresses hand over the connections of zone-aware clients to this broker. */
  ingressListen?: HostPort;
  /** A fixed-port bootstrap for clients of this zone: the zone egress for this pod's broker. */
  bootstrapListen?: HostPort;
  /**
   * The hosts of each zone's zone egress listeners (the port is egressListenBase + node id).
   * With several, node N is given hosts[N mod count]: deterministic, so a client never sees a
   * node's address change between two Metadata answers.
   */
  sidecarHosts: Map<string, string[]>;
  /** A client.rack seen in a Fetch marks the client (address + client.id) as in that zone. */
  rackFromFetch: boolean;
  /**
   * Test rigs only: the zone ingress takes peers without mutual TLS. Otherwise a sidecar with a
   * zone ingress refuses to start without replication mTLS requiring client certificates.
   */
  allowUnauthenticatedPeers: boolean;
}

export const ZONE_DEFAULTS = {
  'zone-egress-listen-host': '0.0.0.0',
  'zone-client-rack': 'true',
  'zone-ingress-unauthenticated': 'false',
} as const;

export function zoneFlagOptions<T>(yargs: Argv<T>): Argv<T> {
  return yargs
    .option('zone', {
      type: 'string',
      requiresArg: true,
      describe:
        "zone-local routing: this sidecar's zone, its broker's broker.rack; unset = no zone routing (docs/zone-local.md)",
    })
    .option('zone-egress-listen-base', {
      type: 'string',
      requiresArg: true,
      describe:
        'zone egress for broker id N listens on base+N; zone-aware clients are given <zone host>:base+N for node N',
    })
    .option('zone-egress-listen-host', {
      type: 'string',
      describe: 'address the zone egress listeners bind (clients of this zone dial them)',
      default: ZONE_DEFAULTS['zone-egress-listen-host'],
    })
    .option('zone-egress-broker-ids', {
      type: 'string',
      array: true,
      describe:
        'broker ids to open a zone egress for (comma-separated or repeated); default: our own, --egress-broker-ids and the ids in --zone-ingress-address',
    })
    .option('zone-ingress-listen', {
      type: 'string',
      describe:
        "zone ingress host:port: peers' zone egresses forward zone-aware clients to this broker here; only peers with a certificate from --replication-tls-ca (mutual TLS as the replication ingress, required)",
    })
    .option(
      'zone-ingress-unauthenticated',
      boolOption(
        'TEST RIGS ONLY (true/false): the zone ingress takes peers without mutual TLS, so anyone reaching it can make this sidecar read the stores --wal-read-store-url allows and hand the broker what they name; a warning is logged at every start. false: a zone ingress needs --replication-tls-* with required client certificates',
        ZONE_DEFAULTS['zone-ingress-unauthenticated'],
      ),
    )
    .option('zone-ingress-address-template', {
      type: 'string',
      describe: "zone ingress of broker {id}, e.g. 'kafka-{id}.kafka-headless:9194'",
    })
    .option('zone-ingress-address', {
      type: 'string',
      array: true,
      describe: 'zone ingress of one broker as <id>=<host:port> (repeatable); wins over the template',
    })
    .option('zone-bootstrap-listen', {
      type: 'string',
      describe:
        "a fixed host:port bootstrap for this zone's clients (same as the zone egress for our own broker)",
    })
    .option('zone-sidecar', {
      type: 'string',
      array: true,
      describe:
        "<zone>=<host>: a host where that zone's clients reach zone egress listeners (repeatable, several per zone spread nodes)",
    })
    .option(
      'zone-client-rack',
      boolOption(
        'a client.rack seen in a Fetch makes that client (address + client.id) zone-aware (true/false)',
        ZONE_DEFAULTS['zone-client-rack'],
      ),
    );
}

/** Zone names as Kafka racks are written: no '=' or ',' (flag syntax), no spaces. */
const ZONE_NAME = /^[A-Za-z0-9._:-]+$/;

/**
 * Reads the `--zone*` flags; undefined (and no error) when `--zone` is unset, unless another zone
 * flag is set without it. `replicationEgressIds` are the ids the replication egress serves: in a
 * pod-per-namespace layout every broker id, which a zone egress needs too.
 */
export function parseZoneConfig(
  raw: Record<string, unknown>,
  errors: FlagErrorSink,
  {
    brokerId,
    replicationEgressIds,
  }: { brokerId: number | undefined; replicationEgressIds: readonly number[] },
): ZoneConfig | undefined {
  const zone = flagText(raw, 'zone');
  if (zone === undefined) {
    for (const flag of [
      'zone-egress-listen-base',
      'zone-ingress-listen',
      'zone-bootstrap-listen',
      'zone-sidecar',
      'zone-ingress-address',
      'zone-ingress-address-template',
      'zone-egress-broker-ids',
    ]) {
      if (present(raw[flag]) && list(raw[flag]).length > 0) errors.add(flag, 'is used only with --zone');
    }
    return undefined;
  }
  if (!ZONE_NAME.test(zone)) errors.add('zone', `'${zone}' is not a zone name (letters, digits, . _ : -)`);

  const baseText = flagText(raw, 'zone-egress-listen-base');
  const base = Number(baseText);
  if (baseText === undefined) {
    errors.add(
      'zone-egress-listen-base',
      'is required with --zone (zone egress for broker N listens on base+N)',
    );
  } else if (!Number.isInteger(base) || base < 1 || base > 65_535) {
    errors.add('zone-egress-listen-base', `'${baseText}' is not a port from 1 to 65535`);
  }

  const ingressAddresses = brokerAddresses(list(raw['zone-ingress-address']), 'zone-ingress-address', errors);
  const template = addressTemplate(
    raw,
    'zone-ingress-address-template',
    'kafka-{id}.kafka-headless:9194',
    errors,
  );

  const rawIds = list(raw['zone-egress-broker-ids']);
  const egressBrokerIds = brokerIds(rawIds, 'zone-egress-broker-ids', errors);
  if (rawIds.length === 0) {
    const ids = new Set([...replicationEgressIds, ...ingressAddresses.keys()]);
    if (brokerId !== undefined) ids.add(brokerId);
    egressBrokerIds.push(...[...ids].sort((a, b) => a - b));
  }
  for (const id of egressBrokerIds) {
    if (Number.isInteger(base) && base + id > 65_535)
      errors.add('zone-egress-listen-base', `base ${base} + broker id ${id} is past port 65535`);
    // Our own broker is reached on the loopback upstream, not through a zone ingress.
    if (id !== brokerId && !ingressAddresses.has(id) && template === undefined) {
      errors.add(
        'zone-ingress-address',
        `no zone ingress for broker ${id}: give --zone-ingress-address=${id}=host:port or --zone-ingress-address-template`,
      );
    }
  }

  const sidecarHosts = new Map<string, string[]>();
  for (const entry of list(raw['zone-sidecar'])) {
    const match = /^([^=]+)=([^=:\s]+|\[[0-9a-fA-F:.]+\])$/.exec(entry);
    if (!match || !ZONE_NAME.test(match[1]!)) {
      errors.add('zone-sidecar', `'${entry}' is not <zone>=<host>`);
      continue;
    }
    const hosts = sidecarHosts.get(match[1]!) ?? [];
    hosts.push(match[2]!.replace(/^\[|\]$/g, ''));
    sidecarHosts.set(match[1]!, hosts);
  }
  if (!sidecarHosts.has(zone)) {
    errors.add(
      'zone-sidecar',
      `no host for our own zone: give --zone-sidecar=${zone}=<host clients reach us at>`,
    );
  }

  const ingressListen = hostPortFlag(raw, 'zone-ingress-listen', errors);
  const bootstrapListen = hostPortFlag(raw, 'zone-bootstrap-listen', errors);
  const defaultOn = (flag: keyof typeof ZONE_DEFAULTS): boolean => ZONE_DEFAULTS[flag] === 'true';
  const rackFromFetch = boolFlag(raw, 'zone-client-rack', errors) ?? defaultOn('zone-client-rack');
  const allowUnauthenticatedPeers =
    boolFlag(raw, 'zone-ingress-unauthenticated', errors) ?? defaultOn('zone-ingress-unauthenticated');

  const config: ZoneConfig = {
    zone,
    egressListenHost: flagText(raw, 'zone-egress-listen-host') ?? ZONE_DEFAULTS['zone-egress-listen-host'],
    egressListenBase: base,
    egressBrokerIds,
    ingressAddresses,
    sidecarHosts,
    rackFromFetch,
    allowUnauthenticatedPeers,
  };
  if (template !== undefined) config.ingressAddressTemplate = template;
  if (ingressListen) config.ingressListen = ingressListen;
  if (bootstrapListen) config.bootstrapListen = bootstrapListen;
  return config;
}

/** The zone ingress of broker `id`: an explicit --zone-ingress-address, else the template. */
export function zoneIngressAddress(config: ZoneConfig, id: number): HostPort {
  const explicit = config.ingressAddresses.get(id);
  if (explicit) return explicit;
  const resolved = parseHostPort(config.ingressAddressTemplate!.replaceAll('{id}', String(id)));
  if (typeof resolved === 'string') throw new Error(resolved);
  return resolved;
}
