import { type ZoneConfig, zoneIngressAddress } from '../config/zone-flags.js';
import type { Logger } from '../log.js';
import type { MemoryBounds } from '../memory-budget.js';
import type { FrameFilter, FrameObserver } from '../net/frame-filter.js';
import { type HostPort, type ListenerTls, ProxyListener, type UpstreamTls } from '../net/proxy-listener.js';
import { RackMemory } from './client-zone.js';
import type { ProduceFillFilter, ProduceFillStats } from './produce-fill.js';
import { ZoneDirectory } from './zone-directory.js';
import { ZoneProduce, type ZoneProduceOptions } from './zone-produce.js';
import type { ZoneProduceStats } from './zone-produce-stats.js';
import { ZoneRouteFilter, type ZoneRouteStats } from './zone-route-filter.js';

export interface ZoneRoutingInput {
  brokerId: number;
  zone: ZoneConfig;
  /** This pod's broker's CLIENT listener. */
  clientUpstream: HostPort;
  maxFrameBytes: number;
  maxBufferedBytes: number;
  /** The zone's share of the memory budget: how much each of its memories keeps. */
  memory: Pick<MemoryBounds, 'zoneAcceptances' | 'zoneClientRacks'>;
  observer?: FrameObserver;
  log: Logger;
  /**
   * The client ingress's filters before zone routing (ApiVersions capping what zone routing
   * rewrites too, SaslHandshake, the WAL's Produce filter): the zone egress for our own broker and
   * the zone bootstrap hand requests to the broker as it does.
   */
  brokerFilters: readonly FrameFilter[];
  /** Filters of a zone egress towards a peer: only what must be answered before the broker (ApiVersions, SaslHandshake). */
  peerFilters: readonly FrameFilter[];
  /**
   * The zone ingress's filters: the client ingress's, with the ApiVersions filter of listeners zone
   * routing does not filter (the peer's zone egress caps what zone routing rewrites).
   */
  ingressFilters: readonly FrameFilter[];
  /** Zone egresses and the zone bootstrap are client-facing: they terminate TLS as the client ingress does. */
  clientTls?: ListenerTls;
  /** The zone ingress takes peers only: TLS as the replication ingress (peer certificates required). */
  ingressTls?: ListenerTls;
  /** TLS from a zone egress to broker `id`'s zone ingress, as the replication egress dials peers. */
  upstreamTls?: (id: number) => UpstreamTls | undefined;
  /**
   * Zone-local produce (present with the WAL): references on the zone egresses towards peers,
   * filled on the zone ingress before the broker's filters see the request.
   */
  zoneLocalProduce?: { produce: Omit<ZoneProduceOptions, 'directory'>; fill: ProduceFillFilter };
}

/** What /counters and the telemetry read of zone routing (cumulative counters). */
export interface ZoneRoutingStats {
  clientIngress: ZoneRouteStats;
  zoneListeners: ZoneRouteStats;
  /** With the WAL: the producer's zone side (references) and the leader's zone side (fill). */
  produce?: { references: ZoneProduceStats; fill: ProduceFillStats };
}

/**
 * The listeners and filters of zone-local routing (docs/zone-local.md):
 * - a zone egress per broker id N on zoneEgressBase+N: what zone-aware clients are given as node
 *   N's address; it forwards to N's zone ingress (to this pod's broker for our own id);
 * - the zone ingress: connections from peers' zone egresses, forwarded to this pod's broker
 *   (zone-local produce: references filled there, made on the zone egresses towards peers);
 * - the zone bootstrap, a fixed port for this zone's clients: the zone egress for our own id;
 * - the filter for the client ingress, which routes clients whose client.id or client.rack says
 *   their zone and leaves every other client as it was.
 */
export class ZoneRouting {
  readonly listeners: ProxyListener[] = [];
  /** Chain after the client ingress's own filters. */
  readonly clientIngressFilter: ZoneRouteFilter;
  private readonly zoneListenerFilter: ZoneRouteFilter;
  readonly directory: ZoneDirectory;
  /** Zone-local produce, both sides: present with the WAL. */
  readonly produce?: { references: ZoneProduce; fill: ProduceFillFilter };

  constructor(input: ZoneRoutingInput) {
    const { zone, log } = input;
    this.directory = new ZoneDirectory(zone);
    // One memory for all listeners: a client's Fetch on any connection teaches every later one.
    const rackMemory = new RackMemory(input.memory.zoneClientRacks);
    const routeOptions = { directory: this.directory, rackMemory, rackFromFetch: zone.rackFromFetch, log };
    this.clientIngressFilter = new ZoneRouteFilter(routeOptions);
    this.zoneListenerFilter = new ZoneRouteFilter({ ...routeOptions, listenerZone: zone.zone });
    const common = {
      maxFrameBytes: input.maxFrameBytes,
      maxBufferedBytes: input.maxBufferedBytes,
      log,
      ...(input.observer ? { observer: input.observer } : {}),
    };
    const clientFacing = input.clientTls ? { tls: input.clientTls } : {};
    const towardsOwnBroker = [...input.brokerFilters, this.zoneListenerFilter];
    if (input.zoneLocalProduce) {
      this.produce = {
        references: new ZoneProduce({
          ...input.zoneLocalProduce.produce,
          directory: this.directory,
          maxAccepted: input.memory.zoneAcceptances,
        }),
        fill: input.zoneLocalProduce.fill,
      };
    }
    const produce = this.produce;
    for (const id of zone.egressBrokerIds) {
      const own = id === input.brokerId;
      const upstreamTls = own ? undefined : input.upstreamTls?.(id);
      this.listeners.push(
        new ProxyListener({
          ...common,
          ...clientFacing,
          name: `zone-egress-${id}`,
          listen: { host: zone.egressListenHost, port: zone.egressListenBase + id },
          upstream: own ? input.clientUpstream : zoneIngressAddress(zone, id),
          filters: own
            ? towardsOwnBroker
            : [
                ...input.peerFilters,
                // The reference is made after zone routing saw the request, and the leader's
                // answer reaches it before zone routing rewrites its addresses.
                this.zoneListenerFilter,
                ...(produce ? [produce.references.filterFor(id)] : []),
              ],
          ...(upstreamTls ? { upstreamTls } : {}),
        }),
      );
    }
    if (zone.bootstrapListen) {
      this.listeners.push(
        new ProxyListener({
          ...common,
          ...clientFacing,
          name: 'zone-bootstrap',
          listen: zone.bootstrapListen,
          upstream: input.clientUpstream,
          filters: towardsOwnBroker,
        }),
      );
    }
    if (zone.ingressListen) {
      this.listeners.push(
        new ProxyListener({
          ...common,
          ...(input.ingressTls ? { tls: input.ingressTls } : {}),
          name: 'zone-ingress',
          listen: zone.ingressListen,
          upstream: input.clientUpstream,
          // References are filled first: the WAL's Produce filter then sees the producer's bytes.
          filters: produce ? [produce.fill, ...input.ingressFilters] : input.ingressFilters,
        }),
      );
    }
  }

  /** Counters of the client ingress's routing, the zone listeners' routing and zone-local produce. */
  get stats(): ZoneRoutingStats {
    return {
      clientIngress: this.clientIngressFilter.stats,
      zoneListeners: this.zoneListenerFilter.stats,
      ...(this.produce
        ? { produce: { references: this.produce.references.stats, fill: this.produce.fill.stats } }
        : {}),
    };
  }
}
