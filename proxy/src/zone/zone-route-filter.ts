import {
  ApiKey,
  canDecode,
  decodeDescribeClusterResponse,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeFindCoordinatorResponse,
  decodeMetadataResponse,
  decodeProduceResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeDescribeClusterResponse,
  encodeFetchRequest,
  encodeFetchResponse,
  encodeFindCoordinatorResponse,
  encodeFrame,
  encodeMetadataResponse,
  encodeProduceResponse,
  fetchReplicaId,
  ProtocolError,
  peekProduceAcks,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import {
  type NodeAddress,
  rewriteDescribeCluster,
  rewriteFindCoordinator,
  rewriteMetadata,
  rewriteNodeEndpoints,
} from './address-rewrite.js';
import { type RackMemory, zoneHintOf } from './client-zone.js';
import type { ZoneDirectory } from './zone-directory.js';

/** Fetch carries RackId from v11 (KIP-392); Produce and Fetch carry NodeEndpoints from v10 / v16 (KIP-951). */
const FETCH_RACK_ID_VERSION = 11;
const PRODUCE_NODE_ENDPOINTS_VERSION = 10;
const FETCH_NODE_ENDPOINTS_VERSION = 16;

/**
 * The APIs whose responses this filter rewrites beyond Produce and Fetch, which every listener
 * caps: a zone-aware client must not be offered a version newer than walproxy decodes, or its
 * addresses would pass through unrewritten. The ApiVersions filter of every listener this filter
 * is on caps them (filters/api-versions.ts).
 */
export const ZONE_ROUTED_APIS = [ApiKey.Metadata, ApiKey.FindCoordinator, ApiKey.DescribeCluster] as const;

export interface ZoneRouteStats {
  /** Requests from clients routed by zone, by how their zone was known. */
  clientsByHint: number;
  clientsByListener: number;
  clientsByRack: number;
  metadataRewritten: number;
  findCoordinatorRewritten: number;
  describeClusterRewritten: number;
  /** Produce and Fetch responses whose KIP-951 NodeEndpoints were rewritten. */
  nodeEndpointsRewritten: number;
  /** Consumer Fetch requests given the client's zone as RackId (KIP-392). */
  fetchRackIdsSet: number;
  /** client.rack values learned from Fetch requests that name a known zone. */
  clientRacksLearned: number;
  /** Responses of a version walproxy does not decode, forwarded unrewritten. */
  versionsNotDecoded: number;
  /** Responses that failed to decode, forwarded unrewritten (the client goes the stock way). */
  undecodable: number;
  /**
   * Requests whose header or Fetch body the codec refused (e.g. a client.id that is not valid
   * UTF-8, which the broker reads with replacement characters), forwarded unchanged and their
   * answers not rewritten: the broker answers them as stock does.
   */
  requestsNotDecoded: number;
}

export interface ZoneRouteOptions {
  directory: ZoneDirectory;
  /**
   * The zone of every client of this listener whose client.id names none: this sidecar's zone on
   * a zone egress or the zone bootstrap; undefined on the client ingress, where only a hint or a
   * remembered client.rack routes a client.
   */
  listenerZone?: string;
  rackMemory: RackMemory;
  /** Whether a client.rack seen in a Fetch marks its client's zone. */
  rackFromFetch: boolean;
  log: Logger;
}

/**
 * Zone-local routing of client connections (issue #15, docs/zone-local.md). For a client whose
 * zone is known, every broker address it can learn — Metadata, FindCoordinator, DescribeCluster,
 * the KIP-951 NodeEndpoints of Produce and Fetch — becomes the zone egress for that node on a
 * sidecar of the client's zone. Node ids stay real: the client reaches node N through that zone
 * egress, end to end, so SASL, ACLs, quotas, idempotence, transactions and the KIP-1242 node check
 * are the broker's own. A consumer Fetch without a RackId gets the client's zone, so the leader's
 * RackAwareReplicaSelector names the replica in that zone as preferred read replica (KIP-392).
 *
 * A client whose zone is not known is not touched: its frames pass unchanged.
 */
export class ZoneRouteFilter implements FrameFilter {
  readonly apiKeys = new Set<number>([
    ApiKey.Metadata,
    ApiKey.FindCoordinator,
    ApiKey.DescribeCluster,
    ApiKey.Produce,
    ApiKey.Fetch,
  ]);
  readonly stats: ZoneRouteStats = {
    clientsByHint: 0,
    clientsByListener: 0,
    clientsByRack: 0,
    metadataRewritten: 0,
    findCoordinatorRewritten: 0,
    describeClusterRewritten: 0,
    nodeEndpointsRewritten: 0,
    fetchRackIdsSet: 0,
    clientRacksLearned: 0,
    versionsNotDecoded: 0,
    undecodable: 0,
    requestsNotDecoded: 0,
  };
  /** The zone each forwarded request's response is rewritten for. */
  private readonly zones = new WeakMap<RequestInfo, string>();

  constructor(private readonly options: ZoneRouteOptions) {}

  onRequest(info: RequestInfo, frame: Buffer, connection: FilterConnection): RequestDecision {
    const expectResponse =
      info.apiKey !== ApiKey.Produce || peekProduceAcks(frame.subarray(FRAME_SIZE_PREFIX_BYTES)) !== 0;
    const forward: RequestDecision = { action: 'forward', frame, expectResponse };
    // The codec is stricter than the broker in places (a client.id the broker reads with
    // replacement characters, a Fetch it answers per partition): what it refuses goes to the broker
    // unchanged, unrouted, and the broker's answer is the client's, instead of a closed connection.
    try {
      const header = decodeRequestHeader(frame.subarray(FRAME_SIZE_PREFIX_BYTES));
      let zone = this.zoneOf(header.clientId, connection);
      let out = frame;
      if (
        info.apiKey === ApiKey.Fetch &&
        info.apiVersion >= FETCH_RACK_ID_VERSION &&
        canDecode(ApiKey.Fetch, info.apiVersion)
      ) {
        const fetch = this.onFetchRequest(
          info,
          frame,
          header.headerLength,
          header.clientId,
          zone,
          connection,
        );
        out = fetch.frame;
        zone ??= fetch.rack;
      }
      if (zone !== undefined && expectResponse) this.zones.set(info, zone);
      return { action: 'forward', frame: out, expectResponse };
    } catch (error) {
      if (!(error instanceof ProtocolError)) throw error;
      this.stats.requestsNotDecoded++;
      connection.log.debug(
        { apiKey: info.apiKey, apiVersion: info.apiVersion, error: error.message },
        'zone routing: request not decoded, forwarded unchanged',
      );
      return forward;
    }
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer {
    const zone = this.zones.get(info);
    if (zone === undefined) return frame;
    this.zones.delete(info);
    if (!canDecode(info.apiKey, info.apiVersion)) {
      this.stats.versionsNotDecoded++;
      return frame;
    }
    if (info.apiKey === ApiKey.Produce && info.apiVersion < PRODUCE_NODE_ENDPOINTS_VERSION) return frame;
    if (info.apiKey === ApiKey.Fetch && info.apiVersion < FETCH_NODE_ENDPOINTS_VERSION) return frame;
    const address: NodeAddress = (nodeId) => this.options.directory.addressFor(zone, nodeId);
    try {
      return rewriteResponse(info, frame, address, this.stats, this.options.directory);
    } catch (error) {
      if (!(error instanceof ProtocolError)) throw error;
      this.stats.undecodable++;
      this.options.log.debug(
        { apiKey: info.apiKey, apiVersion: info.apiVersion, error: error.message },
        'zone routing: response not decoded, forwarded unrewritten',
      );
      return frame;
    }
  }

  /** The client's zone: its client.id hint, else the listener's zone, else a remembered client.rack. */
  private zoneOf(clientId: string | null, connection: FilterConnection): string | undefined {
    const { directory, listenerZone, rackMemory, rackFromFetch } = this.options;
    const hint = zoneHintOf(clientId);
    if (hint !== undefined && directory.knows(hint)) {
      this.stats.clientsByHint++;
      return hint;
    }
    if (listenerZone !== undefined) {
      this.stats.clientsByListener++;
      return listenerZone;
    }
    const remembered = rackFromFetch ? rackMemory.zoneOf(connection.remoteAddress, clientId) : undefined;
    if (remembered !== undefined) this.stats.clientsByRack++;
    return remembered;
  }

  /**
   * Learns a consumer's client.rack and gives a rack-less consumer fetch its client's zone. A
   * fetch-session's RackId is read on every request (KafkaApis builds the client metadata from
   * each one), so setting it on every request of the connection is consistent.
   */
  private onFetchRequest(
    info: RequestInfo,
    frame: Buffer,
    headerLength: number,
    clientId: string | null,
    zone: string | undefined,
    connection: FilterConnection,
  ): { frame: Buffer; rack?: string } {
    const bodyStart = FRAME_SIZE_PREFIX_BYTES + headerLength;
    const fetch = decodeFetchRequest(frame.subarray(bodyStart), info.apiVersion);
    // Followers never come through a client listener; a replica fetch is left as it is.
    if (fetchReplicaId(fetch) >= 0) return { frame };
    const rack = fetch.rackId ?? '';
    if (rack !== '') {
      if (this.options.rackFromFetch && this.options.directory.knows(rack)) {
        if (this.options.rackMemory.zoneOf(connection.remoteAddress, clientId) !== rack)
          this.stats.clientRacksLearned++;
        this.options.rackMemory.remember(connection.remoteAddress, clientId, rack);
        return { frame, rack };
      }
      return { frame };
    }
    if (zone === undefined) return { frame };
    fetch.rackId = zone;
    this.stats.fetchRackIdsSet++;
    return {
      frame: encodeFrame(
        frame.subarray(FRAME_SIZE_PREFIX_BYTES, bodyStart),
        encodeFetchRequest(fetch, info.apiVersion),
      ),
    };
  }
}

function rewriteResponse(
  info: RequestInfo,
  frame: Buffer,
  address: NodeAddress,
  stats: ZoneRouteStats,
  directory: ZoneDirectory,
): Buffer {
  const headerVersion = responseHeaderVersion(info.apiKey, info.apiVersion)!;
  const afterPrefix = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
  const { headerLength } = decodeResponseHeader(afterPrefix, headerVersion);
  const header = afterPrefix.subarray(0, headerLength);
  const body = afterPrefix.subarray(headerLength);
  const v = info.apiVersion;
  let encoded: Buffer | undefined;
  switch (info.apiKey) {
    case ApiKey.Metadata: {
      const m = decodeMetadataResponse(body, v);
      for (const broker of m.brokers) directory.learnNodeZone(broker.nodeId, broker.rack);
      if (rewriteMetadata(m, address)) {
        stats.metadataRewritten++;
        encoded = encodeMetadataResponse(m, v);
      }
      break;
    }
    case ApiKey.FindCoordinator: {
      const m = decodeFindCoordinatorResponse(body, v);
      if (rewriteFindCoordinator(m, address)) {
        stats.findCoordinatorRewritten++;
        encoded = encodeFindCoordinatorResponse(m, v);
      }
      break;
    }
    case ApiKey.DescribeCluster: {
      const m = decodeDescribeClusterResponse(body, v);
      if (rewriteDescribeCluster(m, address)) {
        stats.describeClusterRewritten++;
        encoded = encodeDescribeClusterResponse(m, v);
      }
      break;
    }
    case ApiKey.Produce: {
      const m = decodeProduceResponse(body, v);
      if (rewriteNodeEndpoints(m.nodeEndpoints, address)) {
        stats.nodeEndpointsRewritten++;
        encoded = encodeProduceResponse(m, v);
      }
      break;
    }
    case ApiKey.Fetch: {
      const m = decodeFetchResponse(body, v);
      if (rewriteNodeEndpoints(m.nodeEndpoints, address)) {
        stats.nodeEndpointsRewritten++;
        encoded = encodeFetchResponse(m, v);
      }
      break;
    }
  }
  return encoded === undefined ? frame : encodeFrame(header, encoded);
}
