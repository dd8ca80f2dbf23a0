import {
  DESCRIBE_CLUSTER_BROKERS,
  type DescribeClusterResponse,
  type FindCoordinatorResponse,
  type MetadataResponse,
  type NodeEndpoint,
} from '@walproxy/shared';
import type { HostPort } from '../net/proxy-listener.js';

/** The address a zone-aware client should use for a node; undefined keeps the broker's. */
export type NodeAddress = (nodeId: number) => HostPort | undefined;

/**
 * The broker addresses of every response a client learns them from (Kafka 4.4's message
 * definitions, fields named Host that hold a broker's address):
 * - Metadata `Brokers`, FindCoordinator (v0-3 top level, v4+ `Coordinators`), DescribeCluster
 *   `Brokers` (brokers only: EndpointType 2 lists controllers, reached without walproxy);
 * - KIP-951 `NodeEndpoints` of Produce v10+ and Fetch v16+ (and ShareFetch / ShareAcknowledge,
 *   not rewritten yet: docs/zone-local.md).
 * Raft responses (Vote, BeginQuorumEpoch, DescribeQuorum…) name controllers; DescribeAcls and
 * StreamsGroup* carry ACL hosts and application endpoints, not brokers. Racks are kept: they
 * say where the replica is, which is what a rack-aware client needs.
 *
 * Each function edits the message in place and returns whether anything changed.
 */
function moved(current: { host: string; port: number }, to: HostPort | undefined): boolean {
  if (to === undefined || (current.host === to.host && current.port === to.port)) return false;
  current.host = to.host;
  current.port = to.port;
  return true;
}

export function rewriteMetadata(m: MetadataResponse, address: NodeAddress): boolean {
  let changed = false;
  for (const broker of m.brokers) changed = moved(broker, address(broker.nodeId)) || changed;
  return changed;
}

export function rewriteDescribeCluster(m: DescribeClusterResponse, address: NodeAddress): boolean {
  if ((m.endpointType ?? DESCRIBE_CLUSTER_BROKERS) !== DESCRIBE_CLUSTER_BROKERS) return false;
  let changed = false;
  for (const broker of m.brokers) changed = moved(broker, address(broker.brokerId)) || changed;
  return changed;
}

export function rewriteFindCoordinator(m: FindCoordinatorResponse, address: NodeAddress): boolean {
  let changed = false;
  if (m.coordinators !== undefined) {
    for (const c of m.coordinators) {
      // An error answer names node -1 at "":-1; there is nothing to route.
      if (c.errorCode === 0) changed = moved(c, address(c.nodeId)) || changed;
    }
    return changed;
  }
  if (m.errorCode === 0 && m.nodeId !== undefined && m.host !== undefined && m.port !== undefined) {
    const current = { host: m.host, port: m.port };
    if (moved(current, address(m.nodeId))) {
      m.host = current.host;
      m.port = current.port;
      changed = true;
    }
  }
  return changed;
}

export function rewriteNodeEndpoints(endpoints: NodeEndpoint[] | undefined, address: NodeAddress): boolean {
  let changed = false;
  for (const endpoint of endpoints ?? []) changed = moved(endpoint, address(endpoint.nodeId)) || changed;
  return changed;
}
