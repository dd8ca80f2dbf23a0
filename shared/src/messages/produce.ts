// Produce (API key 0), versions 3-13 (the 4.x range; KIP-896 removed v0-2). Flexible from v9:
// compact strings/arrays/records and a TAG_BUFFER closing every struct (omitted below for v3-8).
//
// ProduceRequest =
//   TransactionalId NULLABLE_STRING, Acks int16, TimeoutMs int32
//   TopicData ARRAY[
//     Name STRING (v3-12) | TopicId UUID (v13+, KIP-516)
//     PartitionData ARRAY[ Index int32, Records RECORDS ] ]
//
// ProduceResponse =
//   Responses ARRAY[
//     Name STRING (v3-12) | TopicId UUID (v13+)
//     PartitionResponses ARRAY[
//       Index int32, ErrorCode int16, BaseOffset int64, LogAppendTimeMs int64
//       LogStartOffset int64                         (v5+)
//       RecordErrors ARRAY[ BatchIndex int32, BatchIndexErrorMessage NULLABLE_STRING ]  (v8+, KIP-467)
//       ErrorMessage NULLABLE_STRING                 (v8+)
//       TAG_BUFFER { 0: CurrentLeader { LeaderId int32, LeaderEpoch int32 } (v10+, KIP-951) } ] ]
//   ThrottleTimeMs int32                             (after Responses, unlike Fetch)
//   TAG_BUFFER { 0: NodeEndpoints ARRAY[ NodeId int32, Host STRING, Port int32, Rack NULLABLE_STRING ] (v10+) }
//
// Fields that a version lacks are undefined after decoding and ignored when encoding; optional
// fields a version has are written with Kafka's default when undefined.

import { ApiKey } from '../protocol/api-keys.js';
import { Reader } from '../protocol/reader.js';
import type { Writer } from '../protocol/writer.js';
import {
  decodeBody,
  encodeBody,
  type LeaderIdAndEpoch,
  type NodeEndpoint,
  readLeaderIdAndEpoch,
  readNodeEndpoint,
  type Tagged,
  writeLeaderIdAndEpoch,
  writeNodeEndpoint,
} from './common.js';

export interface ProduceRequest extends Tagged {
  transactionalId: string | null;
  /** 0: no response at all; 1: leader only; -1: all in-sync replicas. */
  acks: number;
  timeoutMs: number;
  topicData: ProduceTopicData[];
}

export interface ProduceTopicData extends Tagged {
  /** v3-12. */
  name?: string | undefined;
  /** v13+. */
  topicId?: string | undefined;
  partitionData: ProducePartitionData[];
}

export interface ProducePartitionData extends Tagged {
  index: number;
  /** Zero-copy view into the decoded body; 4.x brokers require exactly one v2 batch. */
  records: Buffer | null;
}

export interface ProduceResponse extends Tagged {
  responses: ProduceTopicResponse[];
  throttleTimeMs: number;
  /** Tag 0, v10+. */
  nodeEndpoints?: NodeEndpoint[] | undefined;
}

export interface ProduceTopicResponse extends Tagged {
  /** v3-12. */
  name?: string | undefined;
  /** v13+. */
  topicId?: string | undefined;
  partitionResponses: ProducePartitionResponse[];
}

export interface ProducePartitionResponse extends Tagged {
  index: number;
  errorCode: number;
  baseOffset: bigint;
  /** -1 for CreateTime topics. */
  logAppendTimeMs: bigint;
  /** v5+, default -1. */
  logStartOffset?: bigint | undefined;
  /** v8+, default []. */
  recordErrors?: ProduceRecordError[] | undefined;
  /** v8+, default null. */
  errorMessage?: string | null | undefined;
  /** Tag 0, v10+. */
  currentLeader?: LeaderIdAndEpoch | undefined;
}

export interface ProduceRecordError extends Tagged {
  batchIndex: number;
  batchIndexErrorMessage: string | null;
}

// ---- request ----------------------------------------------------------------------------------

function readPartitionData(r: Reader): ProducePartitionData {
  return {
    index: r.int32('Index'),
    records: r.records('Records'),
    taggedFields: r.tags('PartitionProduceData'),
  };
}

