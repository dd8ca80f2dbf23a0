// Metadata (API key 3), versions 0-13 (all that 4.1 accepts; KAFKA-18648 restored v0-3 in 4.0).
// Flexible from v9: compact strings/arrays and a TAG_BUFFER closing every struct (omitted below).
// walproxy reads it to map topic ids to names (Produce v13 and Fetch v13+ carry only ids).
//
// MetadataRequest =
//   Topics ARRAY[                                    (nullable from v1: null = all topics; in v0 an
//     TopicId UUID                    (v10+)          empty array means all topics)
//     Name STRING                     (nullable from v10) ]
//   AllowAutoTopicCreation bool                      (v4+)
//   IncludeClusterAuthorizedOperations bool          (v8-10)
//   IncludeTopicAuthorizedOperations bool            (v8+)
//
// MetadataResponse =
//   ThrottleTimeMs int32                             (v3+)
//   Brokers ARRAY[ NodeId int32, Host STRING, Port int32, Rack NULLABLE_STRING (v1+) ]
//   ClusterId NULLABLE_STRING                        (v2+)
//   ControllerId int32                               (v1+)
//   Topics ARRAY[
//     ErrorCode int16
//     Name STRING                     (nullable from v12)
//     TopicId UUID                    (v10+)
//     IsInternal bool                 (v1+)
//     Partitions ARRAY[
//       ErrorCode int16, PartitionIndex int32, LeaderId int32
//       LeaderEpoch int32             (v7+)
//       ReplicaNodes ARRAY[int32], IsrNodes ARRAY[int32]
//       OfflineReplicas ARRAY[int32]  (v5+) ]
//     TopicAuthorizedOperations int32 (v8+) ]
//   ClusterAuthorizedOperations int32                (v8-10)
//   ErrorCode int16                                  (v13+)
//
// Fields that a version lacks are undefined after decoding and ignored when encoding; optional
// fields a version has are written with Kafka's default when undefined.

import { ApiKey } from '../protocol/api-keys.js';
import type { Reader } from '../protocol/reader.js';
import type { Writer } from '../protocol/writer.js';
import { decodeBody, encodeBody, type Tagged } from './common.js';

/** Kafka's Uuid.ZERO_UUID: "no topic id" (a topic queried by name that does not exist). */
export const ZERO_UUID = '00000000000000000000000000000000';

const INT32_MIN = -0x80000000;

export interface MetadataRequest extends Tagged {
  /** null (v1+) asks for all topics. */
  topics: MetadataRequestTopic[] | null;
  /** v4+, default true. */
  allowAutoTopicCreation?: boolean | undefined;
  /** v8-10, default false. */
  includeClusterAuthorizedOperations?: boolean | undefined;
  /** v8+, default false. */
  includeTopicAuthorizedOperations?: boolean | undefined;
}

export interface MetadataRequestTopic extends Tagged {
  /** v10+, default ZERO_UUID. */
  topicId?: string | undefined;
  /** Nullable from v10. */
  name: string | null;
}

export interface MetadataResponse extends Tagged {
  /** v3+, default 0. */
  throttleTimeMs?: number | undefined;
  brokers: MetadataBroker[];
  /** v2+, default null. */
  clusterId?: string | null | undefined;
  /** v1+, default -1. */
  controllerId?: number | undefined;
  topics: MetadataTopic[];
  /** v8-10, default INT32_MIN. */
  clusterAuthorizedOperations?: number | undefined;
  /** v13+, default 0. */
  errorCode?: number | undefined;
}

export interface MetadataBroker extends Tagged {
  nodeId: number;
  host: string;
  port: number;
  /** v1+, default null. */
  rack?: string | null | undefined;
}

export interface MetadataTopic extends Tagged {
  errorCode: number;
  /** Nullable from v12 (a topic queried by id that does not exist). */
  name: string | null;
  /** v10+, default ZERO_UUID. */
  topicId?: string | undefined;
  /** v1+, default false. */
  isInternal?: boolean | undefined;
  partitions: MetadataPartition[];
  /** v8+, default INT32_MIN. */
  topicAuthorizedOperations?: number | undefined;
}

export interface MetadataPartition extends Tagged {
  errorCode: number;
  partitionIndex: number;
  leaderId: number;
  /** v7+, default -1. */
  leaderEpoch?: number | undefined;
  replicaNodes: number[];
  isrNodes: number[];
  /** v5+, default []. */
  offlineReplicas?: number[] | undefined;
}

