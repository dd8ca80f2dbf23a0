// ApiVersions (API key 18), versions 0-5. Flexible from v3, but the response header is always v0
// (KIP-511) so that a client can read it before knowing which version the broker answered.
//
// ApiVersionsRequest =
//   (v0-2: empty)
//   ClientSoftwareName COMPACT_STRING, ClientSoftwareVersion COMPACT_STRING,              (v3+)
//   ClusterId COMPACT_NULLABLE_STRING, NodeId int32                                        (v5+)
//   TAG_BUFFER                                                                             (v3+)
// v5 (Kafka 4.4, KIP-1242) names the cluster and node the client meant to reach; its response is
// laid out as v4's (read off ApiVersions{Request,Response}Data in kafka-clients 4.4.0).
//
// ApiVersionsResponse =
//   ErrorCode int16
//   ApiKeys ARRAY[ ApiKey int16, MinVersion int16, MaxVersion int16, TAG_BUFFER (v3+) ]
//   ThrottleTimeMs int32                             (v1+)
//   TAG_BUFFER {                                     (v3+)
//     0: SupportedFeatures ARRAY[ Name STRING, MinVersion int16, MaxVersion int16, TAG_BUFFER ]
//     1: FinalizedFeaturesEpoch int64
//     2: FinalizedFeatures ARRAY[ Name STRING, MaxVersionLevel int16, MinVersionLevel int16, TAG_BUFFER ]
//     3: ZkMigrationReady bool }
//
// A broker that does not support the request's version answers UNSUPPORTED_VERSION with a v0 body
// listing its ApiVersions range (KIP-511), whatever version the request had; decoding falls back to
// v0 the way Kafka's ApiVersionsResponse.parse does.

import { ApiKey } from '../protocol/api-keys.js';
import { ProtocolError } from '../protocol/errors.js';
import type { RawTaggedField, Reader } from '../protocol/reader.js';
import type { Writer } from '../protocol/writer.js';
import { decodeBody, encodeBody, type Tagged, withTag } from './common.js';

const MAX_VERSION = 5;

export interface ApiVersionsRequest extends Tagged {
  /** v3+, default ''. */
  clientSoftwareName?: string | undefined;
  /** v3+, default ''. */
  clientSoftwareVersion?: string | undefined;
  /** v5+, default null: the cluster the client expects to reach. */
  clusterId?: string | null | undefined;
  /** v5+, default -1: the node the client expects to reach. */
  nodeId?: number | undefined;
}

export interface ApiVersionsResponse extends Tagged {
  errorCode: number;
  apiKeys: ApiVersionsRange[];
  /** v1+, default 0. */
  throttleTimeMs?: number | undefined;
  /** Tag 0, v3+. */
  supportedFeatures?: SupportedFeature[] | undefined;
  /** Tag 1, v3+. */
  finalizedFeaturesEpoch?: bigint | undefined;
  /** Tag 2, v3+. */
  finalizedFeatures?: FinalizedFeature[] | undefined;
  /** Tag 3, v3+. */
  zkMigrationReady?: boolean | undefined;
  /**
   * Set when the body was a v0 body although the request had a higher version (the KIP-511
   * fallback); encoding then writes v0 whatever version it is given.
   */
  v0Fallback?: boolean | undefined;
}

export interface ApiVersionsRange extends Tagged {
  apiKey: number;
  minVersion: number;
  maxVersion: number;
}

export interface SupportedFeature extends Tagged {
  name: string;
  minVersion: number;
  maxVersion: number;
}

export interface FinalizedFeature extends Tagged {
  name: string;
  maxVersionLevel: number;
  minVersionLevel: number;
}

// ---- request ----------------------------------------------------------------------------------

function readRequest(r: Reader): ApiVersionsRequest {
  if (!r.ctx.flexible) return {};
  const m: ApiVersionsRequest = {
    clientSoftwareName: r.compactString('ClientSoftwareName'),
    clientSoftwareVersion: r.compactString('ClientSoftwareVersion'),
  };
  if (r.ctx.version >= 5) {
    m.clusterId = r.compactNullableString('ClusterId');
    m.nodeId = r.int32('NodeId');
  }
  m.taggedFields = r.taggedFields('ApiVersionsRequest');
  return m;
}

function writeRequest(w: Writer, m: ApiVersionsRequest): void {
  if (!w.ctx.flexible) return;
  w.compactString(m.clientSoftwareName ?? '', 'ClientSoftwareName');
  w.compactString(m.clientSoftwareVersion ?? '', 'ClientSoftwareVersion');
  if (w.ctx.version >= 5) {
    w.compactNullableString(m.clusterId ?? null, 'ClusterId');
    w.int32(m.nodeId ?? -1, 'NodeId');
  }
  w.taggedFields('ApiVersionsRequest', m.taggedFields);
}

/** `body` is the frame after the request header. */
export function decodeApiVersionsRequest(body: Buffer, version: number): ApiVersionsRequest {
  return decodeBody(ApiKey.ApiVersions, 'ApiVersionsRequest', body, version, readRequest);
}

export function encodeApiVersionsRequest(msg: ApiVersionsRequest, version: number): Buffer {
  return encodeBody(ApiKey.ApiVersions, 'ApiVersionsRequest', msg, version, writeRequest);
}

// ---- response ---------------------------------------------------------------------------------

