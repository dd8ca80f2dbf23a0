/** Per-listener counters, served as JSON on the admin endpoint's /counters. */
export interface ListenerCounters {
  connectionsAccepted: number;
  connectionsActive: number;
  /** Requests forwarded (or answered locally), by API name. */
  requests: Record<string, number>;
  bytesFromDownstream: number;
  bytesFromUpstream: number;
  closedForProtocolError: number;
  upstreamConnectFailures: number;
}

export function newListenerCounters(): ListenerCounters {
  return {
    connectionsAccepted: 0,
    connectionsActive: 0,
    requests: {},
    bytesFromDownstream: 0,
    bytesFromUpstream: 0,
    closedForProtocolError: 0,
    upstreamConnectFailures: 0,
  };
}
