// Spans from the diagnostics-channel events. Every event arrives when its work is done, carrying
// its duration, so spans are created with an explicit start time and ended at once: no span is
// ever left open. Correlation:
// - a WAL object's upload span is a child of its seal span (by object key);
// - a Produce request's durable-ack span is a child of its interception span (by request) and
//   links to the upload spans of the objects that carried its batches (by object key, remembered
//   for the last RECENT_UPLOADS uploads);
// - a leader strip and a follower fill that reference one object are children of its upload span
//   (the strip by key, in this process; the fill by the context the strip carried across in the
//   Fetch response, WAL_TRACE_TAG), so the object's trace holds seal → upload → strips and fills
//   on every sidecar; one that references several objects is a root linking to each upload, as
//   OpenTelemetry's messaging conventions do for a batch: no one object is its parent.
// A Produce request's batches may land in several objects and an object holds many requests'
// batches, so the produce trace links to the object traces rather than holding them.
import {
  type Attributes,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { TRACE_FLAG_SAMPLED } from '@walproxy/shared';
import type { FetchFallbackEvent, FetchFillEvent } from '../filters/fetch-fill.js';
import type { FetchStripEvent, FetchTraceContextEvent } from '../filters/fetch-strip.js';
import type { ProduceDurableAckEvent, ProduceInterceptEvent } from '../filters/produce-wal.js';
import type { RequestInfo } from '../net/frame-filter.js';
import type {
  WalSealEvent,
  WalUploadAttemptEvent,
  WalUploadEndEvent,
  WalUploadStartEvent,
} from '../wal/channels.js';

/** Upload span contexts kept for links from durable-ack spans; sealed/uploading ones are kept until their end. */
export const RECENT_UPLOADS = 4096;
const MAX_OPEN = 65_536;
/**
 * Objects one strip or fill links to, and upload contexts one response carries (25 bytes each):
 * a response references a few objects (its size over the objects'), a catching-up follower's
 * maybe dozens; past this the span says how many in `walproxy.wal.objects`.
 */
export const MAX_LINKED_OBJECTS = 32;
/** Object keys listed on a strip or fill span (`walproxy.wal.object.keys`). */
export const MAX_LISTED_KEYS = 16;

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class SpanMapper {
  readonly #seals = new Map<string, SpanContext>();
  readonly #uploads = new Map<string, Span>();
  readonly #recent = new Map<string, SpanContext>();
  readonly #intercepts = new WeakMap<RequestInfo, SpanContext>();
  #fallbacks: FetchFallbackEvent[] = [];

  constructor(
    private readonly tracer: Tracer,
    private readonly now: () => number = () => Date.now(),
  ) {}

  #start(name: string, startMs: number, attributes: Attributes, parent?: SpanContext, links?: Link[]): Span {
    const ctx = parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
    return this.tracer.startSpan(name, { startTime: startMs, attributes, ...(links ? { links } : {}) }, ctx);
  }

  intercept(e: ProduceInterceptEvent): void {
    const now = this.now();
    const span = this.#start('walproxy.produce', now, {
      'walproxy.produce.topics': e.topics,
      'walproxy.produce.batches': e.batches,
      'walproxy.produce.bytes': e.bytes,
      'walproxy.produce.deferred_topics': e.deferredTopics,
      'walproxy.produce.durable_ack': e.durableAck,
    });
    span.end(now);
    if (e.durableAck || e.deferredTopics > 0) this.#intercepts.set(e.request, span.spanContext());
  }

  durableAck(e: ProduceDurableAckEvent): void {
    const now = this.now();
    const links: Link[] = [];
    for (const key of e.objectKeys) {
      const upload = this.#recent.get(key);
      if (upload) links.push({ context: upload, attributes: { 'walproxy.wal.object.key': key } });
    }
    const span = this.#start(
      'walproxy.produce.durable_ack',
      now - e.durationMs,
      {
        'walproxy.produce.outcome': e.outcome,
        'walproxy.produce.batches': e.batches,
        'walproxy.produce.failed_partitions': e.failedPartitions,
        'walproxy.wal.objects': e.objectKeys.length,
      },
      this.#intercepts.get(e.request),
      links,
    );
    if (e.outcome === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: 'batches not stored' });
    span.end(now);
  }

  seal(e: WalSealEvent): void {
    const now = this.now();
    const span = this.#start('walproxy.wal.seal', now - e.ageMs, {
      'walproxy.wal.object.key': e.objectKey,
      'walproxy.wal.object.size': e.size,
      'walproxy.wal.object.batches': e.batchCount,
      'walproxy.wal.seal.reason': e.reason,
    });
    span.end(now);
    remember(this.#seals, e.objectKey, span.spanContext(), MAX_OPEN);
  }

  uploadStart(e: WalUploadStartEvent): void {
    const span = this.#start(
      'walproxy.wal.upload',
      this.now() - e.queuedMs,
      {
        'walproxy.wal.object.key': e.objectKey,
        'walproxy.wal.object.size': e.size,
        'walproxy.wal.object.batches': e.batchCount,
        'walproxy.wal.upload.queued_ms': e.queuedMs,
      },
      this.#seals.get(e.objectKey),
    );
    this.#seals.delete(e.objectKey);
    const previous = this.#uploads.get(e.objectKey);
    previous?.end();
    remember(this.#uploads, e.objectKey, span, MAX_OPEN, (s) => s.end());
  }

  uploadAttempt(e: WalUploadAttemptEvent): void {
    const attributes: Attributes = {
      'walproxy.wal.upload.attempt': e.attempt,
      'walproxy.wal.upload.attempt.duration_ms': e.durationMs,
      'walproxy.wal.upload.already_stored': e.alreadyStored,
    };
    if (e.error !== undefined) {
      attributes['walproxy.wal.upload.error'] = errorText(e.error);
      attributes['walproxy.wal.upload.retriable'] = e.retriable;
    }
    if (e.backoffMs !== undefined) attributes['walproxy.wal.upload.backoff_ms'] = e.backoffMs;
    this.#uploads.get(e.objectKey)?.addEvent('attempt', attributes);
  }

  uploadEnd(e: WalUploadEndEvent): void {
    const now = this.now();
    let span = this.#uploads.get(e.objectKey);
    this.#uploads.delete(e.objectKey);
    // The deadline can end an upload that never got a slot: no start event came.
    span ??= this.#start(
      'walproxy.wal.upload',
      now - e.durationMs,
      {
        'walproxy.wal.object.key': e.objectKey,
        'walproxy.wal.object.size': e.size,
        'walproxy.wal.object.batches': e.batchCount,
      },
      this.#seals.get(e.objectKey),
    );
    this.#seals.delete(e.objectKey);
    span.setAttribute('walproxy.wal.upload.attempts', e.attempts);
    if (e.error === undefined) {
      span.setAttribute('walproxy.wal.upload.outcome', 'stored');
    } else {
      span.setAttribute('walproxy.wal.upload.outcome', 'failed');
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorText(e.error) });
    }
    span.end(now);
    remember(this.#recent, e.objectKey, span.spanContext(), RECENT_UPLOADS);
  }

  /** The sampled upload spans of a response's objects, for the strip to carry to the follower side. */
  traceContexts(e: FetchTraceContextEvent): void {
    for (const key of e.objectKeys) {
      if (e.uploads.length >= MAX_LINKED_OBJECTS) break;
      const upload = this.#recent.get(key);
      if (upload && upload.traceFlags & TRACE_FLAG_SAMPLED) {
        e.uploads.push({ traceId: upload.traceId, spanId: upload.spanId, traceFlags: upload.traceFlags });
      }
    }
  }

  strip(e: FetchStripEvent): void {
    const now = this.now();
    const start = now - e.durationMs;
    const uploads: Array<{ key: string; context: SpanContext }> = [];
    for (const key of e.objectKeys) {
      const context = this.#recent.get(key);
      if (context) uploads.push({ key, context });
    }
    const { parent, links } = joinUploads(e.objectKeys.length, uploads);
    const span = this.#start(
      'walproxy.fetch.strip',
      start,
      {
        'walproxy.fetch.references': e.references,
        ...objectAttributes(e.objectKeys),
        'walproxy.fetch.bytes_referenced': e.bytesReferenced,
        ...Object.fromEntries(
          Object.entries(e.inlineBytes).map(([reason, bytes]) => [
            `walproxy.fetch.inline_bytes.${reason.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`,
            bytes,
          ]),
        ),
        'walproxy.fetch.held_batches': e.heldBatches,
      },
      parent,
      links,
    );
    if (e.heldBatches > 0) {
      this.#start(
        'walproxy.fetch.hold',
        start,
        { 'walproxy.fetch.held_batches': e.heldBatches, 'walproxy.fetch.hold_ms': e.holdMs },
        span.spanContext(),
      ).end(Math.min(now, start + e.holdMs));
    }
    span.end(now);
  }

  /** Fallbacks are published just before their response's fill event, in the same tick. */
  fallback(e: FetchFallbackEvent): void {
    if (this.#fallbacks.length < 1000) this.#fallbacks.push(e);
  }

  fill(e: FetchFillEvent): void {
    const now = this.now();
    // Contexts from the other process: remote, and only the sampled ones were sent.
    const uploads = e.uploads.map((c) => ({ context: { ...c, isRemote: true } satisfies SpanContext }));
    const { parent, links } = joinUploads(e.objectKeys.length, uploads);
    const span = this.#start(
      'walproxy.fetch.fill',
      now - e.durationMs,
      {
        'walproxy.fetch.references': e.references,
        ...objectAttributes(e.objectKeys),
        'walproxy.fetch.bytes': e.bytes,
        'walproxy.fetch.fallbacks': e.fallbacks,
      },
      parent,
      links,
    );
    const fallbacks = this.#fallbacks.splice(0);
    for (const f of e.fallbacks > 0 ? fallbacks.slice(-e.fallbacks) : []) {
      span.addEvent('fallback', {
        'walproxy.fetch.fallback.reason': f.reason,
        'walproxy.fetch.fallback.detail': f.detail,
        'walproxy.fetch.fallback.partition': f.partition,
        'walproxy.fetch.fallback.from_offset': f.fromOffset.toString(),
        ...(f.topic !== undefined ? { 'walproxy.fetch.fallback.topic': f.topic } : {}),
        ...(f.topicId !== undefined ? { 'walproxy.fetch.fallback.topic_id': f.topicId } : {}),
      });
    }
    if (e.fallbacks > 0)
      span.setStatus({ code: SpanStatusCode.ERROR, message: `${e.fallbacks} partitions fell back` });
    span.end(now);
  }
}

