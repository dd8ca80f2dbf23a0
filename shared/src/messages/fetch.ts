// Fetch (API key 1), versions 4-18 (the 4.x range; KIP-896 removed v0-3). Flexible from v12: compact
// strings/arrays/records and a TAG_BUFFER closing every struct (omitted below for v4-11).
//
// FetchRequest =
//   ReplicaId int32                                  (v4-14; from v15 it moves to tag 1, KIP-903)
//   MaxWaitMs int32, MinBytes int32, MaxBytes int32, IsolationLevel int8
//   SessionId int32, SessionEpoch int32              (v7+, KIP-227 fetch sessions)
//   Topics ARRAY[
//     Topic STRING (v4-12) | TopicId UUID (v13+, KIP-516)
//     Partitions ARRAY[
//       Partition int32
//       CurrentLeaderEpoch int32                     (v9+, KIP-320)
//       FetchOffset int64
//       LastFetchedEpoch int32                       (v12+)
//       LogStartOffset int64                         (v5+)
//       PartitionMaxBytes int32
//       TAG_BUFFER { 0: ReplicaDirectoryId UUID (v17+, KIP-853), 1: HighWatermark int64 (v18+, KIP-1166) } ] ]
//   ForgottenTopicsData ARRAY[ Topic STRING (v7-12) | TopicId UUID (v13+), Partitions ARRAY[int32] ]  (v7+)
//   RackId STRING                                    (v11+)
//   TAG_BUFFER { 0: ClusterId NULLABLE_STRING (v12+), 1: ReplicaState { ReplicaId int32, ReplicaEpoch int64 } (v15+) }
//
// FetchResponse =
//   ThrottleTimeMs int32
//   ErrorCode int16, SessionId int32                 (v7+)
//   Responses ARRAY[
//     Topic STRING (v4-12) | TopicId UUID (v13+)
//     Partitions ARRAY[
//       PartitionIndex int32, ErrorCode int16, HighWatermark int64, LastStableOffset int64
//       LogStartOffset int64                         (v5+)
//       AbortedTransactions NULLABLE ARRAY[ ProducerId int64, FirstOffset int64 ]
//       PreferredReadReplica int32                   (v11+)
//       Records RECORDS
//       TAG_BUFFER { 0: DivergingEpoch { Epoch int32, EndOffset int64 },
//                    1: CurrentLeader { LeaderId int32, LeaderEpoch int32 },
//                    2: SnapshotId { EndOffset int64, Epoch int32 } } ] ]
//   TAG_BUFFER { 0: NodeEndpoints ARRAY[ NodeId int32, Host STRING, Port int32, Rack NULLABLE_STRING ] (v16+, KIP-951) }
//
// Fields that a version lacks are undefined after decoding and ignored when encoding; optional
// fields a version has are written with Kafka's default when undefined. Tagged fields are undefined
// when absent, so a present field is re-emitted even if it holds the default value.

import { ApiKey } from '../protocol/api-keys.js';
import type { RawTaggedField, Reader } from '../protocol/reader.js';
import type { Writer } from '../protocol/writer.js';
import {
  decodeBody,
  encodeBody,
  type LeaderIdAndEpoch,
  type NodeEndpoint,
  readLeaderIdAndEpoch,
  readNodeEndpoint,
  type Tagged,
  withTag,
  writeLeaderIdAndEpoch,
  writeNodeEndpoint,
} from './common.js';

export interface FetchRequest extends Tagged {
  /** v4-14; -1 for consumers. */
  replicaId?: number | undefined;
  maxWaitMs: number;
  minBytes: number;
  maxBytes: number;
  isolationLevel: number;
  /** v7+, default 0. */
  sessionId?: number | undefined;
  /** v7+, default -1. */
  sessionEpoch?: number | undefined;
  topics: FetchRequestTopic[];
  /** v7+, default []. */
  forgottenTopicsData?: FetchForgottenTopic[] | undefined;
  /** v11+, default ''. */
  rackId?: string | undefined;
  /** Tag 0, v12+. */
  clusterId?: string | null | undefined;
  /** Tag 1, v15+. */
  replicaState?: FetchReplicaState | undefined;
}

