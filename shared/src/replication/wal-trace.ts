// The trace context of WAL uploads, carried from the leader's sidecar to the follower's in the
// Fetch response it rewrote with references, so the follower's fill joins the upload's trace
// (docs/observability.md, "Following one produced batch"). A separate tag from the reference format
// (wal-references.ts) with its own version: a follower side that does not read it, or reads
// another version, fills the references all the same; a stock broker skips it (KIP-482), and the
// follower side drops it before the response reaches its broker anyway.
//
// Fetch response, top-level tag WAL_TRACE_TAG (added by the leader's replication ingress, only
// when tracing is on there and at least one referenced object's upload span was sampled):
//   Version int8 (= 1)
//   Uploads COMPACT_ARRAY of: the upload span of a WAL object the response references
//     TraceId 16 bytes, SpanId 8 bytes, TraceFlags int8 — a W3C traceparent's fields (version
//     00, no tracestate: walproxy sets none)
// No object keys: the segment lists name the objects already, and each upload span carries its
// key (walproxy.wal.object.key). One context costs 25 bytes; the tag, one context included, 31.

import { Reader } from '../protocol/reader.js';
import { Writer } from '../protocol/writer.js';

export const WAL_TRACE_TAG = 27_003;
export const WAL_TRACE_VERSION = 1;
/** Bytes of one context on the wire. */
export const WAL_TRACE_CONTEXT_BYTES = 16 + 8 + 1;
/** W3C trace-flags bit 0: the span was sampled (recorded and exported). */
export const TRACE_FLAG_SAMPLED = 0x01;

/** A span's identity as W3C traceparent and OpenTelemetry's SpanContext spell it. */
export interface WalTraceContext {
  /** 32 lowercase hex digits, not all zero. */
  traceId: string;
  /** 16 lowercase hex digits, not all zero. */
  spanId: string;
  traceFlags: number;
}

const CTX = { api: 'WalproxyTrace', version: WAL_TRACE_VERSION, flexible: true };
const TRACE_ID = /^(?!0{32})[0-9a-f]{32}$/;
const SPAN_ID = /^(?!0{16})[0-9a-f]{16}$/;

export function isValidTraceContext(c: WalTraceContext): boolean {
  return (
    TRACE_ID.test(c.traceId) &&
    SPAN_ID.test(c.spanId) &&
    Number.isInteger(c.traceFlags) &&
    c.traceFlags >= 0 &&
    c.traceFlags <= 0xff
  );
}

/** The tag's bytes; the caller leaves the tag out when there is no context. */
export function encodeWalTrace(uploads: readonly WalTraceContext[]): Buffer {
  const w = new Writer(CTX, 2 + uploads.length * WAL_TRACE_CONTEXT_BYTES);
  w.int8(WAL_TRACE_VERSION, 'Version');
  w.compactArray(uploads, 'Uploads', (w2, c) => {
    if (!isValidTraceContext(c))
      w2.fail('INVALID_VALUE', 'Uploads', `not a W3C span context: ${c.traceId}-${c.spanId}`);
    w2.uuid(c.traceId, 'TraceId');
    w2.uint32(Number.parseInt(c.spanId.slice(0, 8), 16), 'SpanId');
    w2.uint32(Number.parseInt(c.spanId.slice(8), 16), 'SpanId');
    w2.int8((c.traceFlags << 24) >> 24, 'TraceFlags');
  });
  return w.finish();
}

/**
 * The carried contexts, or undefined when the tag is another version or unreadable: tracing is
 * best effort and never stops a fill. Invalid ids (all zero) are dropped one by one.
 */
export function decodeWalTrace(data: Buffer): WalTraceContext[] | undefined {
  try {
    const r = new Reader(data, CTX);
    if (r.int8('Version') !== WAL_TRACE_VERSION) return undefined;
    const hex32 = (r2: Reader) => r2.uint32('SpanId').toString(16).padStart(8, '0');
    const uploads = r.compactArray('Uploads', (r2) => ({
      traceId: r2.uuid('TraceId'),
      spanId: hex32(r2) + hex32(r2),
      traceFlags: r2.int8('TraceFlags') & 0xff,
    }));
    r.done('WalproxyTrace');
    return uploads.filter(isValidTraceContext);
  } catch {
    return undefined;
  }
}
