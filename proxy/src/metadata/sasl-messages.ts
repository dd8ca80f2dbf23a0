// SaslHandshake (key 17) and SaslAuthenticate (key 36), every version Kafka 3.9–4.x serves. The
// sidecar forwards both opaque on its listeners; these codecs serve its own SASL client
// (sasl-client.ts) and the local answer to a SaslHandshake v0 (filters/sasl-handshake.ts).
// Small enough to live next to their only users rather than in @walproxy/shared's message set.
//
// SaslHandshakeRequest v0-1 (never flexible) => mechanism:STRING
// SaslHandshakeResponse v0-1                 => error_code:INT16 [mechanisms:STRING]
//   v0: after a successful handshake the client sends raw SASL tokens, each a 4-byte size and the
//       token, with no Kafka request header (before KIP-152); v1: tokens go in SaslAuthenticate.
//
// SaslAuthenticateRequest v0-2 (flexible from v2)  => auth_bytes:BYTES
// SaslAuthenticateResponse v0-2                    => error_code:INT16 error_message:NULLABLE_STRING
//                                                     auth_bytes:BYTES session_lifetime_ms:INT64 (v1+)
//   v1 adds session_lifetime_ms (KIP-368: re-authenticate before it ends); v2 is flexible.
import { Reader, Writer } from '@walproxy/shared';

export const SASL_HANDSHAKE = 17;
export const SASL_AUTHENTICATE = 36;

export interface SaslHandshakeResponse {
  errorCode: number;
  mechanisms: string[];
}

export interface SaslAuthenticateResponse {
  errorCode: number;
  errorMessage: string | null;
  authBytes: Buffer;
  /** 0 when the broker does not expire sessions (connections.max.reauth.ms unset) or before v1. */
  sessionLifetimeMs: bigint;
}

const handshake = (version: number) => ({ api: 'SaslHandshake', version, flexible: false });
const authenticate = (version: number) => ({ api: 'SaslAuthenticate', version, flexible: version >= 2 });

export function encodeSaslHandshakeRequest(mechanism: string, version: number): Buffer {
  const w = new Writer(handshake(version));
  w.string(mechanism, 'Mechanism');
  return w.finish();
}

export function decodeSaslHandshakeRequest(body: Buffer, version: number): string {
  const r = new Reader(body, handshake(version));
  const mechanism = r.string('Mechanism');
  r.done('SaslHandshakeRequest');
  return mechanism;
}

export function encodeSaslHandshakeResponse(response: SaslHandshakeResponse, version: number): Buffer {
  const w = new Writer(handshake(version));
  w.int16(response.errorCode, 'ErrorCode');
  w.array(response.mechanisms, 'Mechanisms', (w2, m) => w2.string(m, 'Mechanism'));
  return w.finish();
}

export function decodeSaslHandshakeResponse(body: Buffer, version: number): SaslHandshakeResponse {
  const r = new Reader(body, handshake(version));
  const errorCode = r.int16('ErrorCode');
  const mechanisms = r.array('Mechanisms', (r2) => r2.string('Mechanism'));
  r.done('SaslHandshakeResponse');
  return { errorCode, mechanisms };
}

export function encodeSaslAuthenticateRequest(authBytes: Buffer, version: number): Buffer {
  const w = new Writer(authenticate(version));
  if (version >= 2) w.compactBytes(authBytes, 'AuthBytes');
  else w.bytes(authBytes, 'AuthBytes');
  w.tags('TaggedFields', undefined);
  return w.finish();
}

export function decodeSaslAuthenticateRequest(body: Buffer, version: number): Buffer {
  const r = new Reader(body, authenticate(version));
  const authBytes = version >= 2 ? r.compactBytes('AuthBytes') : r.bytes('AuthBytes');
  if (version >= 2) r.tags('TaggedFields');
  r.done('SaslAuthenticateRequest');
  return authBytes;
}

export function encodeSaslAuthenticateResponse(response: SaslAuthenticateResponse, version: number): Buffer {
  const w = new Writer(authenticate(version));
  w.int16(response.errorCode, 'ErrorCode');
  w.nullableStr(response.errorMessage, 'ErrorMessage');
  if (version >= 2) w.compactBytes(response.authBytes, 'AuthBytes');
  else w.bytes(response.authBytes, 'AuthBytes');
  if (version >= 1) w.int64(response.sessionLifetimeMs, 'SessionLifetimeMs');
  w.tags('TaggedFields', undefined);
  return w.finish();
}

export function decodeSaslAuthenticateResponse(body: Buffer, version: number): SaslAuthenticateResponse {
  const r = new Reader(body, authenticate(version));
  const errorCode = r.int16('ErrorCode');
  const errorMessage = r.nullableStr('ErrorMessage');
  const authBytes = version >= 2 ? r.compactBytes('AuthBytes') : r.bytes('AuthBytes');
  const sessionLifetimeMs = version >= 1 ? r.int64('SessionLifetimeMs') : 0n;
  if (version >= 2) r.tags('TaggedFields');
  r.done('SaslAuthenticateResponse');
  return { errorCode, errorMessage, authBytes, sessionLifetimeMs };
}