export interface FetchReplicaState extends Tagged {
  replicaId: number;
  /** The broker epoch (KIP-903). */
  replicaEpoch: bigint;
}

export interface FetchRequestTopic extends Tagged {
  /** v4-12. */
  topic?: string | undefined;
  /** v13+. */
  topicId?: string | undefined;
  partitions: FetchRequestPartition[];
}

export interface FetchRequestPartition extends Tagged {
  partition: number;
  /** v9+, default -1. */
  currentLeaderEpoch?: number | undefined;
  fetchOffset: bigint;
  /** v12+, default -1. */
  lastFetchedEpoch?: number | undefined;
  /** v5+, default -1. */
  logStartOffset?: bigint | undefined;
  partitionMaxBytes: number;
  /** Tag 0, v17+. */
  replicaDirectoryId?: string | undefined;
  /** Tag 1, v18+. */
  highWatermark?: bigint | undefined;
}

export interface FetchForgottenTopic extends Tagged {
  /** v7-12. */
  topic?: string | undefined;
  /** v13+. */
  topicId?: string | undefined;
  partitions: number[];
}

export interface FetchResponse extends Tagged {
  throttleTimeMs: number;
  /** v7+, default 0. */
  errorCode?: number | undefined;
  /** v7+, default 0. */
  sessionId?: number | undefined;
  responses: FetchResponseTopic[];
  /** Tag 0, v16+. */
  nodeEndpoints?: NodeEndpoint[] | undefined;
}

export interface FetchResponseTopic extends Tagged {
  /** v4-12. */
  topic?: string | undefined;
  /** v13+. */
  topicId?: string | undefined;
  partitions: FetchResponsePartition[];
}

export interface FetchResponsePartition extends Tagged {
  partitionIndex: number;
  errorCode: number;
  highWatermark: bigint;
  lastStableOffset: bigint;
  /** v5+, default -1. */
  logStartOffset?: bigint | undefined;
  abortedTransactions: FetchAbortedTransaction[] | null;
  /** v11+, default -1. */
  preferredReadReplica?: number | undefined;
  /** Zero-copy view into the decoded body. */
  records: Buffer | null;
  /** Tag 0. */
  divergingEpoch?: FetchEpochEndOffset | undefined;
  /** Tag 1. */
  currentLeader?: LeaderIdAndEpoch | undefined;
  /** Tag 2. */
  snapshotId?: FetchSnapshotId | undefined;
}

export interface FetchAbortedTransaction extends Tagged {
  producerId: bigint;
  firstOffset: bigint;
}

export interface FetchEpochEndOffset extends Tagged {
  epoch: number;
  endOffset: bigint;
}

export interface FetchSnapshotId extends Tagged {
  endOffset: bigint;
  epoch: number;
}

// ---- request ----------------------------------------------------------------------------------

function requestTag(m: FetchRequest, tag: number, r: Reader): boolean {
  if (tag === 0) {
    m.clusterId = r.compactNullableString('ClusterId');
    return true;
  }
  if (tag === 1 && r.ctx.version >= 15) {
    m.replicaState = {
      replicaId: r.int32('ReplicaId'),
      replicaEpoch: r.int64('ReplicaEpoch'),
      taggedFields: r.taggedFields('ReplicaState'),
    };
    return true;
  }
  return false;
}

function requestPartitionTag(p: FetchRequestPartition, tag: number, r: Reader): boolean {
  const v = r.ctx.version;
  if (tag === 0 && v >= 17) {
    p.replicaDirectoryId = r.uuid('ReplicaDirectoryId');
    return true;
  }
  if (tag === 1 && v >= 18) {
    p.highWatermark = r.int64('HighWatermark');
    return true;
  }
  return false;
}

function readRequestPartition(r: Reader): FetchRequestPartition {
  const v = r.ctx.version;
  const p: FetchRequestPartition = {
    partition: r.int32('Partition'),
    currentLeaderEpoch: v >= 9 ? r.int32('CurrentLeaderEpoch') : undefined,
    fetchOffset: r.int64('FetchOffset'),
    lastFetchedEpoch: v >= 12 ? r.int32('LastFetchedEpoch') : undefined,
    logStartOffset: v >= 5 ? r.int64('LogStartOffset') : undefined,
    partitionMaxBytes: r.int32('PartitionMaxBytes'),
  };
  p.taggedFields = r.tags('FetchPartition', p, requestPartitionTag);
  return p;
}

