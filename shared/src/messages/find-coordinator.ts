// FindCoordinator (API key 10), versions 0-6. Flexible from v3: compact strings/arrays and a
// TAG_BUFFER closing every struct (omitted below). v4 (KIP-699) batches keys: the request lists
// CoordinatorKeys and the response one Coordinator per key instead of one top-level answer.
// walproxy reads it to give zone-aware clients the address of the coordinator through a sidecar
// of their zone (proxy/src/zone/).
//
// FindCoordinatorRequest =
//   Key STRING                                       (v0-3)
//   KeyType int8                                     (v1+: 0 group, 1 transaction, 2 share)
//   CoordinatorKeys ARRAY[STRING]                    (v4+)
//
// FindCoordinatorResponse =
//   ThrottleTimeMs int32                             (v1+)
//   ErrorCode int16                                  (v0-3)
//   ErrorMessage NULLABLE_STRING                     (v1-3)
//   NodeId int32, Host STRING, Port int32            (v0-3)
//   Coordinators ARRAY[                              (v4+)
//     Key STRING, NodeId int32, Host STRING, Port int32, ErrorCode int16, ErrorMessage NULLABLE_STRING ]
//
// Fields that a version lacks are undefined after decoding and ignored when encoding; optional
// fields a version has are written with Kafka's default when undefined.

import { ApiKey } from '../protocol/api-keys.js';
import type { Reader } from '../protocol/reader.js';
import type { Writer } from '../protocol/writer.js';
import { decodeBody, encodeBody, type Tagged } from './common.js';

export interface FindCoordinatorRequest extends Tagged {
  /** v0-3. */
  key?: string | undefined;
  /** v1+, default 0 (group). */
  keyType?: number | undefined;
  /** v4+. */
  coordinatorKeys?: string[] | undefined;
}

export interface FindCoordinatorResponse extends Tagged {
  /** v1+, default 0. */
  throttleTimeMs?: number | undefined;
  /** v0-3. */
  errorCode?: number | undefined;
  /** v1-3, default null. */
  errorMessage?: string | null | undefined;
  /** v0-3. */
  nodeId?: number | undefined;
  /** v0-3. */
  host?: string | undefined;
  /** v0-3. */
  port?: number | undefined;
  /** v4+. */
  coordinators?: Coordinator[] | undefined;
}

export interface Coordinator extends Tagged {
  key: string;
  nodeId: number;
  host: string;
  port: number;
  errorCode: number;
  errorMessage: string | null;
}

// ---- request ----------------------------------------------------------------------------------

function readRequest(r: Reader): FindCoordinatorRequest {
  const v = r.ctx.version;
  return {
    key: v <= 3 ? r.str('Key') : undefined,
    keyType: v >= 1 ? r.int8('KeyType') : undefined,
    coordinatorKeys: v >= 4 ? r.arr('CoordinatorKeys', (e) => e.str('CoordinatorKeys')) : undefined,
    taggedFields: r.tags('FindCoordinatorRequest'),
  };
}

function writeRequest(w: Writer, m: FindCoordinatorRequest): void {
  const v = w.ctx.version;
  if (v <= 3) w.str(m.key ?? '', 'Key');
  if (v >= 1) w.int8(m.keyType ?? 0, 'KeyType');
  if (v >= 4) w.arr(m.coordinatorKeys ?? [], 'CoordinatorKeys', (e, k) => e.str(k, 'CoordinatorKeys'));
  w.tags('FindCoordinatorRequest', m.taggedFields);
}

/** `body` is the frame after the request header. */
export function decodeFindCoordinatorRequest(body: Buffer, version: number): FindCoordinatorRequest {
  return decodeBody(ApiKey.FindCoordinator, 'FindCoordinatorRequest', body, version, readRequest);
}

export function encodeFindCoordinatorRequest(msg: FindCoordinatorRequest, version: number): Buffer {
  return encodeBody(ApiKey.FindCoordinator, 'FindCoordinatorRequest', msg, version, writeRequest);
}

// ---- response ---------------------------------------------------------------------------------

function readCoordinator(r: Reader): Coordinator {
  return {
    key: r.str('Key'),
    nodeId: r.int32('NodeId'),
    host: r.str('Host'),
    port: r.int32('Port'),
    errorCode: r.int16('ErrorCode'),
    errorMessage: r.nullableStr('ErrorMessage'),
    taggedFields: r.tags('Coordinator'),
  };
}

function readResponse(r: Reader): FindCoordinatorResponse {
  const v = r.ctx.version;
  const m: FindCoordinatorResponse = { throttleTimeMs: v >= 1 ? r.int32('ThrottleTimeMs') : undefined };
  if (v <= 3) {
    m.errorCode = r.int16('ErrorCode');
    m.errorMessage = v >= 1 ? r.nullableStr('ErrorMessage') : undefined;
    m.nodeId = r.int32('NodeId');
    m.host = r.str('Host');
    m.port = r.int32('Port');
  } else {
    m.coordinators = r.arr('Coordinators', readCoordinator);
  }
  m.taggedFields = r.tags('FindCoordinatorResponse');
  return m;
}

function writeCoordinator(w: Writer, c: Coordinator): void {
  w.str(c.key, 'Key');
  w.int32(c.nodeId, 'NodeId');
  w.str(c.host, 'Host');
  w.int32(c.port, 'Port');
  w.int16(c.errorCode, 'ErrorCode');
  w.nullableStr(c.errorMessage, 'ErrorMessage');
  w.tags('Coordinator', c.taggedFields);
}

function writeResponse(w: Writer, m: FindCoordinatorResponse): void {
  const v = w.ctx.version;
  if (v >= 1) w.int32(m.throttleTimeMs ?? 0, 'ThrottleTimeMs');
  if (v <= 3) {
    w.int16(m.errorCode ?? 0, 'ErrorCode');
    if (v >= 1) w.nullableStr(m.errorMessage ?? null, 'ErrorMessage');
    w.int32(m.nodeId ?? -1, 'NodeId');
    w.str(m.host ?? '', 'Host');
    w.int32(m.port ?? -1, 'Port');
  } else {
    w.arr(m.coordinators ?? [], 'Coordinators', writeCoordinator);
  }
  w.tags('FindCoordinatorResponse', m.taggedFields);
}

/** `body` is the frame after the response header. */
export function decodeFindCoordinatorResponse(body: Buffer, version: number): FindCoordinatorResponse {
  return decodeBody(ApiKey.FindCoordinator, 'FindCoordinatorResponse', body, version, readResponse);
}

export function encodeFindCoordinatorResponse(msg: FindCoordinatorResponse, version: number): Buffer {
  return encodeBody(ApiKey.FindCoordinator, 'FindCoordinatorResponse', msg, version, writeResponse);
}
