import { ApiKey, peekProduceAcks } from '@walproxy/shared';
import { FRAME_SIZE_PREFIX_BYTES } from './frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from './frame-filter.js';

type ForwardDecision = Extract<RequestDecision, { action: 'forward' }>;

/**
 * The filters of one listener, shared by every connection of it; any number of them may claim an
 * API key (zone routing, the WAL's Produce filter and zone-local produce all read Produce on a
 * zone listener). Frames of a key no filter claims pass through opaque.
 *
 * The order is the list's, and its rule is: **filters are listed from the downstream side to the
 * upstream side.** A request passes the filters claiming its key in list order, each seeing the
 * frame the previous one forwarded; its response passes them in reverse, the filter nearest the
 * upstream first, each seeing the previous one's output. So a filter that answers without the
 * broker (ApiVersions above what walproxy speaks, SaslHandshake v0) comes before the filters that
 * would otherwise see the request, and a filter that must see the broker's own answer (zone-local
 * produce resolving a reference) comes after the ones that rewrite it (zone routing's addresses).
 *
 * A filter that answers locally ends the request's way (later filters never see it, so none of them
 * waits for a response). A filter that decides asynchronously (a promise) holds the later filters
 * until it has decided; responses may be promises too, and the order of their outputs is kept.
 * Filters keep per-request state keyed by the RequestInfo object, which the chain hands every
 * filter unchanged.
 */
export class FilterChain {
  /** Every key some filter claims: frames of the others are never decoded nor held whole. */
  readonly apiKeys: ReadonlySet<number>;
  private readonly byKey = new Map<number, FrameFilter[]>();
  /** Keys whose response some filter reads: those are assembled whole, never streamed. */
  private readonly responseKeys = new Set<number>();
  private readonly filters: readonly FrameFilter[];

  constructor(filters: readonly FrameFilter[]) {
    this.filters = [...new Set(filters)];
    for (const filter of filters) {
      for (const key of filter.apiKeys) {
        const chain = this.byKey.get(key) ?? [];
        chain.push(filter);
        this.byKey.set(key, chain);
        if (filter.onResponse) this.responseKeys.add(key);
      }
    }
    this.apiKeys = new Set(this.byKey.keys());
  }

  /** Whether a filter reads responses of this key (a response nobody reads may be streamed). */
  readsResponse(apiKey: number): boolean {
    return this.responseKeys.has(apiKey);
  }

  /** The request's decision: the claiming filters', else forward it as it came. */
  onRequest(
    info: RequestInfo,
    frame: Buffer,
    connection: FilterConnection,
  ): RequestDecision | Promise<RequestDecision> {
    const decision: ForwardDecision = {
      action: 'forward',
      frame,
      // KIP-98/Kroxylicious: acks=0 Produce has no response; waiting for one would stall the connection.
      expectResponse:
        info.apiKey !== ApiKey.Produce || peekProduceAcks(frame.subarray(FRAME_SIZE_PREFIX_BYTES)) !== 0,
    };
    const filters = this.byKey.get(info.apiKey);
    return filters ? this.from(0, filters, info, decision, connection) : decision;
  }

  /** Passes `decision` through filters[at..]; a filter that decides later makes the rest wait for it. */
  private from(
    at: number,
    filters: readonly FrameFilter[],
    info: RequestInfo,
    decision: ForwardDecision,
    connection: FilterConnection,
  ): RequestDecision | Promise<RequestDecision> {
    for (let i = at; i < filters.length; i++) {
      const filter = filters[i]!;
      if (!filter.onRequest) continue;
      const next = filter.onRequest(info, decision.frame, connection);
      if (next instanceof Promise) {
        return next.then((settled) =>
          settled.action === 'respond' ? settled : this.from(i + 1, filters, info, settled, connection),
        );
      }
      if (next.action === 'respond') return next;
      decision = next;
    }
    return decision;
  }

  /** The response as the filters leave it; the frame itself when no filter reads it. */
  onResponse(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer> {
    const chain = this.byKey.get(info.apiKey) ?? [];
    let out: Buffer | Promise<Buffer> = frame;
    for (let i = chain.length - 1; i >= 0; i--) {
      const filter = chain[i]!;
      if (!filter.onResponse) continue;
      out =
        out instanceof Promise
          ? out.then((buffer) => filter.onResponse!(info, buffer))
          : filter.onResponse(info, out);
    }
    return out;
  }

  /**
   * Every filter releases what it keeps for the connection (frame-filter.ts), whatever keys it
   * claims; one that fails is logged and the others still run.
   */
  onClose(connection: FilterConnection): void {
    for (const filter of this.filters) {
      try {
        filter.onClose?.(connection);
      } catch (error) {
        // A close runs from socket events: a filter's bug must not take the sidecar down.
        connection.log.warn(
          { error: (error as Error).message },
          'filter failed to release a closed connection',
        );
      }
    }
  }
}
