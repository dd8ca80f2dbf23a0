/**
 * The wiring rules of the sidecar topology (docs/architecture.md, "Topology"), in
 * one pure module that both the e2e harness (`kafka-cluster.ts`) and the Helm chart's test
 * (`deploy/test/chart-topology.test.ts`) follow, so the chart cannot drift from what the e2e suite
 * runs.
 *
 * - The broker's CLIENT and REPLICATION listeners are bound where only the sidecar reaches them
 *   (loopback).
 * - CLIENT is advertised at the sidecar's client ingress, so every Metadata / FindCoordinator /
 *   NodeEndpoints answer already points clients at sidecars.
 * - `inter.broker.listener.name=REPLICATION`, and broker N advertises REPLICATION at
 *   `localhost:<egressBase+N>`: a follower resolves that inside its own pod, where its own sidecar's
 *   egress for N forwards to N's replication ingress.
 * - The broker's KRaft controller traffic goes through its own sidecar (fate sharing): the broker's
 *   `controller.quorum.voters` names, for each voter V, `<controllerListenHost>:<controllerBase+V>`
 *   in its own pod, where the sidecar forwards the bytes unread to V. A dead sidecar so stops its
 *   broker's heartbeats, and the controller fences the broker as it would a dead one. Controllers
 *   keep their own, real, voter addresses. This needs a static quorum (kraft.version 0): with a
 *   dynamic one (KIP-853) brokers take the voters' endpoints from the metadata log.
 *
 * No I/O, no defaults that depend on the machine: every address comes in as an argument.
 */

/** Names of the listeners the topology defines. */
export const CLIENT_LISTENER = 'CLIENT';
export const REPLICATION_LISTENER = 'REPLICATION';
export const CONTROLLER_LISTENER = 'CONTROLLER';

/** A listener outside the topology (the harness's DIRECT baseline), bound and optionally advertised. */
export interface ExtraListener {
  name: string;
  /** `host:port` in `listeners` (host may be empty: `:9094`). */
  bind: string;
  /** `host:port` in `advertised.listeners`; absent: not advertised (e.g. CONTROLLER in combined mode). */
  advertised?: string;
}

export interface BrokerListenerInput {
  brokerId: number;
  /** Where the data listeners bind; loopback, so that only the sidecar reaches them. */
  upstreamHost: string;
  clientUpstreamPort: number;
  replicationUpstreamPort: number;
  /** The sidecar's client ingress as clients reach it (a pod's DNS name, or 127.0.0.1 in the harness). */
  clientAdvertisedHost: string;
  clientAdvertisedPort: number;
  /** Egress for broker id N listens on egressBase + N. */
  egressBase: number;
  /** `broker.rack` (KIP-392); absent: not set. */
  rack?: string;
  /**
   * false: the stock baseline with no sidecar: CLIENT and REPLICATION are advertised where they
   * are bound. Default true.
   */
  withSidecar?: boolean;
  extraListeners?: ExtraListener[];
}

/** A KRaft controller voter as the controllers themselves know it. */
export interface ControllerVoter {
  id: number;
  /** `host:port` of its CONTROLLER listener. */
  address: string;
}

/** Where a sidecar's controller listeners are: voter V on `host:(base + V)`. */
export interface ControllerRoute {
  host: string;
  base: number;
}

/**
 * `controller.quorum.voters` of a broker: with a route, each voter at its sidecar listener in the
 * broker's own pod; without one (no sidecar, or controller traffic not routed), the real address.
 */
export function brokerQuorumVoters(voters: readonly ControllerVoter[], route?: ControllerRoute): string {
  return voters
    .map((v) => (route ? `${v.id}@${route.host}:${route.base + v.id}` : `${v.id}@${v.address}`))
    .join(',');
}

/** The host:port broker `brokerId` advertises for REPLICATION: the follower's own sidecar egress. */
export function replicationAdvertisedAddress(brokerId: number, egressBase: number): string {
  return `localhost:${egressBase + brokerId}`;
}

/** The port the egress for broker `brokerId` listens on, in every broker's pod. */
export function egressPort(brokerId: number, egressBase: number): number {
  return egressBase + brokerId;
}

/**
 * Broker properties that wire one broker behind its sidecar: `listeners`, `advertised.listeners`,
 * `listener.security.protocol.map`, `inter.broker.listener.name` and (with a rack) `broker.rack`,
 * in that order.
 */
