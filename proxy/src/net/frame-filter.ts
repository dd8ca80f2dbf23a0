import type { Logger } from '../log.js';

/** What the pipe knows of every request: enough to pair it with its response. */
export interface RequestInfo {
  readonly apiKey: number;
  readonly apiVersion: number;
  readonly correlationId: number;
}

/**
 * What to do with one request frame:
 * - `forward`: send `frame` (the original bytes unless the filter rewrote them) upstream;
 *   `expectResponse` is false only for Produce with acks=0, which the broker never answers.
 * - `respond`: answer locally with `response` (a whole frame, size prefix included), in order
 *   with the responses still due on this connection; nothing goes upstream.
 */
export type RequestDecision =
  | { readonly action: 'forward'; readonly frame: Buffer; readonly expectResponse: boolean }
  | { readonly action: 'respond'; readonly response: Buffer };

/**
 * The connection a frame belongs to, for filters that must say something about it. One object per
 * connection, the same for every request of it: filters may key per-connection state by it, and
 * release that state in onClose.
 */
export interface FilterConnection {
  /** The connection's logger: carries the listener name and the downstream peer address. */
  readonly log: Logger;
  /** The downstream peer's IP address, when the socket knows it. */
  readonly remoteAddress?: string | undefined;
  /**
   * Sends a request of the sidecar's own on this connection's upstream and resolves with its
   * response frame, which goes to the caller, never downstream nor through the filters. The frame
   * must carry `correlationId`, one the downstream does not use (negative ids: walproxy's). Rejects
   * when the connection closes first. Responses stay paired in order: the upstream answers
   * requests on a connection in the order it got them.
   */
  sendUpstream?(frame: Buffer, correlationId: number): Promise<Buffer>;
}

/**
 * A filter claims some API keys; frames of every other key pass through opaque (never decoded,
 * never re-encoded). Frames are whole, size prefix included.
 */
export interface FrameFilter {
  readonly apiKeys: ReadonlySet<number>;
  /**
   * May return a promise (a request that must wait for something first, e.g. a store write). The
   * pipe keeps reading and deciding later requests of the connection, but forwards (or answers)
   * them only after this one, so the upstream sees them in the order the downstream sent them.
   * A rejected promise closes the connection.
   */
  onRequest?(
    info: RequestInfo,
    frame: Buffer,
    connection: FilterConnection,
  ): RequestDecision | Promise<RequestDecision>;
  /** May return a promise (a response held until something is durable); order is kept anyway. */
  onResponse?(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer>;
  /**
   * The connection closed (either side, or the sidecar closed it): forget whatever is kept for it,
   * so that nothing keyed by a connection outlives it. Called once per connection, for every
   * filter of its pipe, whether or not the filter saw a frame of it; no onResponse of it follows.
   * A decision still pending (a promise onRequest returned) may settle later: it must not keep
   * anything for the connection then.
   */
  onClose?(connection: FilterConnection): void;
}

/**
 * Sees every frame as it arrives, before any filter: requests as the downstream sent them,
 * responses as the upstream sent them. For diagnostics and fixture capture; must not keep the
 * frame beyond the call without copying it (it may be a view of a socket chunk).
 */
export interface FrameObserver {
  request?(info: RequestInfo, frame: Buffer): void;
  response?(info: RequestInfo, frame: Buffer): void;
}
