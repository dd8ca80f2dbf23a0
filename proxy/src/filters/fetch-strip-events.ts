// What the leader side's strip (fetch-strip.ts) reports: why batches went inline, its counters,
// and the diagnostics channels it publishes on with their events.
import type { WalTraceContext } from '@walproxy/shared';

/** Why a batch went inline; the keys of FetchStripStats.inline. */
export const FETCH_INLINE_REASONS = [
  'control',
  'rewrittenByBroker',
  'notInWal',
  'topicNotInWal',
  'modeInline',
  'groupInline',
  'digestMismatch',
  'notStoredInTime',
  'requestedInline',
  'unknownTopic',
  'notV2',
  'partialBatch',
  'storeDegraded',
] as const;

export type FetchInlineReason = (typeof FETCH_INLINE_REASONS)[number];

/** Zeroed stats, as a new filter starts with them (telemetry tests build theirs from this too). */
export function newFetchStripStats(): FetchStripStats {
  return {
    responsesRewritten: 0,
    referencesSent: 0,
    bytesReferenced: 0,
    inlineBytes: 0,
    inlineBytesByReason: zeroByReason(),
    inline: zeroByReason(),
    holds: 0,
    holdMsTotal: 0,
    holdMsMax: 0,
    prefetchHintsSent: 0,
    unknownCapabilityVersions: 0,
    responsesNotDecoded: 0,
    requestsNotDecoded: 0,
  };
}

/**
 * A literal, not built from FETCH_INLINE_REASONS: every marked response makes one, and
 * Object.fromEntries over the list was 1 % of an inline replication sidecar's CPU (issue #13's
 * profile). `satisfies` keeps it complete: a reason added to the list and missing here fails tsc.
 */
export function zeroByReason(): Record<FetchInlineReason, number> {
  return {
    control: 0,
    rewrittenByBroker: 0,
    notInWal: 0,
    topicNotInWal: 0,
    modeInline: 0,
    groupInline: 0,
    digestMismatch: 0,
    notStoredInTime: 0,
    requestedInline: 0,
    unknownTopic: 0,
    notV2: 0,
    partialBatch: 0,
    storeDegraded: 0,
  } satisfies Record<FetchInlineReason, number>;
}

export interface FetchStripStats {
  responsesRewritten: number;
  referencesSent: number;
  bytesReferenced: number;
  /** Record bytes of marked responses sent inline, every reason included. */
  inlineBytes: number;
  /** The same bytes by reason. */
  inlineBytesByReason: Record<FetchInlineReason, number>;
  /**
   * Batches sent inline, by why (for unknownTopic, requestedInline and notV2: partitions). A
   * control batch counts as control and nothing else whatever its topic.
   */
  inline: {
    /** Transaction markers: the coordinator writes them, they never pass through Produce. */
    control: number;
    /** Sent by an idempotent producer, but the broker rewrote the bytes (LogAppendTime, recompression). */
    rewrittenByBroker: number;
    /**
     * A WAL topic's batch the index does not hold: the real fallback (produced before this
     * sidecar started or while it was not in the path, refused by the writer, dropped unconfirmed).
     */
    notInWal: number;
    /**
     * A batch of a topic that does not go to the WAL at all (--wal-topic does not match it, or an
     * internal topic such as __consumer_offsets and the WAL metadata topic): stock by design. A
     * partition whose records are not v2 batches counts once.
     */
    topicNotInWal: number;
    /** A batch of a WAL topic set to mode=inline (--topic-config), counted as topicNotInWal is. */
    modeInline: number;
    /**
     * A batch of a mode=auto WAL topic (without durable ack) missing from the index while its
     * latency-budget group replicates inline: the sealing policy did not copy it, its objects
     * would not pay (docs/cost.md). Stock by design, as modeInline.
     */
    groupInline: number;
    /**
     * A produced batch had the same partition, CRC-32C, length and header but other records (a
     * CRC collision): referencing it would give the follower the wrong bytes.
     */
    digestMismatch: number;
    notStoredInTime: number;
    requestedInline: number;
    unknownTopic: number;
    /**
     * Records that are not a run of magic v2 batches (magic 0/1 message sets from segments an
     * upgraded cluster wrote, or bytes the walk cannot read): the partition goes as the broker sent it.
     */
    notV2: number;
    /** The incomplete batch a broker leaves at the end of a response cut by size. */
    partialBatch: number;
    /** Still uploading while the store is degraded: sent at once instead of holding the response. */
    storeDegraded: number;
  };
  holds: number;
  holdMsTotal: number;
  holdMsMax: number;
  /** Objects named to follower sides in prefetch hints (prefetch-hints.ts). */
  prefetchHintsSent: number;
  /**
   * Marked requests from a follower side that reads another reference format, or whose
   * capability tag cannot be read: answered stock.
   */
  unknownCapabilityVersions: number;
  /** Marked responses the codec could not read: passed on as the broker sent them. */
  responsesNotDecoded: number;
  /** Requests the codec could not read (the broker may): forwarded as sent, answered stock. */
  requestsNotDecoded: number;
}

/** What the filter publishes on node:diagnostics_channel; telemetry subscribes and maps them. */
export const FETCH_STRIP_CHANNELS = {
  /** A marked Fetch response carrying records was answered: FetchStripEvent. */
  strip: 'walproxy:fetch:strip',
  /**
   * A response is about to go out with references: FetchTraceContextEvent. A subscriber (tracing)
   * fills in the upload span contexts to carry to the follower side, as undici's
   * `undici:request:create` subscribers add a traceparent header: the filter needs no SDK.
   */
  traceContext: 'walproxy:fetch:trace-context',
} as const;

/** Published synchronously, before the response is encoded; subscribers push to `uploads`. */
export interface FetchTraceContextEvent {
  /** The objects the response references, each once, in the order of their first reference. */
  readonly objectKeys: readonly string[];
  /** The sampled upload spans of those objects: carried in WAL_TRACE_TAG when not empty. */
  readonly uploads: WalTraceContext[];
}

export interface FetchStripEvent {
  references: number;
  /** The objects the references point into, each once, in the order of their first reference. */
  objectKeys: string[];
  /** Bytes of the batches sent as references (not across the link). */
  bytesReferenced: number;
  /** Record bytes sent inline, by why. */
  inlineBytes: Record<FetchInlineReason, number>;
  /** Batches still uploading that the response waited for (0: no hold). */
  heldBatches: number;
  holdMs: number;
  /** From the broker's response to the answer, hold included. */
  durationMs: number;
}
