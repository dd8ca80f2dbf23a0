import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import type { FetchFillEvent } from '../../src/filters/fetch-fill.js';
import {
  type FetchStripEvent,
  type FetchTraceContextEvent,
  newFetchStripStats,
} from '../../src/filters/fetch-strip.js';
import { MAX_LINKED_OBJECTS, SpanMapper } from '../../src/telemetry/spans.js';

/** A SpanMapper over an in-memory exporter, as one sidecar has it. */
function sidecar(options: { sampled?: boolean } = {}) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    ...(options.sampled === false ? { sampler: new AlwaysOffSampler() } : {}),
  });
  const spans = new SpanMapper(provider.getTracer('test'));
  const finished = (name: string): ReadableSpan[] =>
    exporter.getFinishedSpans().filter((s) => s.name === name);
  /** Seals and uploads an object; returns its upload span (undefined when not sampled). */
  const upload = (objectKey: string) => {
    spans.seal({ objectKey, size: 1000, batchCount: 2, reason: 'linger', ageMs: 5 });
    spans.uploadStart({ objectKey, size: 1000, batchCount: 2, queuedMs: 0 });
    spans.uploadEnd({ objectKey, size: 1000, batchCount: 2, attempts: 1, durationMs: 4, error: undefined });
    return finished('walproxy.wal.upload').find((s) => s.attributes['walproxy.wal.object.key'] === objectKey);
  };
  return { spans, finished, upload };
}

function stripEvent(objectKeys: string[]): FetchStripEvent {
  return {
    references: objectKeys.length * 2,
    objectKeys,
    bytesReferenced: 4000,
    inlineBytes: newFetchStripStats().inlineBytesByReason,
    heldBatches: 0,
    holdMs: 0,
    durationMs: 2,
  };
}

function fillEvent(objectKeys: string[], uploads: FetchFillEvent['uploads']): FetchFillEvent {
  return { references: objectKeys.length * 2, objectKeys, uploads, bytes: 4000, durationMs: 3, fallbacks: 0 };
}

const contextOf = (span: ReadableSpan) => {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return { traceId, spanId, traceFlags };
};