/**
 * A span over one object's references is the child of its upload; over several (or one whose
 * upload is not known here), a root linking to each upload known, at most MAX_LINKED_OBJECTS.
 */
function joinUploads(
  objects: number,
  uploads: ReadonlyArray<{ key?: string; context: SpanContext }>,
): { parent: SpanContext | undefined; links: Link[] } {
  if (objects === 1 && uploads.length === 1) return { parent: uploads[0]!.context, links: [] };
  const links = uploads.slice(0, MAX_LINKED_OBJECTS).map(({ key, context }) => ({
    context,
    ...(key !== undefined ? { attributes: { 'walproxy.wal.object.key': key } } : {}),
  }));
  return { parent: undefined, links };
}

/**
 * The objects a strip or fill referenced: their number, and the key itself when there is one (the
 * tag an operator searches by in Jaeger, as on the seal and upload spans) or the first keys.
 */
function objectAttributes(keys: readonly string[]): Attributes {
  if (keys.length === 0) return { 'walproxy.wal.objects': 0 };
  if (keys.length === 1) return { 'walproxy.wal.objects': 1, 'walproxy.wal.object.key': keys[0]! };
  return { 'walproxy.wal.objects': keys.length, 'walproxy.wal.object.keys': keys.slice(0, MAX_LISTED_KEYS) };
}

/** Map insert that evicts the oldest entry past `max` (a Map iterates in insertion order). */
function remember<V>(
  map: Map<string, V>,
  key: string,
  value: V,
  max: number,
  evicted?: (v: V) => void,
): void {
  map.delete(key);
  map.set(key, value);
  if (map.size <= max) return;
  const oldest = map.keys().next().value as string;
  evicted?.(map.get(oldest)!);
  map.delete(oldest);
}
