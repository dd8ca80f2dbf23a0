import { ApiKey, peekProduceAcks } from '@walproxy/shared';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';

type ForwardDecision = Extract<RequestDecision, { action: 'forward' }>;

/**
 * Several filters on one listener, where more than one may claim an API key: a connection pipe
 * gives each key to a single filter, so zone routing (which must see Produce, Fetch and Metadata
 * on the client ingress) and the WAL's Produce filter are chained instead of one replacing the
 * other.
 *
 * A request passes the claiming filters in list order, each seeing the frame the previous one
 * forwarded; one that answers locally ends the chain (later filters never see the request, so
 * none of them waits for a response). A filter that decides asynchronously (a promise) holds the
 * later filters until it has decided. Filters keep per-request state keyed by the RequestInfo
 * object, which the chain hands every filter unchanged. The response passes them in reverse order, the filter
 * nearest the upstream first, each seeing the previous one's output, promises included.
 */
export class FilterChain implements FrameFilter {
  readonly apiKeys: ReadonlySet<number>;
  private readonly byKey = new Map<number, FrameFilter[]>();
  private readonly filters: readonly FrameFilter[];

  constructor(filters: readonly FrameFilter[]) {
    this.filters = [...new Set(filters)];
    for (const filter of filters) {
      for (const key of filter.apiKeys) {
        const chain = this.byKey.get(key) ?? [];
        chain.push(filter);
        this.byKey.set(key, chain);
      }
    }
    this.apiKeys = new Set(this.byKey.keys());
  }

  onRequest(
    info: RequestInfo,
    frame: Buffer,
    connection: FilterConnection,
  ): RequestDecision | Promise<RequestDecision> {
    const decision: ForwardDecision = {
      action: 'forward',
      frame,
      // As the pipe decides for unfiltered frames: acks=0 Produce has no response.
      expectResponse:
        info.apiKey !== ApiKey.Produce || peekProduceAcks(frame.subarray(FRAME_SIZE_PREFIX_BYTES)) !== 0,
    };
    return this.from(0, this.byKey.get(info.apiKey) ?? [], info, decision, connection);
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

  /** Every chained filter releases what it keeps for the connection (frame-filter.ts). */
  onClose(connection: FilterConnection): void {
    for (const filter of this.filters) filter.onClose?.(connection);
  }

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
}
