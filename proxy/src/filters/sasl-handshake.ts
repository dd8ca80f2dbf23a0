import { encodeFrame, encodeResponseHeader } from '@walproxy/shared';
import { encodeSaslHandshakeResponse, SASL_HANDSHAKE } from '../metadata/sasl-messages.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';

const UNSUPPORTED_VERSION = 35;

/**
 * SASL passes through walproxy untouched — SaslHandshake v1, SaslAuthenticate and KIP-368
 * re-authentication are ordinary framed requests, forwarded opaque, so the broker authenticates
 * every client and follower and its authorizer enforces ACLs — except SaslHandshake v0.
 *
 * After a successful v0 handshake the client sends raw SASL tokens: a 4-byte size and the token,
 * no request header (the pre-KIP-152 protocol), and the broker answers with raw tokens without a
 * correlation id. The frame-aware pipe would read a token as a request header, and only the SASL
 * mechanism knows when the raw phase ends, so passing it through would mean parsing PLAIN, SCRAM,
 * GSSAPI and OAUTHBEARER. Kafka 3.9 to 4.x still serve v0 (SaslHandshakeRequest.json keeps
 * validVersions 0-1: KIP-896 removed other old versions, not this one), while the Java client since
 * 1.0, librdkafka and kafkajs send v1 whenever the broker offers it; v0 comes only from old
 * defaults of other clients (Sarama, kafka-python), which then get a clear error. So a v0 handshake is answered here with UNSUPPORTED_VERSION before it reaches the
 * broker, which is left in its pre-handshake state: the client may retry with v1 on the same
 * connection, and nothing raw ever enters the pipe.
 *
 * ApiVersions responses keep SaslHandshake's range 0-1 as the broker wrote it: raising the minimum
 * would make librdkafka's feature check (SaslHandshake 0..0 for its SASL feature flag) fail, the
 * same trap as KAFKA-18659.
 */
export class SaslHandshakeFilter implements FrameFilter {
  readonly apiKeys = new Set([SASL_HANDSHAKE]);
  /** SaslHandshake v0 requests answered with UNSUPPORTED_VERSION. */
  refusedV0 = 0;

  onRequest(info: RequestInfo, frame: Buffer, connection: FilterConnection): RequestDecision {
    if (info.apiVersion >= 1) return { action: 'forward', frame, expectResponse: true };
    this.refusedV0++;
    connection.log.warn(
      { api: 'SaslHandshake v0' },
      'SaslHandshake v0 refused with UNSUPPORTED_VERSION: raw SASL tokens (before KIP-152) cannot pass the sidecar; the client must use SaslHandshake v1',
    );
    const response = encodeFrame(
      encodeResponseHeader({ correlationId: info.correlationId }, 0),
      encodeSaslHandshakeResponse({ errorCode: UNSUPPORTED_VERSION, mechanisms: [] }, 0),
    );
    return { action: 'respond', response };
  }
}
