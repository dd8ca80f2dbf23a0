// Request header (msg dir RequestHeader.json), v1 and v2:
//   RequestApiKey int16, RequestApiVersion int16, CorrelationId int32,
//   ClientId nullable string with an int16 length in both versions (so that any broker can read the
//   header of an ApiVersions request of a version it does not know),
//   v2 only: TAG_BUFFER.
// Response header (ResponseHeader.json): CorrelationId int32, v1 only: TAG_BUFFER.
// A frame is everything after the 4-byte size prefix: header, then body.

import { requestHeaderVersion } from './api-keys.js';
import { ProtocolError } from './errors.js';
import { type CodecContext, type RawTaggedField, Reader } from './reader.js';
import { Writer } from './writer.js';

export interface RequestKey {
  readonly apiKey: number;
  readonly apiVersion: number;
  readonly correlationId: number;
}

export interface RequestHeader extends RequestKey {
  readonly clientId: string | null;
  /** Header v2 only; tags are kept raw (no header tag is defined as of 4.1). */
  readonly taggedFields?: readonly RawTaggedField[];
}

export interface DecodedRequestHeader extends RequestHeader {
  readonly taggedFields: RawTaggedField[];
  /** Where the body starts in the frame. */
  readonly headerLength: number;
}

export interface ResponseHeader {
  readonly correlationId: number;
  /** Header v1 only. */
  readonly taggedFields?: readonly RawTaggedField[];
}

export interface DecodedResponseHeader extends ResponseHeader {
  readonly taggedFields: RawTaggedField[];
  readonly headerLength: number;
}

function requestContext(version: number): CodecContext {
  return { api: 'RequestHeader', version, flexible: version >= 2 };
}

function responseContext(version: number): CodecContext {
  return { api: 'ResponseHeader', version, flexible: version >= 1 };
}

/** Reads only the first 8 bytes, so it works for API keys and versions walproxy does not know. */
export function peekRequestKey(frame: Buffer): RequestKey {
  const r = new Reader(frame, requestContext(-1));
  return {
    apiKey: r.int16('RequestApiKey'),
    apiVersion: r.int16('RequestApiVersion'),
    correlationId: r.int32('CorrelationId'),
  };
}

function headerVersionOf(apiKey: number, apiVersion: number): 1 | 2 {
  const version = requestHeaderVersion(apiKey, apiVersion);
  if (version === undefined) {
    throw new ProtocolError(
      'UNKNOWN_API_KEY',
      { api: 'RequestHeader', version: -1, field: 'RequestApiKey', offset: 0 },
      `API key ${apiKey} is unknown, so its header version is too`,
    );
  }
  return version;
}

/** Throws UNKNOWN_API_KEY for keys missing from the table. The body is `frame.subarray(headerLength)`. */
export function decodeRequestHeader(frame: Buffer): DecodedRequestHeader {
  const { apiKey, apiVersion, correlationId } = peekRequestKey(frame);
  const r = new Reader(frame, requestContext(headerVersionOf(apiKey, apiVersion)), 8);
  const clientId = r.nullableString('ClientId');
  const taggedFields = r.tags('TaggedFields') ?? [];
  return { apiKey, apiVersion, correlationId, clientId, taggedFields, headerLength: r.offset };
}

export function encodeRequestHeader(header: RequestHeader): Buffer {
  const w = new Writer(requestContext(headerVersionOf(header.apiKey, header.apiVersion)), 64);
  w.int16(header.apiKey, 'RequestApiKey');
  w.int16(header.apiVersion, 'RequestApiVersion');
  w.int32(header.correlationId, 'CorrelationId');
  w.nullableString(header.clientId, 'ClientId');
  w.tags('TaggedFields', header.taggedFields);
  return w.finish();
}

/** `headerVersion` comes from responseHeaderVersion() of the request this answers. */
export function decodeResponseHeader(frame: Buffer, headerVersion: 0 | 1): DecodedResponseHeader {
  const r = new Reader(frame, responseContext(headerVersion));
  const correlationId = r.int32('CorrelationId');
  const taggedFields = r.tags('TaggedFields') ?? [];
  return { correlationId, taggedFields, headerLength: r.offset };
}

export function encodeResponseHeader(header: ResponseHeader, headerVersion: 0 | 1): Buffer {
  const w = new Writer(responseContext(headerVersion), 16);
  w.int32(header.correlationId, 'CorrelationId');
  w.tags('TaggedFields', header.taggedFields);
  return w.finish();
}