function readRequestTopic(r: Reader): FetchRequestTopic {
  const byId = r.ctx.version >= 13;
  return {
    topic: byId ? undefined : r.str('Topic'),
    topicId: byId ? r.uuid('TopicId') : undefined,
    partitions: r.arr('Partitions', readRequestPartition),
    taggedFields: r.tags('FetchTopic'),
  };
}

function readForgottenTopic(r: Reader): FetchForgottenTopic {
  const byId = r.ctx.version >= 13;
  return {
    topic: byId ? undefined : r.str('Topic'),
    topicId: byId ? r.uuid('TopicId') : undefined,
    partitions: r.arr('Partitions', (e) => e.int32('Partitions')),
    taggedFields: r.tags('ForgottenTopic'),
  };
}

function readRequest(r: Reader): FetchRequest {
  const v = r.ctx.version;
  const m: FetchRequest = {
    replicaId: v <= 14 ? r.int32('ReplicaId') : undefined,
    maxWaitMs: r.int32('MaxWaitMs'),
    minBytes: r.int32('MinBytes'),
    maxBytes: r.int32('MaxBytes'),
    isolationLevel: r.int8('IsolationLevel'),
    sessionId: v >= 7 ? r.int32('SessionId') : undefined,
    sessionEpoch: v >= 7 ? r.int32('SessionEpoch') : undefined,
    topics: r.arr('Topics', readRequestTopic),
    forgottenTopicsData: v >= 7 ? r.arr('ForgottenTopicsData', readForgottenTopic) : undefined,
    rackId: v >= 11 ? r.str('RackId') : undefined,
  };
  m.taggedFields = r.tags('FetchRequest', m, requestTag);
  return m;
}

function writeTopicRef(w: Writer, t: { topic?: string | undefined; topicId?: string | undefined }): void {
  if (w.ctx.version >= 13) w.uuid(t.topicId as string, 'TopicId');
  else w.str(t.topic as string, 'Topic');
}

function writeRequestPartition(w: Writer, p: FetchRequestPartition): void {
  const v = w.ctx.version;
  w.int32(p.partition, 'Partition');
  if (v >= 9) w.int32(p.currentLeaderEpoch ?? -1, 'CurrentLeaderEpoch');
  w.int64(p.fetchOffset, 'FetchOffset');
  if (v >= 12) w.int32(p.lastFetchedEpoch ?? -1, 'LastFetchedEpoch');
  if (v >= 5) w.int64(p.logStartOffset ?? -1n, 'LogStartOffset');
  w.int32(p.partitionMaxBytes, 'PartitionMaxBytes');
  let known: RawTaggedField[] | undefined;
  const { replicaDirectoryId: dir, highWatermark: hw } = p;
  if (dir !== undefined && v >= 17) known = withTag(known, w, 0, (s) => s.uuid(dir, 'ReplicaDirectoryId'));
  if (hw !== undefined && v >= 18) known = withTag(known, w, 1, (s) => s.int64(hw, 'HighWatermark'));
  w.tags('FetchPartition', p.taggedFields, known);
}

function writeRequestTopic(w: Writer, t: FetchRequestTopic): void {
  writeTopicRef(w, t);
  w.arr(t.partitions, 'Partitions', writeRequestPartition);
  w.tags('FetchTopic', t.taggedFields);
}

function writeForgottenTopic(w: Writer, t: FetchForgottenTopic): void {
  writeTopicRef(w, t);
  w.arr(t.partitions, 'Partitions', (s, p) => s.int32(p, 'Partitions'));
  w.tags('ForgottenTopic', t.taggedFields);
}

