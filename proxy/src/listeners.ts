// The listeners of one sidecar, built from its configuration (the Sidecar class comment draws
// them): each with its TLS material, its upstream and its filters — the WAL parts' filters among
// them when --wal-store-url is set (wal-parts.ts), the zone filters and listeners with --zone.
// Nothing here opens a socket: Sidecar.start() does, and Sidecar.stop() drains the three groups
// in their order.
import { peerAddress, type SidecarConfig, zoneIngressAuthRefusal } from './config/sidecar-config.js';
import { ApiVersionsFilter } from './filters/api-versions.js';
import { FetchEpochWaitFilter } from './filters/fetch-epoch-wait.js';
import type { SaslHandshakeFilter } from './filters/sasl-handshake.js';
import type { Logger } from './log.js';
import type { MemoryBounds } from './memory-budget.js';
import { BrokerFence } from './net/controller-tap.js';
import type { FrameFilter, FrameObserver } from './net/frame-filter.js';
import { ProxyListener } from './net/proxy-listener.js';
import { TlsFileError, type TlsFiles, TlsMaterial } from './net/tls-material.js';
import { SidecarConfigError } from './sidecar-config-error.js';
import { normalizeStoreUrl } from './wal/peer-store-readers.js';
import { createWalParts, type WalParts } from './wal-parts.js';
import { ZONE_ROUTED_APIS } from './zone/zone-route-filter.js';
import { ZoneRouting } from './zone/zone-routing.js';

export interface ListenersOptions {
  log: Logger;
  /** The sidecar's memory bounds: each connection's buffers, and the WAL parts' caches and queues. */
  memory: MemoryBounds;
  /** On every listener (tests). */
  observer?: FrameObserver | undefined;
  /** The SaslHandshake filter every Kafka listener carries, which the sidecar reports. */
  saslHandshake: SaslHandshakeFilter;
}

/** What a sidecar serves, in the groups a stop drains one after another. */
export interface Listeners {
  /** The client ingress, and with --zone the zone listeners: drained first at a stop. */
  client: ProxyListener[];
  /** Replication ingress and egress: serve (and accept reconnects) until the clients drained. */
  replication: ProxyListener[];
  /** The controller path: closed last, so the broker keeps its controller while anything drains. */
  controller: ProxyListener[];
  /** Reads the broker's heartbeats on the controller path, with --fence-on-stop. */
  brokerFence?: BrokerFence;
  /** On every egress listener: asks a partition again early while its new leader catches up. */
  fetchEpochWait?: FetchEpochWaitFilter;
  /** Certificates in use, each re-read every second once started. */
  tlsMaterials: TlsMaterial[];
  /** The WAL parts, with --wal-store-url. */
  wal?: WalParts;
  /** Zone-local routing of clients, with --zone. */
  zoneRouting?: ZoneRouting;
}

/**
 * Builds every listener of the configuration; throws SidecarConfigError for what the operator
 * must fix (a zone ingress without peer authentication, TLS files or a store URL that do not load).
 */