// ---- request ----------------------------------------------------------------------------------

function readRequestTopic(r: Reader): MetadataRequestTopic {
  const v = r.ctx.version;
  return {
    topicId: v >= 10 ? r.uuid('TopicId') : undefined,
    name: v >= 10 ? r.nullableStr('Name') : r.str('Name'),
    taggedFields: r.tags('MetadataRequestTopic'),
  };
}

function readRequest(r: Reader): MetadataRequest {
  const v = r.ctx.version;
  return {
    topics: v >= 1 ? r.nullableArr('Topics', readRequestTopic) : r.arr('Topics', readRequestTopic),
    allowAutoTopicCreation: v >= 4 ? r.bool('AllowAutoTopicCreation') : undefined,
    includeClusterAuthorizedOperations:
      v >= 8 && v <= 10 ? r.bool('IncludeClusterAuthorizedOperations') : undefined,
    includeTopicAuthorizedOperations: v >= 8 ? r.bool('IncludeTopicAuthorizedOperations') : undefined,
    taggedFields: r.tags('MetadataRequest'),
  };
}

function writeRequestTopic(w: Writer, t: MetadataRequestTopic): void {
  const v = w.ctx.version;
  if (v >= 10) {
    w.uuid(t.topicId ?? ZERO_UUID, 'TopicId');
    w.nullableStr(t.name, 'Name');
  } else {
    w.str(t.name as string, 'Name');
  }
  w.tags('MetadataRequestTopic', t.taggedFields);
}

function writeRequest(w: Writer, m: MetadataRequest): void {
  const v = w.ctx.version;
  if (v >= 1) w.nullableArr(m.topics, 'Topics', writeRequestTopic);
  else w.arr(m.topics as MetadataRequestTopic[], 'Topics', writeRequestTopic);
  if (v >= 4) w.bool(m.allowAutoTopicCreation ?? true, 'AllowAutoTopicCreation');
  if (v >= 8 && v <= 10)
    w.bool(m.includeClusterAuthorizedOperations ?? false, 'IncludeClusterAuthorizedOperations');
  if (v >= 8) w.bool(m.includeTopicAuthorizedOperations ?? false, 'IncludeTopicAuthorizedOperations');
  w.tags('MetadataRequest', m.taggedFields);
}

/** `body` is the frame after the request header. */
export function decodeMetadataRequest(body: Buffer, version: number): MetadataRequest {
  return decodeBody(ApiKey.Metadata, 'MetadataRequest', body, version, readRequest);
}

export function encodeMetadataRequest(msg: MetadataRequest, version: number): Buffer {
  return encodeBody(ApiKey.Metadata, 'MetadataRequest', msg, version, writeRequest);
}

// ---- response ---------------------------------------------------------------------------------

function readBroker(r: Reader): MetadataBroker {
  return {
    nodeId: r.int32('NodeId'),
    host: r.str('Host'),
    port: r.int32('Port'),
    rack: r.ctx.version >= 1 ? r.nullableStr('Rack') : undefined,
    taggedFields: r.tags('MetadataResponseBroker'),
  };
}

function readPartition(r: Reader): MetadataPartition {
  const v = r.ctx.version;
  return {
    errorCode: r.int16('ErrorCode'),
    partitionIndex: r.int32('PartitionIndex'),
    leaderId: r.int32('LeaderId'),
    leaderEpoch: v >= 7 ? r.int32('LeaderEpoch') : undefined,
    replicaNodes: r.arr('ReplicaNodes', (e) => e.int32('ReplicaNodes')),
    isrNodes: r.arr('IsrNodes', (e) => e.int32('IsrNodes')),
    offlineReplicas: v >= 5 ? r.arr('OfflineReplicas', (e) => e.int32('OfflineReplicas')) : undefined,
    taggedFields: r.tags('MetadataResponsePartition'),
  };
}

function readTopic(r: Reader): MetadataTopic {
  const v = r.ctx.version;
  return {
    errorCode: r.int16('ErrorCode'),
    name: v >= 12 ? r.nullableStr('Name') : r.str('Name'),
    topicId: v >= 10 ? r.uuid('TopicId') : undefined,
    isInternal: v >= 1 ? r.bool('IsInternal') : undefined,
    partitions: r.arr('Partitions', readPartition),
    topicAuthorizedOperations: v >= 8 ? r.int32('TopicAuthorizedOperations') : undefined,
    taggedFields: r.tags('MetadataResponseTopic'),
  };
}