function writeRequest(w: Writer, m: FetchRequest): void {
  const v = w.ctx.version;
  if (v <= 14) w.int32(m.replicaId ?? -1, 'ReplicaId');
  w.int32(m.maxWaitMs, 'MaxWaitMs');
  w.int32(m.minBytes, 'MinBytes');
  w.int32(m.maxBytes, 'MaxBytes');
  w.int8(m.isolationLevel, 'IsolationLevel');
  if (v >= 7) {
    w.int32(m.sessionId ?? 0, 'SessionId');
    w.int32(m.sessionEpoch ?? -1, 'SessionEpoch');
  }
  w.arr(m.topics, 'Topics', writeRequestTopic);
  if (v >= 7) w.arr(m.forgottenTopicsData ?? [], 'ForgottenTopicsData', writeForgottenTopic);
  if (v >= 11) w.str(m.rackId ?? '', 'RackId');
  let known: RawTaggedField[] | undefined;
  const { clusterId, replicaState: rs } = m;
  if (clusterId !== undefined && v >= 12) {
    known = withTag(known, w, 0, (s) => s.compactNullableString(clusterId, 'ClusterId'));
  }
  if (rs !== undefined && v >= 15) {
    known = withTag(known, w, 1, (s) => {
      s.int32(rs.replicaId, 'ReplicaId');
      s.int64(rs.replicaEpoch, 'ReplicaEpoch');
      s.taggedFields('ReplicaState', rs.taggedFields);
    });
  }
  w.tags('FetchRequest', m.taggedFields, known);
}

/**
 * The id of the replica sending the request, -1 for a consumer: the body's ReplicaId up to v14,
 * ReplicaState.ReplicaId (tag 1, absent for consumers) from v15 (KIP-903).
 */
export function fetchReplicaId(msg: FetchRequest): number {
  return msg.replicaState?.replicaId ?? msg.replicaId ?? -1;
}

/** `body` is the frame after the request header. */
export function decodeFetchRequest(body: Buffer, version: number): FetchRequest {
  return decodeBody(ApiKey.Fetch, 'FetchRequest', body, version, readRequest);
}

export function encodeFetchRequest(msg: FetchRequest, version: number): Buffer {
  return encodeBody(ApiKey.Fetch, 'FetchRequest', msg, version, writeRequest);
}

// ---- response ---------------------------------------------------------------------------------

function responsePartitionTag(p: FetchResponsePartition, tag: number, r: Reader): boolean {
  switch (tag) {
    case 0:
      p.divergingEpoch = {
        epoch: r.int32('Epoch'),
        endOffset: r.int64('EndOffset'),
        taggedFields: r.taggedFields('DivergingEpoch'),
      };
      return true;
    case 1:
      p.currentLeader = readLeaderIdAndEpoch(r);
      return true;
    case 2:
      p.snapshotId = {
        endOffset: r.int64('EndOffset'),
        epoch: r.int32('Epoch'),
        taggedFields: r.taggedFields('SnapshotId'),
      };
      return true;
    default:
      return false;
  }
}

function readAbortedTransaction(r: Reader): FetchAbortedTransaction {
  return {
    producerId: r.int64('ProducerId'),
    firstOffset: r.int64('FirstOffset'),
    taggedFields: r.tags('AbortedTransaction'),
  };
}

function readResponsePartition(r: Reader): FetchResponsePartition {
  const v = r.ctx.version;
  const p: FetchResponsePartition = {
    partitionIndex: r.int32('PartitionIndex'),
    errorCode: r.int16('ErrorCode'),
    highWatermark: r.int64('HighWatermark'),
    lastStableOffset: r.int64('LastStableOffset'),
    logStartOffset: v >= 5 ? r.int64('LogStartOffset') : undefined,
    abortedTransactions: r.nullableArr('AbortedTransactions', readAbortedTransaction),
    preferredReadReplica: v >= 11 ? r.int32('PreferredReadReplica') : undefined,
    records: r.records('Records'),
  };
  p.taggedFields = r.tags('PartitionData', p, responsePartitionTag);
  return p;
}

function readResponseTopic(r: Reader): FetchResponseTopic {
  const byId = r.ctx.version >= 13;
  return {
    topic: byId ? undefined : r.str('Topic'),
    topicId: byId ? r.uuid('TopicId') : undefined,
    partitions: r.arr('Partitions', readResponsePartition),
    taggedFields: r.tags('FetchableTopicResponse'),
  };
}

