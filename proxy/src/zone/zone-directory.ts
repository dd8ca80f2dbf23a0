import type { ZoneConfig } from '../config/zone-flags.js';
import type { HostPort } from '../net/proxy-listener.js';

/**
 * Where a zone-aware client of zone Z is told node N lives: a host of zone Z's sidecars at
 * zoneEgressBase + N. Node ids stay real (the client still reaches node N, end to end, through
 * that zone egress), only the address changes. A node with no zone egress, or a zone with no
 * configured host, keeps the address the broker advertised: that client goes the stock way.
 */
export class ZoneDirectory {
  private readonly nodes: ReadonlySet<number>;
  /** Each node's rack (its zone), as the brokers' Metadata answers name it. */
  private readonly nodeZones = new Map<number, string>();

  constructor(private readonly config: ZoneConfig) {
    this.nodes = new Set(config.egressBrokerIds);
  }

  get ownZone(): string {
    return this.config.zone;
  }

  /** Remembers node `nodeId`'s rack from a Metadata answer; only nodes with a zone egress are kept. */
  learnNodeZone(nodeId: number, rack: string | null | undefined): void {
    if (rack && this.nodes.has(nodeId)) this.nodeZones.set(nodeId, rack);
  }

  /** The zone of node `nodeId`'s replicas, once a Metadata answer named it. */
  zoneOfNode(nodeId: number): string | undefined {
    return this.nodeZones.get(nodeId);
  }

  /** Whether clients of `zone` can be routed: some sidecar host serves that zone. */
  knows(zone: string): boolean {
    return (this.config.sidecarHosts.get(zone)?.length ?? 0) > 0;
  }

  /** The address zone `zone`'s clients use for node `nodeId`, or undefined to keep the broker's. */
  addressFor(zone: string, nodeId: number): HostPort | undefined {
    if (nodeId < 0 || !this.nodes.has(nodeId)) return undefined;
    const hosts = this.config.sidecarHosts.get(zone);
    if (hosts === undefined || hosts.length === 0) return undefined;
    return { host: hosts[nodeId % hosts.length]!, port: this.config.egressListenBase + nodeId };
  }
}