describe('SpanMapper: a strip and a fill join their uploads', () => {
  it('makes a strip of one object the child of its upload span, with the object key', () => {
    // Given an uploaded object
    const leader = sidecar();
    const upload = leader.upload('wal/1/a');
    // When a strip references it
    leader.spans.strip(stripEvent(['wal/1/a']));
    // Then the strip is in the upload's trace, its child, searchable by the key
    const [strip] = leader.finished('walproxy.fetch.strip');
    expect(strip!.spanContext().traceId).toBe(upload!.spanContext().traceId);
    expect(strip!.parentSpanContext?.spanId).toBe(upload!.spanContext().spanId);
    expect(strip!.links).toEqual([]);
    expect(strip!.attributes).toMatchObject({
      'walproxy.wal.objects': 1,
      'walproxy.wal.object.key': 'wal/1/a',
    });
  });

  it('makes a strip of several objects a root linking to each upload, by key', () => {
    const leader = sidecar();
    const a = leader.upload('wal/1/a');
    const b = leader.upload('wal/1/b');
    // When a strip references both, and one the sidecar never uploaded (or has forgotten)
    leader.spans.strip(stripEvent(['wal/1/a', 'wal/1/b', 'wal/9/elsewhere']));
    const [strip] = leader.finished('walproxy.fetch.strip');
    // Then it is a root of its own, linked to the two it knows
    expect(strip!.parentSpanContext).toBeUndefined();
    expect(strip!.links.map((l) => [l.context.spanId, l.attributes?.['walproxy.wal.object.key']])).toEqual([
      [a!.spanContext().spanId, 'wal/1/a'],
      [b!.spanContext().spanId, 'wal/1/b'],
    ]);
    expect(strip!.attributes).toMatchObject({
      'walproxy.wal.objects': 3,
      'walproxy.wal.object.keys': ['wal/1/a', 'wal/1/b', 'wal/9/elsewhere'],
    });
  });

  it('links at most MAX_LINKED_OBJECTS uploads from one strip', () => {
    const leader = sidecar();
    const keys = Array.from({ length: MAX_LINKED_OBJECTS + 5 }, (_, i) => `wal/1/${i}`);
    for (const key of keys) leader.upload(key);
    leader.spans.strip(stripEvent(keys));
    const [strip] = leader.finished('walproxy.fetch.strip');
    expect(strip!.links).toHaveLength(MAX_LINKED_OBJECTS);
    expect(strip!.attributes['walproxy.wal.objects']).toBe(keys.length);
    expect((strip!.attributes['walproxy.wal.object.keys'] as string[]).length).toBeLessThan(keys.length);
  });

  it('gives the strip the sampled upload contexts to carry, none for an object it does not know', () => {
    const leader = sidecar();
    const a = leader.upload('wal/1/a');
    const ask: FetchTraceContextEvent = { objectKeys: ['wal/1/a', 'wal/9/elsewhere'], uploads: [] };
    leader.spans.traceContexts(ask);
    expect(ask.uploads).toEqual([contextOf(a!)]);
  });

  it('gives no context to carry when the upload span was not sampled', () => {
    // Given a sidecar whose sampler records nothing
    const leader = sidecar({ sampled: false });
    leader.upload('wal/1/a');
    const ask: FetchTraceContextEvent = { objectKeys: ['wal/1/a'], uploads: [] };
    leader.spans.traceContexts(ask);
    // Then the response carries nothing: no byte is added for an unsampled upload
    expect(ask.uploads).toEqual([]);
  });

  it("makes a follower's fill of one object the child of the upload context carried from the leader side", () => {
    // Given the leader side's upload, and its context as the Fetch response carried it
    const leader = sidecar();
    const upload = leader.upload('wal/1/a');
    const ask: FetchTraceContextEvent = { objectKeys: ['wal/1/a'], uploads: [] };
    leader.spans.traceContexts(ask);
    // When the follower side, another process, fills that object
    const follower = sidecar();
    follower.spans.fill(fillEvent(['wal/1/a'], ask.uploads));
    // Then its fill span is in the upload's trace, the upload's child (a remote parent)
    const [fill] = follower.finished('walproxy.fetch.fill');
    expect(fill!.spanContext().traceId).toBe(upload!.spanContext().traceId);
    expect(fill!.parentSpanContext).toMatchObject({ spanId: upload!.spanContext().spanId, isRemote: true });
    expect(fill!.attributes).toMatchObject({ 'walproxy.wal.object.key': 'wal/1/a' });
  });

  it('makes a fill of several objects a root linking to each carried upload', () => {
    const leader = sidecar();
    const a = leader.upload('wal/1/a');
    const b = leader.upload('wal/1/b');
    const follower = sidecar();
    follower.spans.fill(fillEvent(['wal/1/a', 'wal/1/b'], [contextOf(a!), contextOf(b!)]));
    const [fill] = follower.finished('walproxy.fetch.fill');
    expect(fill!.parentSpanContext).toBeUndefined();
    expect(fill!.links.map((l) => l.context.spanId)).toEqual([
      a!.spanContext().spanId,
      b!.spanContext().spanId,
    ]);
    expect(fill!.attributes['walproxy.wal.object.keys']).toEqual(['wal/1/a', 'wal/1/b']);
  });

  it('keeps a fill without a carried context a root linked to nothing', () => {
    const follower = sidecar();
    follower.spans.fill(fillEvent(['wal/1/a'], []));
    const [fill] = follower.finished('walproxy.fetch.fill');
    expect(fill!.parentSpanContext).toBeUndefined();
    expect(fill!.links).toEqual([]);
  });
});