function responseTag(m: FetchResponse, tag: number, r: Reader): boolean {
  if (tag === 0 && r.ctx.version >= 16) {
    m.nodeEndpoints = r.compactArray('NodeEndpoints', readNodeEndpoint);
    return true;
  }
  return false;
}

function readResponse(r: Reader): FetchResponse {
  const v = r.ctx.version;
  const m: FetchResponse = {
    throttleTimeMs: r.int32('ThrottleTimeMs'),
    errorCode: v >= 7 ? r.int16('ErrorCode') : undefined,
    sessionId: v >= 7 ? r.int32('SessionId') : undefined,
    responses: r.arr('Responses', readResponseTopic),
  };
  m.taggedFields = r.tags('FetchResponse', m, responseTag);
  return m;
}

function writeAbortedTransaction(w: Writer, a: FetchAbortedTransaction): void {
  w.int64(a.producerId, 'ProducerId');
  w.int64(a.firstOffset, 'FirstOffset');
  w.tags('AbortedTransaction', a.taggedFields);
}

function writeResponsePartition(w: Writer, p: FetchResponsePartition): void {
  w.int32(p.partitionIndex, 'PartitionIndex');
  w.int16(p.errorCode, 'ErrorCode');
  w.int64(p.highWatermark, 'HighWatermark');
  w.int64(p.lastStableOffset, 'LastStableOffset');
  if (w.ctx.version >= 5) w.int64(p.logStartOffset ?? -1n, 'LogStartOffset');
  w.nullableArr(p.abortedTransactions, 'AbortedTransactions', writeAbortedTransaction);
  if (w.ctx.version >= 11) w.int32(p.preferredReadReplica ?? -1, 'PreferredReadReplica');
  w.records(p.records, 'Records');
  let known: RawTaggedField[] | undefined;
  if (w.ctx.flexible) {
    const { divergingEpoch: de, currentLeader: cl, snapshotId: si } = p;
    if (de !== undefined) {
      known = withTag(known, w, 0, (s) => {
        s.int32(de.epoch, 'Epoch');
        s.int64(de.endOffset, 'EndOffset');
        s.taggedFields('DivergingEpoch', de.taggedFields);
      });
    }
    if (cl !== undefined) known = withTag(known, w, 1, (s) => writeLeaderIdAndEpoch(s, cl));
    if (si !== undefined) {
      known = withTag(known, w, 2, (s) => {
        s.int64(si.endOffset, 'EndOffset');
        s.int32(si.epoch, 'Epoch');
        s.taggedFields('SnapshotId', si.taggedFields);
      });
    }
  }
  w.tags('PartitionData', p.taggedFields, known);
}

function writeResponseTopic(w: Writer, t: FetchResponseTopic): void {
  writeTopicRef(w, t);
  w.arr(t.partitions, 'Partitions', writeResponsePartition);
  w.tags('FetchableTopicResponse', t.taggedFields);
}

function writeResponse(w: Writer, m: FetchResponse): void {
  const v = w.ctx.version;
  w.int32(m.throttleTimeMs, 'ThrottleTimeMs');
  if (v >= 7) {
    w.int16(m.errorCode ?? 0, 'ErrorCode');
    w.int32(m.sessionId ?? 0, 'SessionId');
  }
  w.arr(m.responses, 'Responses', writeResponseTopic);
  const endpoints = m.nodeEndpoints;
  const known =
    endpoints !== undefined && v >= 16
      ? [w.tagged(0, (s) => s.compactArray(endpoints, 'NodeEndpoints', writeNodeEndpoint))]
      : undefined;
  w.tags('FetchResponse', m.taggedFields, known);
}

/** `body` is the frame after the response header. Records stay views into `body`. */
export function decodeFetchResponse(body: Buffer, version: number): FetchResponse {
  return decodeBody(ApiKey.Fetch, 'FetchResponse', body, version, readResponse);
}

export function encodeFetchResponse(msg: FetchResponse, version: number): Buffer {
  return encodeBody(ApiKey.Fetch, 'FetchResponse', msg, version, writeResponse);
}