function readTopicData(r: Reader): ProduceTopicData {
  const byId = r.ctx.version >= 13;
  return {
    name: byId ? undefined : r.str('Name'),
    topicId: byId ? r.uuid('TopicId') : undefined,
    partitionData: r.arr('PartitionData', readPartitionData),
    taggedFields: r.tags('TopicProduceData'),
  };
}

function readRequest(r: Reader): ProduceRequest {
  return {
    transactionalId: r.nullableStr('TransactionalId'),
    acks: r.int16('Acks'),
    timeoutMs: r.int32('TimeoutMs'),
    topicData: r.arr('TopicData', readTopicData),
    taggedFields: r.tags('ProduceRequest'),
  };
}

function writeTopicRef(w: Writer, t: { name?: string | undefined; topicId?: string | undefined }): void {
  if (w.ctx.version >= 13) w.uuid(t.topicId as string, 'TopicId');
  else w.str(t.name as string, 'Name');
}

function writePartitionData(w: Writer, p: ProducePartitionData): void {
  w.int32(p.index, 'Index');
  w.records(p.records, 'Records');
  w.tags('PartitionProduceData', p.taggedFields);
}

function writeTopicData(w: Writer, t: ProduceTopicData): void {
  writeTopicRef(w, t);
  w.arr(t.partitionData, 'PartitionData', writePartitionData);
  w.tags('TopicProduceData', t.taggedFields);
}

function writeRequest(w: Writer, m: ProduceRequest): void {
  w.nullableStr(m.transactionalId, 'TransactionalId');
  w.int16(m.acks, 'Acks');
  w.int32(m.timeoutMs, 'TimeoutMs');
  w.arr(m.topicData, 'TopicData', writeTopicData);
  w.tags('ProduceRequest', m.taggedFields);
}

/** `body` is the frame after the request header. Records stay views into `body`. */
export function decodeProduceRequest(body: Buffer, version: number): ProduceRequest {
  return decodeBody(ApiKey.Produce, 'ProduceRequest', body, version, readRequest);
}

export function encodeProduceRequest(msg: ProduceRequest, version: number): Buffer {
  return encodeBody(ApiKey.Produce, 'ProduceRequest', msg, version, writeRequest);
}

/**
 * Acks of a Produce request frame (header + body), reading only the header, the TransactionalId
 * length and Acks. acks=0 means the broker sends no response, so the proxy must not wait for one
 * (Kroxylicious and kafka-proxy both learned this). Works for every version: v0-2 have no
 * TransactionalId, v9+ have a tagged header and compact strings.
 */
export function peekProduceAcks(frame: Buffer): number {
  const head = new Reader(frame, { api: 'ProduceRequest', version: -1, flexible: false });
  const apiKey = head.int16('RequestApiKey');
  const version = head.int16('RequestApiVersion');
  if (apiKey !== ApiKey.Produce) {
    head.fail('UNKNOWN_API_KEY', 'RequestApiKey', `API key ${apiKey} is not Produce`, 0);
  }
  const flexible = version >= 9;
  const r = new Reader(frame, { api: 'ProduceRequest', version, flexible }, 8);
  // As Kafka reads these two nullable strings: any negative length is null (its generated
  // readers test `length < 0`), and the bytes are skipped whatever they are. Where this peek
  // fails, the broker fails too, so the pipe closes only connections stock Kafka would.
  const clientIdLength = r.int16('ClientId');
  if (clientIdLength > 0) r.skip(clientIdLength, 'ClientId');
  if (flexible) r.taggedFields('RequestHeader');
  if (version >= 3) {
    // A compact length is an unsigned varint that Kafka reads into an int: past 2^31 it is negative.
    const length = flexible ? (r.uvarint('TransactionalId') | 0) - 1 : r.int16('TransactionalId');
    if (length > 0) r.skip(length, 'TransactionalId');
  }
  return r.int16('Acks');
}

// ---- response ---------------------------------------------------------------------------------

function partitionResponseTag(p: ProducePartitionResponse, tag: number, r: Reader): boolean {
  if (tag === 0 && r.ctx.version >= 10) {
    p.currentLeader = readLeaderIdAndEpoch(r);
    return true;
  }
  return false;
}

function readRecordError(r: Reader): ProduceRecordError {
  return {
    batchIndex: r.int32('BatchIndex'),
    batchIndexErrorMessage: r.nullableStr('BatchIndexErrorMessage'),
    taggedFields: r.tags('BatchIndexAndErrorMessage'),
  };
}