function readRange(r: Reader): ApiVersionsRange {
  return {
    apiKey: r.int16('ApiKey'),
    minVersion: r.int16('MinVersion'),
    maxVersion: r.int16('MaxVersion'),
    taggedFields: r.tags('ApiVersion'),
  };
}

function readSupportedFeature(r: Reader): SupportedFeature {
  return {
    name: r.compactString('Name'),
    minVersion: r.int16('MinVersion'),
    maxVersion: r.int16('MaxVersion'),
    taggedFields: r.taggedFields('SupportedFeatureKey'),
  };
}

function readFinalizedFeature(r: Reader): FinalizedFeature {
  return {
    name: r.compactString('Name'),
    maxVersionLevel: r.int16('MaxVersionLevel'),
    minVersionLevel: r.int16('MinVersionLevel'),
    taggedFields: r.taggedFields('FinalizedFeatureKey'),
  };
}

function responseTag(m: ApiVersionsResponse, tag: number, r: Reader): boolean {
  switch (tag) {
    case 0:
      m.supportedFeatures = r.compactArray('SupportedFeatures', readSupportedFeature);
      return true;
    case 1:
      m.finalizedFeaturesEpoch = r.int64('FinalizedFeaturesEpoch');
      return true;
    case 2:
      m.finalizedFeatures = r.compactArray('FinalizedFeatures', readFinalizedFeature);
      return true;
    case 3:
      m.zkMigrationReady = r.bool('ZkMigrationReady');
      return true;
    default:
      return false;
  }
}

function readResponse(r: Reader): ApiVersionsResponse {
  const m: ApiVersionsResponse = {
    errorCode: r.int16('ErrorCode'),
    apiKeys: r.arr('ApiKeys', readRange),
    throttleTimeMs: r.ctx.version >= 1 ? r.int32('ThrottleTimeMs') : undefined,
  };
  m.taggedFields = r.tags('ApiVersionsResponse', m, responseTag);
  return m;
}

function writeRange(w: Writer, a: ApiVersionsRange): void {
  w.int16(a.apiKey, 'ApiKey');
  w.int16(a.minVersion, 'MinVersion');
  w.int16(a.maxVersion, 'MaxVersion');
  w.tags('ApiVersion', a.taggedFields);
}

function writeSupportedFeature(w: Writer, f: SupportedFeature): void {
  w.compactString(f.name, 'Name');
  w.int16(f.minVersion, 'MinVersion');
  w.int16(f.maxVersion, 'MaxVersion');
  w.taggedFields('SupportedFeatureKey', f.taggedFields);
}

function writeFinalizedFeature(w: Writer, f: FinalizedFeature): void {
  w.compactString(f.name, 'Name');
  w.int16(f.maxVersionLevel, 'MaxVersionLevel');
  w.int16(f.minVersionLevel, 'MinVersionLevel');
  w.taggedFields('FinalizedFeatureKey', f.taggedFields);
}

function writeResponse(w: Writer, m: ApiVersionsResponse): void {
  w.int16(m.errorCode, 'ErrorCode');
  w.arr(m.apiKeys, 'ApiKeys', writeRange);
  if (w.ctx.version >= 1) w.int32(m.throttleTimeMs ?? 0, 'ThrottleTimeMs');
  let known: RawTaggedField[] | undefined;
  if (w.ctx.flexible) {
    const {
      supportedFeatures: sf,
      finalizedFeaturesEpoch: epoch,
      finalizedFeatures: ff,
      zkMigrationReady: zk,
    } = m;
    if (sf !== undefined) {
      known = withTag(known, w, 0, (s) => s.compactArray(sf, 'SupportedFeatures', writeSupportedFeature));
    }
    if (epoch !== undefined) known = withTag(known, w, 1, (s) => s.int64(epoch, 'FinalizedFeaturesEpoch'));
    if (ff !== undefined) {
      known = withTag(known, w, 2, (s) => s.compactArray(ff, 'FinalizedFeatures', writeFinalizedFeature));
    }
    if (zk !== undefined) known = withTag(known, w, 3, (s) => s.bool(zk, 'ZkMigrationReady'));
  }
  w.tags('ApiVersionsResponse', m.taggedFields, known);
}

/**
 * `version` is the request's version. A body that does not parse at that version is read as v0
 * (the KIP-511 UNSUPPORTED_VERSION answer), and so is any body answering a version above 4.
 */
export function decodeApiVersionsResponse(body: Buffer, version: number): ApiVersionsResponse {
  const decodeV0 = (): ApiVersionsResponse => ({
    ...decodeBody(ApiKey.ApiVersions, 'ApiVersionsResponse', body, 0, readResponse),
    v0Fallback: true,
  });
  if (Number.isInteger(version) && version > MAX_VERSION) return decodeV0();
  try {
    return decodeBody(ApiKey.ApiVersions, 'ApiVersionsResponse', body, version, readResponse);
  } catch (e) {
    if (!(e instanceof ProtocolError) || e.code === 'WALPROXY_ERR_UNSUPPORTED_VERSION' || version === 0)
      throw e;
    try {
      return decodeV0();
    } catch {
      throw e;
    }
  }
}

export function encodeApiVersionsResponse(msg: ApiVersionsResponse, version: number): Buffer {
  const v = msg.v0Fallback === true ? 0 : version;
  return encodeBody(ApiKey.ApiVersions, 'ApiVersionsResponse', msg, v, writeResponse);
}