function readResponse(r: Reader): MetadataResponse {
  const v = r.ctx.version;
  return {
    throttleTimeMs: v >= 3 ? r.int32('ThrottleTimeMs') : undefined,
    brokers: r.arr('Brokers', readBroker),
    clusterId: v >= 2 ? r.nullableStr('ClusterId') : undefined,
    controllerId: v >= 1 ? r.int32('ControllerId') : undefined,
    topics: r.arr('Topics', readTopic),
    clusterAuthorizedOperations: v >= 8 && v <= 10 ? r.int32('ClusterAuthorizedOperations') : undefined,
    errorCode: v >= 13 ? r.int16('ErrorCode') : undefined,
    taggedFields: r.tags('MetadataResponse'),
  };
}

function writeBroker(w: Writer, b: MetadataBroker): void {
  w.int32(b.nodeId, 'NodeId');
  w.str(b.host, 'Host');
  w.int32(b.port, 'Port');
  if (w.ctx.version >= 1) w.nullableStr(b.rack ?? null, 'Rack');
  w.tags('MetadataResponseBroker', b.taggedFields);
}

function writePartition(w: Writer, p: MetadataPartition): void {
  const v = w.ctx.version;
  w.int16(p.errorCode, 'ErrorCode');
  w.int32(p.partitionIndex, 'PartitionIndex');
  w.int32(p.leaderId, 'LeaderId');
  if (v >= 7) w.int32(p.leaderEpoch ?? -1, 'LeaderEpoch');
  w.arr(p.replicaNodes, 'ReplicaNodes', (e, n) => e.int32(n, 'ReplicaNodes'));
  w.arr(p.isrNodes, 'IsrNodes', (e, n) => e.int32(n, 'IsrNodes'));
  if (v >= 5) w.arr(p.offlineReplicas ?? [], 'OfflineReplicas', (e, n) => e.int32(n, 'OfflineReplicas'));
  w.tags('MetadataResponsePartition', p.taggedFields);
}

function writeTopic(w: Writer, t: MetadataTopic): void {
  const v = w.ctx.version;
  w.int16(t.errorCode, 'ErrorCode');
  if (v >= 12) w.nullableStr(t.name, 'Name');
  else w.str(t.name as string, 'Name');
  if (v >= 10) w.uuid(t.topicId ?? ZERO_UUID, 'TopicId');
  if (v >= 1) w.bool(t.isInternal ?? false, 'IsInternal');
  w.arr(t.partitions, 'Partitions', writePartition);
  if (v >= 8) w.int32(t.topicAuthorizedOperations ?? INT32_MIN, 'TopicAuthorizedOperations');
  w.tags('MetadataResponseTopic', t.taggedFields);
}

function writeResponse(w: Writer, m: MetadataResponse): void {
  const v = w.ctx.version;
  if (v >= 3) w.int32(m.throttleTimeMs ?? 0, 'ThrottleTimeMs');
  w.arr(m.brokers, 'Brokers', writeBroker);
  if (v >= 2) w.nullableStr(m.clusterId ?? null, 'ClusterId');
  if (v >= 1) w.int32(m.controllerId ?? -1, 'ControllerId');
  w.arr(m.topics, 'Topics', writeTopic);
  if (v >= 8 && v <= 10) w.int32(m.clusterAuthorizedOperations ?? INT32_MIN, 'ClusterAuthorizedOperations');
  if (v >= 13) w.int16(m.errorCode ?? 0, 'ErrorCode');
  w.tags('MetadataResponse', m.taggedFields);
}

/** `body` is the frame after the response header. */
export function decodeMetadataResponse(body: Buffer, version: number): MetadataResponse {
  return decodeBody(ApiKey.Metadata, 'MetadataResponse', body, version, readResponse);
}

export function encodeMetadataResponse(msg: MetadataResponse, version: number): Buffer {
  return encodeBody(ApiKey.Metadata, 'MetadataResponse', msg, version, writeResponse);
}

/**
 * Topic id → name for the topics of a Metadata response (v10+ carry ids). Topics without an id
 * (ZERO_UUID) or without a name (an unknown id queried by id) are left out.
 */
export function topicNamesById(m: MetadataResponse): Map<string, string> {
  const out = new Map<string, string>();
  for (const t of m.topics) {
    if (t.topicId !== undefined && t.topicId !== ZERO_UUID && t.name !== null) out.set(t.topicId, t.name);
  }
  return out;
}