function readPartitionResponse(r: Reader): ProducePartitionResponse {
  const v = r.ctx.version;
  const p: ProducePartitionResponse = {
    index: r.int32('Index'),
    errorCode: r.int16('ErrorCode'),
    baseOffset: r.int64('BaseOffset'),
    logAppendTimeMs: r.int64('LogAppendTimeMs'),
    logStartOffset: v >= 5 ? r.int64('LogStartOffset') : undefined,
    recordErrors: v >= 8 ? r.arr('RecordErrors', readRecordError) : undefined,
    errorMessage: v >= 8 ? r.nullableStr('ErrorMessage') : undefined,
  };
  p.taggedFields = r.tags('PartitionProduceResponse', p, partitionResponseTag);
  return p;
}

function readTopicResponse(r: Reader): ProduceTopicResponse {
  const byId = r.ctx.version >= 13;
  return {
    name: byId ? undefined : r.str('Name'),
    topicId: byId ? r.uuid('TopicId') : undefined,
    partitionResponses: r.arr('PartitionResponses', readPartitionResponse),
    taggedFields: r.tags('TopicProduceResponse'),
  };
}

function responseTag(m: ProduceResponse, tag: number, r: Reader): boolean {
  if (tag === 0 && r.ctx.version >= 10) {
    m.nodeEndpoints = r.compactArray('NodeEndpoints', readNodeEndpoint);
    return true;
  }
  return false;
}

function readResponse(r: Reader): ProduceResponse {
  const m: ProduceResponse = {
    responses: r.arr('Responses', readTopicResponse),
    throttleTimeMs: r.int32('ThrottleTimeMs'),
  };
  m.taggedFields = r.tags('ProduceResponse', m, responseTag);
  return m;
}

function writeRecordError(w: Writer, e: ProduceRecordError): void {
  w.int32(e.batchIndex, 'BatchIndex');
  w.nullableStr(e.batchIndexErrorMessage, 'BatchIndexErrorMessage');
  w.tags('BatchIndexAndErrorMessage', e.taggedFields);
}

function writePartitionResponse(w: Writer, p: ProducePartitionResponse): void {
  const v = w.ctx.version;
  w.int32(p.index, 'Index');
  w.int16(p.errorCode, 'ErrorCode');
  w.int64(p.baseOffset, 'BaseOffset');
  w.int64(p.logAppendTimeMs, 'LogAppendTimeMs');
  if (v >= 5) w.int64(p.logStartOffset ?? -1n, 'LogStartOffset');
  if (v >= 8) {
    w.arr(p.recordErrors ?? [], 'RecordErrors', writeRecordError);
    w.nullableStr(p.errorMessage ?? null, 'ErrorMessage');
  }
  const leader = p.currentLeader;
  const known =
    leader !== undefined && v >= 10 ? [w.tagged(0, (s) => writeLeaderIdAndEpoch(s, leader))] : undefined;
  w.tags('PartitionProduceResponse', p.taggedFields, known);
}

function writeTopicResponse(w: Writer, t: ProduceTopicResponse): void {
  writeTopicRef(w, t);
  w.arr(t.partitionResponses, 'PartitionResponses', writePartitionResponse);
  w.tags('TopicProduceResponse', t.taggedFields);
}

function writeResponse(w: Writer, m: ProduceResponse): void {
  w.arr(m.responses, 'Responses', writeTopicResponse);
  w.int32(m.throttleTimeMs, 'ThrottleTimeMs');
  const endpoints = m.nodeEndpoints;
  const known =
    endpoints !== undefined && w.ctx.version >= 10
      ? [w.tagged(0, (s) => s.compactArray(endpoints, 'NodeEndpoints', writeNodeEndpoint))]
      : undefined;
  w.tags('ProduceResponse', m.taggedFields, known);
}

/** `body` is the frame after the response header. */
export function decodeProduceResponse(body: Buffer, version: number): ProduceResponse {
  return decodeBody(ApiKey.Produce, 'ProduceResponse', body, version, readResponse);
}

export function encodeProduceResponse(msg: ProduceResponse, version: number): Buffer {
  return encodeBody(ApiKey.Produce, 'ProduceResponse', msg, version, writeResponse);
}
