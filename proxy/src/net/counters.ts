/** Per-listener counters, served as JSON on the admin endpoint's /counters. */
export interface ListenerCounters {
  connectionsAccepted: number;
  connectionsActive: number;
  /** Requests forwarded (or answered locally), by API name. */
  requests: Record<string, number>;
  /** Bytes as received, before any filter. */
  bytesFromDownstream: number;
  bytesFromUpstream: number;
  /** Bytes as sent, after filters (a leader-side response with references is smaller). */
  bytesToDownstream: number;
  bytesToUpstream: number;
  closedForProtocolError: number;
  upstreamConnectFailures: number;
  /** Of those, TLS handshakes to the upstream that failed once TCP connected (egress to a peer). */
  upstreamTlsHandshakeFailures: number;
  /** TLS listeners: handshakes refused (no or bad client certificate, protocol mismatch). */
  tlsHandshakeFailures: number;
  /** Large responses no filter reads, passed downstream as they arrived instead of whole. */
  responsesStreamed: number;
  /** Large requests no filter reads, passed upstream as they arrived instead of whole. */
  requestsStreamed: number;
}

export function newListenerCounters(): ListenerCounters {
  return {
    connectionsAccepted: 0,
    connectionsActive: 0,
    requests: {},
    bytesFromDownstream: 0,
    bytesFromUpstream: 0,
    bytesToDownstream: 0,
    bytesToUpstream: 0,
    closedForProtocolError: 0,
    upstreamConnectFailures: 0,
    upstreamTlsHandshakeFailures: 0,
    tlsHandshakeFailures: 0,
    responsesStreamed: 0,
    requestsStreamed: 0,
  };
}
