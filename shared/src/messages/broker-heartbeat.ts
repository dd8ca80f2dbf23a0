// BrokerHeartbeat (API key 63), versions 0-2 (Kafka 4.4's), all flexible: a broker's heartbeat to the active
// KRaft controller, which walproxy's controller path carries (fate sharing). The sidecar reads
// them to learn its broker's id and epoch, and at a stop asks the controller to fence its broker
// (WantFence) so that its leaderships move before the sidecar stops serving: KRaft's own
// mechanism, reversed by the broker's next heartbeat through the restarted sidecar.
//
// BrokerHeartbeatRequest =
//   BrokerId int32, BrokerEpoch int64, CurrentMetadataOffset int64, WantFence bool,
//   WantShutDown bool, TAG_BUFFER (v1+: tag 0 OfflineLogDirs; v2+: CordonedLogDirs, also
//   tagged; both kept raw)
// A version walproxy does not know is passed on untouched and not read: a later one could move
// WantFence, and a stop then just does not fence (the sidecar logs that it did not).
//
// BrokerHeartbeatResponse =
//   ThrottleTimeMs int32, ErrorCode int16, IsCaughtUp bool, IsFenced bool, ShouldShutDown bool,
//   TAG_BUFFER

import { ApiKey } from '../protocol/api-keys.js';
import type { Reader } from '../protocol/reader.js';
import type { Writer } from '../protocol/writer.js';
import { decodeBody, encodeBody, type Tagged } from './common.js';

export interface BrokerHeartbeatRequest extends Tagged {
  brokerId: number;
  brokerEpoch: bigint;
  currentMetadataOffset: bigint;
  wantFence: boolean;
  wantShutDown: boolean;
}

export interface BrokerHeartbeatResponse extends Tagged {
  throttleTimeMs: number;
  errorCode: number;
  isCaughtUp: boolean;
  isFenced: boolean;
  shouldShutDown: boolean;
}

/** Where WantFence is in a request body: after BrokerId, BrokerEpoch and CurrentMetadataOffset. */
export const BROKER_HEARTBEAT_WANT_FENCE_OFFSET = 4 + 8 + 8;

function readRequest(r: Reader): BrokerHeartbeatRequest {
  return {
    brokerId: r.int32('BrokerId'),
    brokerEpoch: r.int64('BrokerEpoch'),
    currentMetadataOffset: r.int64('CurrentMetadataOffset'),
    wantFence: r.bool('WantFence'),
    wantShutDown: r.bool('WantShutDown'),
    taggedFields: r.tags('BrokerHeartbeatRequest'),
  };
}

function writeRequest(w: Writer, m: BrokerHeartbeatRequest): void {
  w.int32(m.brokerId, 'BrokerId');
  w.int64(m.brokerEpoch, 'BrokerEpoch');
  w.int64(m.currentMetadataOffset, 'CurrentMetadataOffset');
  w.bool(m.wantFence, 'WantFence');
  w.bool(m.wantShutDown, 'WantShutDown');
  w.tags('BrokerHeartbeatRequest', m.taggedFields);
}

function readResponse(r: Reader): BrokerHeartbeatResponse {
  return {
    throttleTimeMs: r.int32('ThrottleTimeMs'),
    errorCode: r.int16('ErrorCode'),
    isCaughtUp: r.bool('IsCaughtUp'),
    isFenced: r.bool('IsFenced'),
    shouldShutDown: r.bool('ShouldShutDown'),
    taggedFields: r.tags('BrokerHeartbeatResponse'),
  };
}

function writeResponse(w: Writer, m: BrokerHeartbeatResponse): void {
  w.int32(m.throttleTimeMs, 'ThrottleTimeMs');
  w.int16(m.errorCode, 'ErrorCode');
  w.bool(m.isCaughtUp, 'IsCaughtUp');
  w.bool(m.isFenced, 'IsFenced');
  w.bool(m.shouldShutDown, 'ShouldShutDown');
  w.tags('BrokerHeartbeatResponse', m.taggedFields);
}

/** `body` is the frame after the request header. */
export function decodeBrokerHeartbeatRequest(body: Buffer, version: number): BrokerHeartbeatRequest {
  return decodeBody(ApiKey.BrokerHeartbeat, 'BrokerHeartbeatRequest', body, version, readRequest);
}

export function encodeBrokerHeartbeatRequest(msg: BrokerHeartbeatRequest, version: number): Buffer {
  return encodeBody(ApiKey.BrokerHeartbeat, 'BrokerHeartbeatRequest', msg, version, writeRequest);
}

/** `body` is the frame after the response header. */
export function decodeBrokerHeartbeatResponse(body: Buffer, version: number): BrokerHeartbeatResponse {
  return decodeBody(ApiKey.BrokerHeartbeat, 'BrokerHeartbeatResponse', body, version, readResponse);
}

export function encodeBrokerHeartbeatResponse(msg: BrokerHeartbeatResponse, version: number): Buffer {
  return encodeBody(ApiKey.BrokerHeartbeat, 'BrokerHeartbeatResponse', msg, version, writeResponse);
}
