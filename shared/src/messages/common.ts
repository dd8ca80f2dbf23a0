// Pieces shared by the message codecs: version checks, the body reader/writer set-up, and the two
// structs that Produce and Fetch both carry (KIP-951 leader discovery).
//   LeaderIdAndEpoch = LeaderId int32, LeaderEpoch int32, TAG_BUFFER
//   NodeEndpoint     = NodeId int32, Host COMPACT_STRING, Port int32, Rack COMPACT_NULLABLE_STRING, TAG_BUFFER

import { apiKeyInfo } from '../protocol/api-keys.js';
import { ProtocolError } from '../protocol/errors.js';
import { type RawTaggedField, Reader } from '../protocol/reader.js';
import { Writer } from '../protocol/writer.js';

/** Tagged fields of a struct that this codec does not decode, kept raw in ascending tag order. */
export interface Tagged {
  taggedFields?: RawTaggedField[] | undefined;
}

export interface LeaderIdAndEpoch extends Tagged {
  leaderId: number;
  leaderEpoch: number;
}

export interface NodeEndpoint extends Tagged {
  nodeId: number;
  host: string;
  port: number;
  rack: string | null;
}

function supportedVersion(apiKey: number, api: string, version: number): boolean {
  const info = apiKeyInfo(apiKey)!;
  const range = info.decodes!;
  if (!Number.isInteger(version) || version < range.min || version > range.max) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      { api, version, field: 'version', offset: 0 },
      `walproxy decodes versions ${range.min}-${range.max}`,
    );
  }
  return info.firstFlexibleVersion !== null && version >= info.firstFlexibleVersion;
}

/** Decodes a whole body: the version must be one walproxy knows and every byte must be used. */
export function decodeBody<T>(
  apiKey: number,
  api: string,
  body: Buffer,
  version: number,
  read: (r: Reader) => T,
): T {
  const flexible = supportedVersion(apiKey, api, version);
  const r = new Reader(body, { api, version, flexible });
  const msg = read(r);
  r.done(api);
  return msg;
}

export function encodeBody<T>(
  apiKey: number,
  api: string,
  msg: T,
  version: number,
  write: (w: Writer, msg: T) => void,
): Buffer {
  const flexible = supportedVersion(apiKey, api, version);
  const w = new Writer({ api, version, flexible });
  write(w, msg);
  return w.finish();
}

export function readLeaderIdAndEpoch(r: Reader): LeaderIdAndEpoch {
  return {
    leaderId: r.int32('LeaderId'),
    leaderEpoch: r.int32('LeaderEpoch'),
    taggedFields: r.tags('LeaderIdAndEpoch'),
  };
}

export function writeLeaderIdAndEpoch(w: Writer, l: LeaderIdAndEpoch): void {
  w.int32(l.leaderId, 'LeaderId');
  w.int32(l.leaderEpoch, 'LeaderEpoch');
  w.tags('LeaderIdAndEpoch', l.taggedFields);
}

export function readNodeEndpoint(r: Reader): NodeEndpoint {
  return {
    nodeId: r.int32('NodeId'),
    host: r.str('Host'),
    port: r.int32('Port'),
    rack: r.nullableStr('Rack'),
    taggedFields: r.tags('NodeEndpoint'),
  };
}

export function writeNodeEndpoint(w: Writer, n: NodeEndpoint): void {
  w.int32(n.nodeId, 'NodeId');
  w.str(n.host, 'Host');
  w.int32(n.port, 'Port');
  w.nullableStr(n.rack, 'Rack');
  w.tags('NodeEndpoint', n.taggedFields);
}

/** Adds a known tagged field to the list being built, allocating the list only when needed. */
export function withTag(
  known: RawTaggedField[] | undefined,
  w: Writer,
  tag: number,
  write: (w: Writer) => void,
): RawTaggedField[] {
  const field = w.tagged(tag, write);
  if (known === undefined) return [field];
  known.push(field);
  return known;
}
