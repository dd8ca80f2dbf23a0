// What the leader side's Produce filter counts (produce-wal.ts): exported as the sidecar's
// produce.* counters (admin /counters, telemetry).

export interface ProduceWalStats {
  requestsCopied: number;
  batchesCopied: number;
  bytesCopied: number;
  /** Durable-ack partitions whose batch could not be stored (whatever the broker answered). */
  durableAckFailures: number;
  /**
   * Of those, partitions the broker had answered success (it appended the batch, and followers
   * replicated it) and walproxy turned into REQUEST_TIMED_OUT: a non-idempotent producer's retry
   * appends them again. The price of durable ack in an outage (docs/configuration.md).
   */
  durableAckFailuresAfterAppend: number;
  /** Batches of topics without durable ack not copied because the store was degraded: they replicate inline. */
  batchesNotCopiedStoreDegraded: number;
  bytesNotCopiedStoreDegraded: number;
  /**
   * Batches of `mode=auto` topics not copied because their budget group replicates inline: its
   * objects would not pay for themselves (the sealing policy, docs/cost.md).
   */
  batchesNotCopiedInlineMode: number;
  bytesNotCopiedInlineMode: number;
  /** Topics sent by id that the local broker's metadata did not know even after a refresh (not copied). */
  unknownTopicIds: number;
  /** Produce versions outside 3–13, forwarded without copying. */
  unsupportedVersions: number;
  /** Requests the codec could not read (the broker may: it is more lenient), forwarded without copying. */
  requestsNotDecoded: number;
  /** Batches the WAL writer refused to take (not a magic v2 batch). */
  batchesNotCopied: number;
  /** Partitions of WAL topics not copied because a batch of theirs could not be read as magic v2. */
  partitionsNotCopied: number;
  /** Batches indexed where they were stored already (zone-local produce), not uploaded again. */
  batchesStoredElsewhere: number;
  /**
   * Batches placed in the open object when their request arrived, before the broker appended
   * them: their connection's earlier Produce to the topic was appended (stored ahead).
   */
  batchesStoredAhead: number;
  /** Of those, batches the broker then refused: stored, never referenced nor indexed in the metadata topic. */
  batchesStoredAheadRefused: number;
  bytesStoredAheadRefused: number;
  /**
   * Partitions of WAL topics not copied because the request names them more than once: the
   * broker appends at most one of the copies and answers the partition once, so no answer says
   * which of them is in its log.
   */
  partitionsNamedTwice: number;
}

/** Every counter at zero. */
export function newProduceWalStats(): ProduceWalStats {
  return {
    requestsCopied: 0,
    batchesCopied: 0,
    bytesCopied: 0,
    durableAckFailures: 0,
    durableAckFailuresAfterAppend: 0,
    batchesNotCopiedStoreDegraded: 0,
    bytesNotCopiedStoreDegraded: 0,
    batchesNotCopiedInlineMode: 0,
    bytesNotCopiedInlineMode: 0,
    unknownTopicIds: 0,
    unsupportedVersions: 0,
    requestsNotDecoded: 0,
    batchesNotCopied: 0,
    partitionsNotCopied: 0,
    batchesStoredElsewhere: 0,
    batchesStoredAhead: 0,
    batchesStoredAheadRefused: 0,
    bytesStoredAheadRefused: 0,
    partitionsNamedTwice: 0,
  };
}
