// The stateless rules of the producer's zone side of zone-local produce (zone-produce.ts): which
// bytes may go by reference, what a client-sent reference becomes, and what a leader's refusal of
// a referenced partition means.
import { ErrorCode, isProduceReference, type ProducePartitionData, recordBatchAt } from '@walproxy/shared';

/**
 * The magic byte a client-sent reference is turned into before it leaves for a leader's zone
 * ingress: still not a Kafka magic (the broker refuses the partition exactly as it would have),
 * but no leader side ever fills it. Only this sidecar writes references.
 */
const NEUTRALIZED_MAGIC = 0x58;
const MAGIC_OFFSET = 16;

/**
 * The frame, with the magic of any client-sent reference changed so that no leader fills it, and
 * how many were changed.
 */
export function neutralizeReferences(
  frame: Buffer,
  partitions: ProducePartitionData[],
): { frame: Buffer; neutralized: number } {
  let out = frame;
  let neutralized = 0;
  for (const partition of partitions) {
    if (!isProduceReference(partition.records)) continue;
    if (out === frame) out = Buffer.from(frame);
    out[partition.records.byteOffset - frame.byteOffset + MAGIC_OFFSET] = NEUTRALIZED_MAGIC;
    neutralized++;
  }
  return { frame: out, neutralized };
}

export const AUTHORIZATION_ERRORS: ReadonlySet<number> = new Set([
  ErrorCode.TOPIC_AUTHORIZATION_FAILED,
  ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
  ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
]);

/**
 * Whether the broker's refusal of a referenced partition may be of a reference nobody filled:
 * - `unfilled`: certainly (from v8 the magic check, ProduceRequest.validateRecords, says "magic"
 *   in its message; a filled batch is magic 2), so every producer of that leader would meet it;
 * - `maybe`: before v8 INVALID_RECORD / CORRUPT_MESSAGE carry no message, and the producer's own
 *   batch may be what the broker refused;
 * - undefined: the batch's own refusal, answered as stock (the leader side is known to fill).
 */
export function referenceRefusal(
  version: number,
  errorCode: number,
  message: string | null | undefined,
  leaderSideFills: boolean,
): 'unfilled' | 'maybe' | undefined {
  if (errorCode !== ErrorCode.INVALID_RECORD && errorCode !== ErrorCode.CORRUPT_MESSAGE) return undefined;
  if (leaderSideFills) return undefined;
  if (version >= 8 && message != null) return /magic/i.test(message) ? 'unfilled' : undefined;
  return 'maybe';
}

/**
 * The partition's only batch, when its Records field is exactly one complete, CRC-valid magic v2
 * batch. A batch with a wrong CRC goes as bytes, for the broker to refuse as stock does: by
 * reference the leader side's check would refuse it as a store fault, and every producer of that
 * leader would go to bytes for fallbackMs.
 */
export function oneBatch(records: Buffer | null): Buffer | undefined {
  if (records === null) return undefined;
  try {
    const batch = recordBatchAt(records, 0);
    return !batch.partial && batch.size === records.length && batch.isCrcValid() ? records : undefined;
  } catch {
    return undefined;
  }
}