export function brokerListenerSettings(input: BrokerListenerInput): Record<string, string> {
  const withSidecar = input.withSidecar ?? true;
  const extra = input.extraListeners ?? [];
  const clientBind = `${input.upstreamHost}:${input.clientUpstreamPort}`;
  const replicationBind = `${input.upstreamHost}:${input.replicationUpstreamPort}`;
  const clientAdvertised = withSidecar
    ? `${input.clientAdvertisedHost}:${input.clientAdvertisedPort}`
    : clientBind;
  const replicationAdvertised = withSidecar
    ? replicationAdvertisedAddress(input.brokerId, input.egressBase)
    : replicationBind;
  const listeners = [
    `${CLIENT_LISTENER}://${clientBind}`,
    `${REPLICATION_LISTENER}://${replicationBind}`,
    ...extra.map((l) => `${l.name}://${l.bind}`),
  ];
  const advertised = [
    `${CLIENT_LISTENER}://${clientAdvertised}`,
    `${REPLICATION_LISTENER}://${replicationAdvertised}`,
    ...extra.filter((l) => l.advertised !== undefined).map((l) => `${l.name}://${l.advertised}`),
  ];
  const names = [
    CLIENT_LISTENER,
    REPLICATION_LISTENER,
    ...extra.map((l) => l.name).filter((n) => n !== CONTROLLER_LISTENER),
    CONTROLLER_LISTENER,
  ];
  const settings: Record<string, string> = {
    listeners: listeners.join(','),
    'advertised.listeners': advertised.join(','),
    'listener.security.protocol.map': names.map((n) => `${n}:PLAINTEXT`).join(','),
    'inter.broker.listener.name': REPLICATION_LISTENER,
  };
  if (input.rack !== undefined) settings['broker.rack'] = input.rack;
  return settings;
}

/**
 * Which broker ids a sidecar opens an egress for.
 * - 'shared-namespace' (the e2e harness: every process shares one `localhost`): each sidecar hosts
 *   only the egress for its own id, and every other broker's fetcher shares it.
 * - 'pod-namespace' (Kubernetes: each pod has its own `localhost`): every sidecar opens an egress
 *   for every broker id, since its broker may follow any leader. Its own id is included; the
 *   broker never dials itself, so that listener stays idle.
 */
export type NetworkLayout = 'shared-namespace' | 'pod-namespace';

export function egressBrokerIds(
  layout: NetworkLayout,
  brokerId: number,
  allBrokerIds: readonly number[],
): number[] {
  return layout === 'shared-namespace' ? [brokerId] : [...allBrokerIds];
}

export interface SidecarFlagsInput {
  brokerId: number;
  /** `host:port` of each listener. */
  clientListen: string;
  clientUpstream: string;
  replicationListen: string;
  replicationUpstream: string;
  egressBase: number;
  egressBrokerIds: readonly number[];
  /** Replication ingress of each broker: a template with `{id}`, or explicit `id → host:port`. */
  peers: { template: string } | { addresses: ReadonlyArray<readonly [number, string]> };
  /** `host:port` of /healthz and /counters; absent: the sidecar's default. */
  adminListen?: string;
  /** The controller path: one listener per voter on `base + id`, forwarding to its address. */
  controllers?: { listenBase: number; voters: readonly ControllerVoter[] };
  /** The WAL (leader side); absent: the sidecar forwards transparently. */
  wal?: { storeUrl: string; topics?: readonly string[]; topicConfigs?: readonly string[] };
}

/** The `walproxy sidecar` flags (without the `sidecar` command) that wire one sidecar. */
export function sidecarFlags(input: SidecarFlagsInput): string[] {
  const flags = [
    `--broker-id=${input.brokerId}`,
    `--client-listen=${input.clientListen}`,
    `--client-upstream=${input.clientUpstream}`,
    `--replication-listen=${input.replicationListen}`,
    `--replication-upstream=${input.replicationUpstream}`,
    `--egress-listen-base=${input.egressBase}`,
    `--egress-broker-ids=${input.egressBrokerIds.join(',')}`,
  ];
  if ('template' in input.peers) flags.push(`--peer-address-template=${input.peers.template}`);
  else flags.push(...input.peers.addresses.map(([id, address]) => `--peer-address=${id}=${address}`));
  if (input.adminListen !== undefined) flags.push(`--admin-listen=${input.adminListen}`);
  if (input.controllers) {
    flags.push(`--controller-listen-base=${input.controllers.listenBase}`);
    flags.push(...input.controllers.voters.map((v) => `--controller-address=${v.id}=${v.address}`));
  }
  if (input.wal) {
    flags.push(`--wal-store-url=${input.wal.storeUrl}`);
    flags.push(...(input.wal.topics ?? []).map((t) => `--wal-topic=${t}`));
    flags.push(...(input.wal.topicConfigs ?? []).map((c) => `--topic-config=${c}`));
  }
  return flags;
}

/**
 * The WAL store of a sidecar in zone `rack`: S3 Express One Zone directory buckets are zonal, so
 * each zone may name its own; `fallback` serves zones not listed. Undefined: no WAL store.
 */
export function walStoreUrlForZone(
  byZone: Readonly<Record<string, string>>,
  rack: string | undefined,
  fallback: string | undefined,
): string | undefined {
  if (rack !== undefined && byZone[rack] !== undefined) return byZone[rack];
  return fallback === '' ? undefined : fallback;
}
