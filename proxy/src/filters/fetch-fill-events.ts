// What the follower side's fill (fetch-fill.ts) reports: the diagnostics channels it publishes on,
// their events, why bytes came inline or a partition ended early, and its counters.
import type { WalTraceContext } from '@walproxy/shared';

/** What the filter publishes on node:diagnostics_channel; telemetry subscribes and maps them. */
export const FETCH_FILL_CHANNELS = {
  /** A response carrying references was rebuilt: FetchFillEvent. */
  fill: 'walproxy:fetch:fill',
  /** A partition ended at its last good batch and asks for inline bytes: FetchFallbackEvent. */
  fallback: 'walproxy:fetch:fallback',
} as const;

/**
 * Why a partition's records end early: the store failed or returned too few bytes, or this
 * sidecar may not read it (getFailed), had not answered by the fill deadline (deadline), was not
 * asked because its reads back off and the bytes were not cached (backoff), a rebuilt batch's
 * CRC-32C is wrong (crcMismatch), its records are not the ones the leader stored — their SHA-256
 * is not the reference's digest, though the CRC may hold (digestMismatch) —, its Length field
 * disagrees with the reference (lengthMismatch), or the segment list does not describe valid
 * batches in order — undecodable tag, inline bytes past the records or left over, magic ≠ 2,
 * leader epoch −1, offsets going back, a reference without the digest this side asked for
 * (malformed).
 */
export type FetchFallbackReason =
  | 'getFailed'
  | 'deadline'
  | 'backoff'
  | 'crcMismatch'
  | 'digestMismatch'
  | 'lengthMismatch'
  | 'malformed';

/**
 * Why record bytes reached the follower inline (across the link) rather than from the store:
 * - unreferenced: a partition of a marked request's answer without a segment list (a topic not
 *   in the WAL, or batches the leader side could not reference; its own counters say which);
 * - inlineSegments: inline segments between references (the leader side's choice per batch);
 * - requestedInline: a partition the request asked inline for (a pending fallback);
 * - backoff: answers to requests left unmarked while the leader's store reads back off;
 * - unmarkedByName: answers to v12 requests left unmarked for a fallback named by topic name;
 * - otherVersion: Fetch versions below v12, which are never marked.
 */
export type FillInlineReason =
  | 'unreferenced'
  | 'inlineSegments'
  | 'requestedInline'
  | 'backoff'
  | 'unmarkedByName'
  | 'otherVersion';

export interface FetchFillEvent {
  /** Reference batches rebuilt and delivered. */
  references: number;
  /** The objects the response's references named, each once, in the order of their first reference. */
  objectKeys: string[];
  /**
   * The upload spans of those objects the leader side carried (WAL_TRACE_TAG; empty when its
   * tracing is off or did not sample them): the fill joins their trace.
   */
  uploads: WalTraceContext[];
  /** Bytes of those batches, headers included. */
  bytes: number;
  durationMs: number;
  /** Partitions of the response that ended early. */
  fallbacks: number;
}

export interface FetchFallbackEvent {
  /** v13+ responses name topics by id, v12 by name. */
  topicId: string | undefined;
  topic: string | undefined;
  partition: number;
  /** Where the inline request asks the leader side to send inline from. */
  fromOffset: bigint;
  reason: FetchFallbackReason;
  detail: string;
}

export interface FetchFillStats {
  /** Requests forwarded with the capability tag. */
  requestsMarked: number;
  /**
   * Fillable requests forwarded without the tag because a pending fallback names its topic only
   * by name (Fetch v12): the inline request cannot name it, so every partition comes back inline.
   */
  requestsUnmarked: number;
  /** Responses that carried at least one segment list. */
  responsesFilled: number;
  /** Reference batches rebuilt and delivered. */
  referencesFilled: number;
  /** Bytes of those batches (from the object store, not the cross-zone link). */
  bytesFilled: number;
  /** Record bytes of every Fetch answer through the egress that came inline (across the link). */
  inlineBytes: number;
  /** inlineBytes by why they came inline. */
  inline: Record<FillInlineReason, number>;
  /** Partitions ended early, by reason. */
  fallbacks: Record<FetchFallbackReason, number>;
  /** Partitions asking the leader side for inline bytes now. */
  pendingInline: number;
  /** Pending fallbacks dropped after FETCH_FILL_PENDING_TTL_MS without an answer that settled them. */
  pendingExpired: number;
  /** Time from a response's arrival to its rebuilt frame, over responsesFilled. */
  fillLatencyMs: { sum: number; count: number; max: number };
  /** Responses released at the fill deadline with reads still unanswered. */
  deadlineMisses: number;
  /** Fillable requests forwarded unmarked (so answered inline) while their leader's store backs off. */
  requestsDuringBackoff: number;
  /** Objects the leader sides hinted (prefetch-hints.ts), and of them the ones read ahead into the cache. */
  prefetchHints: number;
  prefetchesStarted: number;
  /** Times reads of a store failed or missed the deadline and its leaders went inline for a while. */
  backoffs: number;
  /**
   * Answers the codec cannot read (the leader side passes the broker's bytes on unmarked when its
   * codec cannot read them): passed on as they came, for the follower's broker to judge.
   */
  responsesNotDecoded: number;
  /** Requests the codec cannot read: forwarded unmarked, as the follower's broker sent them. */
  requestsNotDecoded: number;
}

export function newFetchFillStats(): FetchFillStats {
  return {
    requestsMarked: 0,
    requestsUnmarked: 0,
    responsesFilled: 0,
    referencesFilled: 0,
    bytesFilled: 0,
    inlineBytes: 0,
    inline: {
      unreferenced: 0,
      inlineSegments: 0,
      requestedInline: 0,
      backoff: 0,
      unmarkedByName: 0,
      otherVersion: 0,
    },
    fallbacks: {
      getFailed: 0,
      deadline: 0,
      backoff: 0,
      crcMismatch: 0,
      digestMismatch: 0,
      lengthMismatch: 0,
      malformed: 0,
    },
    pendingInline: 0,
    pendingExpired: 0,
    fillLatencyMs: { sum: 0, count: 0, max: 0 },
    deadlineMisses: 0,
    requestsDuringBackoff: 0,
    prefetchHints: 0,
    prefetchesStarted: 0,
    backoffs: 0,
    responsesNotDecoded: 0,
    requestsNotDecoded: 0,
  };
}
