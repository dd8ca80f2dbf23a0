// DescribeCluster (API key 60), versions 0-2, all flexible: compact strings/arrays and a TAG_BUFFER
// closing every struct (omitted below). The Admin client's describeCluster() (KIP-700) asks it
// instead of Metadata; walproxy reads it to give zone-aware clients the brokers' addresses through
// a sidecar of their zone (proxy/src/zone/).
//
// DescribeClusterRequest =
//   IncludeClusterAuthorizedOperations bool
//   EndpointType int8                                (v1+, KIP-919: 1 brokers, 2 controllers)
//   IncludeFencedBrokers bool                        (v2+, KIP-1073)
//
// DescribeClusterResponse =
//   ThrottleTimeMs int32, ErrorCode int16, ErrorMessage NULLABLE_STRING
//   EndpointType int8                                (v1+)
//   ClusterId STRING, ControllerId int32
//   Brokers ARRAY[ BrokerId int32, Host STRING, Port int32, Rack NULLABLE_STRING,
//                  IsFenced bool (v2+) ]
//   ClusterAuthorizedOperations int32
//
// Fields that a version lacks are undefined after decoding and ignored when encoding; optional
// fields a version has are written with Kafka's default when undefined.

import { ApiKey } from '../protocol/api-keys.js';
import type { Reader } from '../protocol/reader.js';
import type { Writer } from '../protocol/writer.js';
import { decodeBody, encodeBody, type Tagged } from './common.js';

/** EndpointType: the response lists brokers (the only kind a broker answers with), or controllers. */
export const DESCRIBE_CLUSTER_BROKERS = 1;
export const DESCRIBE_CLUSTER_CONTROLLERS = 2;

const INT32_MIN = -0x80000000;

export interface DescribeClusterRequest extends Tagged {
  includeClusterAuthorizedOperations: boolean;
  /** v1+, default 1 (brokers). */
  endpointType?: number | undefined;
  /** v2+, default false. */
  includeFencedBrokers?: boolean | undefined;
}

export interface DescribeClusterResponse extends Tagged {
  throttleTimeMs: number;
  errorCode: number;
  errorMessage: string | null;
  /** v1+, default 1 (brokers). */
  endpointType?: number | undefined;
  clusterId: string;
  controllerId: number;
  brokers: DescribeClusterBroker[];
  /** Default INT32_MIN (not requested). */
  clusterAuthorizedOperations?: number | undefined;
}

export interface DescribeClusterBroker extends Tagged {
  brokerId: number;
  host: string;
  port: number;
  rack: string | null;
  /** v2+, default false. */
  isFenced?: boolean | undefined;
}

// ---- request ----------------------------------------------------------------------------------

function readRequest(r: Reader): DescribeClusterRequest {
  const v = r.ctx.version;
  return {
    includeClusterAuthorizedOperations: r.bool('IncludeClusterAuthorizedOperations'),
    endpointType: v >= 1 ? r.int8('EndpointType') : undefined,
    includeFencedBrokers: v >= 2 ? r.bool('IncludeFencedBrokers') : undefined,
    taggedFields: r.tags('DescribeClusterRequest'),
  };
}

function writeRequest(w: Writer, m: DescribeClusterRequest): void {
  const v = w.ctx.version;
  w.bool(m.includeClusterAuthorizedOperations, 'IncludeClusterAuthorizedOperations');
  if (v >= 1) w.int8(m.endpointType ?? DESCRIBE_CLUSTER_BROKERS, 'EndpointType');
  if (v >= 2) w.bool(m.includeFencedBrokers ?? false, 'IncludeFencedBrokers');
  w.tags('DescribeClusterRequest', m.taggedFields);
}

/** `body` is the frame after the request header. */
export function decodeDescribeClusterRequest(body: Buffer, version: number): DescribeClusterRequest {
  return decodeBody(ApiKey.DescribeCluster, 'DescribeClusterRequest', body, version, readRequest);
}

export function encodeDescribeClusterRequest(msg: DescribeClusterRequest, version: number): Buffer {
  return encodeBody(ApiKey.DescribeCluster, 'DescribeClusterRequest', msg, version, writeRequest);
}

// ---- response ---------------------------------------------------------------------------------

function readBroker(r: Reader): DescribeClusterBroker {
  return {
    brokerId: r.int32('BrokerId'),
    host: r.str('Host'),
    port: r.int32('Port'),
    rack: r.nullableStr('Rack'),
    isFenced: r.ctx.version >= 2 ? r.bool('IsFenced') : undefined,
    taggedFields: r.tags('DescribeClusterBroker'),
  };
}

function readResponse(r: Reader): DescribeClusterResponse {
  const v = r.ctx.version;
  return {
    throttleTimeMs: r.int32('ThrottleTimeMs'),
    errorCode: r.int16('ErrorCode'),
    errorMessage: r.nullableStr('ErrorMessage'),
    endpointType: v >= 1 ? r.int8('EndpointType') : undefined,
    clusterId: r.str('ClusterId'),
    controllerId: r.int32('ControllerId'),
    brokers: r.arr('Brokers', readBroker),
    clusterAuthorizedOperations: r.int32('ClusterAuthorizedOperations'),
    taggedFields: r.tags('DescribeClusterResponse'),
  };
}

function writeBroker(w: Writer, b: DescribeClusterBroker): void {
  w.int32(b.brokerId, 'BrokerId');
  w.str(b.host, 'Host');
  w.int32(b.port, 'Port');
  w.nullableStr(b.rack, 'Rack');
  if (w.ctx.version >= 2) w.bool(b.isFenced ?? false, 'IsFenced');
  w.tags('DescribeClusterBroker', b.taggedFields);
}

function writeResponse(w: Writer, m: DescribeClusterResponse): void {
  w.int32(m.throttleTimeMs, 'ThrottleTimeMs');
  w.int16(m.errorCode, 'ErrorCode');
  w.nullableStr(m.errorMessage, 'ErrorMessage');
  if (w.ctx.version >= 1) w.int8(m.endpointType ?? DESCRIBE_CLUSTER_BROKERS, 'EndpointType');
  w.str(m.clusterId, 'ClusterId');
  w.int32(m.controllerId, 'ControllerId');
  w.arr(m.brokers, 'Brokers', writeBroker);
  w.int32(m.clusterAuthorizedOperations ?? INT32_MIN, 'ClusterAuthorizedOperations');
  w.tags('DescribeClusterResponse', m.taggedFields);
}

/** `body` is the frame after the response header. */
export function decodeDescribeClusterResponse(body: Buffer, version: number): DescribeClusterResponse {
  return decodeBody(ApiKey.DescribeCluster, 'DescribeClusterResponse', body, version, readResponse);
}

export function encodeDescribeClusterResponse(msg: DescribeClusterResponse, version: number): Buffer {
  return encodeBody(ApiKey.DescribeCluster, 'DescribeClusterResponse', msg, version, writeResponse);
}