export function buildListeners(config: SidecarConfig, options: ListenersOptions): Listeners {
  const { log, memory, observer, saslHandshake } = options;
  if (config.zone?.ingressListen) {
    // Before anything opens. A configuration built in code gets the check the flags get
    // (parseSidecarConfig).
    const refusal = zoneIngressAuthRefusal(config.replicationTls);
    if (refusal !== undefined && !config.zone.allowUnauthenticatedPeers)
      throw new SidecarConfigError('zone-ingress-listen', refusal);
    if (refusal !== undefined) {
      log.warn(
        { listen: config.zone.ingressListen },
        'ZONE INGRESS WITHOUT PEER AUTHENTICATION (--zone-ingress-unauthenticated=true, for test rigs only): anyone who reaches it can make this sidecar read the stores --wal-read-store-url allows and hand the broker what they name',
      );
    }
  }
  const built: Listeners = { client: [], replication: [], controller: [], tlsMaterials: [] };
  const common = {
    maxFrameBytes: config.maxFrameBytes,
    maxBufferedBytes: memory.maxBufferedBytes,
    log,
    ...(observer ? { observer } : {}),
  };
  const filters: FrameFilter[] = [new ApiVersionsFilter(), saslHandshake];
  // On the listeners zone routing filters, their ApiVersions answers also cap what it rewrites.
  const routedFilters: FrameFilter[] = config.zone
    ? [new ApiVersionsFilter(ZONE_ROUTED_APIS), saslHandshake]
    : filters;
  const material = (files: TlsFiles, name: string, flagPrefix: string) => {
    try {
      const loaded = new TlsMaterial(files, { name, log });
      built.tlsMaterials.push(loaded);
      return loaded;
    } catch (error) {
      // Validated at parse time; the files changed in between.
      if (error instanceof TlsFileError)
        throw new SidecarConfigError(`${flagPrefix}-${error.role}`, error.message);
      throw error;
    }
  };
  const metadataTls = config.wal?.metadata.tls;
  const metadataMaterial =
    metadataTls && Object.keys(metadataTls.files).length > 0
      ? material(metadataTls.files, 'metadata client', 'metadata-tls')
      : undefined;
  const wal = config.wal ? createWalParts(config, log, metadataMaterial, memory) : undefined;
  if (wal) built.wal = wal;
  // Only the client ingress sees Produce; followers only fetch.
  const clientFilters = wal ? [...routedFilters, wal.produceFilter] : routedFilters;
  const clientTls = config.clientTls
    ? {
        material: material(config.clientTls.files, 'client ingress', 'client-tls'),
        clientAuth: config.clientTls.clientAuth,
      }
    : undefined;
  const peerTls = config.peerTls;
  const peerMaterial = peerTls ? material(peerTls.files, 'peer client', 'peer-tls') : undefined;
  const upstreamTlsFor = (id: number) =>
    peerTls && peerMaterial
      ? {
          material: peerMaterial,
          verifyHostname: peerTls.verifyHostname,
          ...(peerTls.serverName !== undefined
            ? { serverName: peerTls.serverName.replaceAll('{id}', String(id)) }
            : {}),
        }
      : undefined;
  if (config.zone) {
    built.zoneRouting = new ZoneRouting({
      ...common,
      brokerId: config.brokerId,
      memory,
      zone: config.zone,
      clientUpstream: config.clientUpstream,
      brokerFilters: clientFilters,
      peerFilters: routedFilters,
      ingressFilters: wal ? [...filters, wal.produceFilter] : filters,
      ...(clientTls ? { clientTls } : {}),
      ...(config.replicationTls
        ? {
            ingressTls: {
              material: material(config.replicationTls.files, 'zone ingress', 'replication-tls'),
              clientAuth: config.replicationTls.clientAuth,
            },
          }
        : {}),
      upstreamTls: upstreamTlsFor,
      ...(wal?.produceFill
        ? {
            zoneLocalProduce: {
              fill: wal.produceFill,
              produce: {
                writer: wal.writer,
                storeUrl: normalizeStoreUrl(config.wal!.storeUrl),
                policy: wal.policy,
                topicNames: wal.topicNames,
                health: wal.health,
                log,
              },
            },
          }
        : {}),
    });
  }
  const zoneRouting = built.zoneRouting;
  built.client.push(
    new ProxyListener({
      ...common,
      name: 'client',
      listen: config.clientListen,
      upstream: config.clientUpstream,
      filters: zoneRouting ? [...clientFilters, zoneRouting.clientIngressFilter] : clientFilters,
      ...(clientTls ? { tls: clientTls } : {}),
    }),
  );
  if (config.replicationListen && config.replicationUpstream) {
    built.replication.push(
      new ProxyListener({
        ...common,
        name: 'replication',
        listen: config.replicationListen,
        upstream: config.replicationUpstream,
        filters: wal ? [...filters, wal.fetchStrip] : filters,
        ...(config.replicationTls
          ? {
              tls: {
                material: material(config.replicationTls.files, 'replication ingress', 'replication-tls'),
                clientAuth: config.replicationTls.clientAuth,
              },
            }
          : {}),
      }),
    );
  }
  // One shared by every egress listener: a follower's fetch answered UNKNOWN_LEADER_EPOCH is asked again
  // (fetch-epoch-wait.ts).
  if (config.egressBrokerIds.length > 0) built.fetchEpochWait = new FetchEpochWaitFilter({ log });
  const epochWait = built.fetchEpochWait ? [built.fetchEpochWait] : [];
  for (const id of config.egressBrokerIds) {
    const upstreamTls = upstreamTlsFor(id);
    built.replication.push(
      new ProxyListener({
        ...common,
        name: `egress-${id}`,
        listen: { host: config.egressListenHost, port: config.egressListenBase! + id },
        upstream: peerAddress(config, id),
        // Responses pass the filters last to first: the epoch wait sees the filled, stock answer.
        filters: wal ? [...filters, ...epochWait, wal.fetchFill] : [...filters, ...epochWait],
        ...(upstreamTls ? { upstreamTls } : {}),
      }),
    );
  }
  // The zone listeners carry client requests (and other zones' forwarded Produce): they drain
  // with the clients, before the replication paths.
  if (zoneRouting) built.client.push(...zoneRouting.listeners);
  if (config.controllerAddresses.size > 0 && config.fenceOnStop) built.brokerFence = new BrokerFence(log);
  const brokerFence = built.brokerFence;
  for (const [id, upstream] of config.controllerAddresses) {
    built.controller.push(
      new ProxyListener({
        ...common,
        name: `controller-${id}`,
        listen: { host: config.controllerListenHost, port: config.controllerListenBase! + id },
        upstream,
        filters: [],
        opaque: true,
        ...(brokerFence ? { fence: brokerFence } : {}),
      }),
    );
  }
  return built;
}
