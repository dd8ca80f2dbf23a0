// The follower side's check of a partition's rebuilt records (fetch-fill.ts): every batch is
// verified as the follower's broker would before appending it, and a stored batch must also be
// the very one the leader stored (its CRC and the SHA-256 of its records). What comes out is
// always a contiguous prefix of the leader's log, as pieces the output frame copies once.
import { hash } from 'node:crypto';
import { LOG_OVERHEAD, type PartitionSegment, RecordBatch, recordBatches } from '@walproxy/shared';
import type { FetchFallbackReason } from './fetch-fill-events.js';

export interface Failure {
  readonly reason: FetchFallbackReason;
  readonly detail: string;
  /** Base offset of the first batch not delivered, when its bytes say it. */
  readonly firstMissing: bigint | undefined;
}

/**
 * A contiguous piece of a rebuilt partition's records, as a view (of the response or of a cached
 * object): the output copies it once. A reference batch gets the two header fields the leader
 * assigned on append written into the output (wal-references.ts explains why nothing else can
 * differ, and both lie outside the CRC).
 */
export interface Piece {
  readonly bytes: Buffer;
  readonly baseOffset?: bigint;
  readonly partitionLeaderEpoch?: number;
}

export interface Rebuilt {
  readonly pieces: readonly Piece[];
  /** Bytes of the pieces. */
  readonly length: number;
  readonly references: number;
  readonly referenceBytes: number;
  readonly inlineBytes: number;
  /** Last offset + 1 of the last batch delivered: where the follower fetches next. */
  readonly nextOffset: bigint | undefined;
  readonly failure: Failure | undefined;
}

export type Body = Buffer | { readonly reason: FetchFallbackReason; readonly detail: string };

function baseOffsetAt(bytes: Buffer, at: number): bigint | undefined {
  return at + 8 <= bytes.length ? bytes.readBigInt64BE(at) : undefined;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Copies the pieces into `out` from `at`, with each reference batch's assigned fields; returns the end. */
export function writePieces(out: Buffer, at: number, pieces: readonly Piece[]): number {
  for (const piece of pieces) {
    piece.bytes.copy(out, at);
    if (piece.baseOffset !== undefined) {
      const batch = new RecordBatch(out, at, piece.bytes.length);
      batch.setBaseOffset(piece.baseOffset);
      batch.setPartitionLeaderEpoch(piece.partitionLeaderEpoch!);
    }
    at += piece.bytes.length;
  }
  return at;
}

/**
 * Splices a partition's records back together in segment order, checking every batch as the
 * follower would before appending it (docs/kafka-protocol.md, "What a follower checks when it
 * appends"), and stops at the first one that cannot be delivered whole: what comes back is always a
 * contiguous prefix of the leader's log.
 */
export function rebuild(
  records: Buffer,
  segments: readonly PartitionSegment[],
  bodyOf: (segmentIndex: number) => Body,
): Rebuilt {
  const pieces: Piece[] = [];
  let length = 0;
  let references = 0;
  let referenceBytes = 0;
  let inlineBytes = 0;
  let nextOffset: bigint | undefined;
  let cursor = 0;
  const keep = (piece: Piece) => {
    pieces.push(piece);
    length += piece.bytes.length;
  };
  const keepInline = (bytes: Buffer) => {
    if (bytes.length === 0) return;
    keep({ bytes });
    inlineBytes += bytes.length;
  };
  const end = (failure?: Failure): Rebuilt => ({
    pieces,
    length,
    references,
    referenceBytes,
    inlineBytes,
    nextOffset,
    failure,
  });
  const fail = (reason: FetchFallbackReason, detail: string, firstMissing: bigint | undefined) =>
    end({ reason, detail, firstMissing });
  // A follower marks the partition failed on offsets that go back (OffsetsOutOfOrderException);
  // offsets may jump forward (compaction leaves gaps).
  const goesBack = (base: bigint) => nextOffset !== undefined && base < nextOffset;

  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment.kind === 'inline') {
      if (cursor + segment.length > records.length) {
        return fail(
          'malformed',
          `inline segment of ${segment.length} bytes at ${cursor} runs past ${records.length} bytes of records`,
          baseOffsetAt(records, cursor),
        );
      }
      const bytes = records.subarray(cursor, cursor + segment.length);
      cursor += segment.length;
      // The batches checked so far go out as one piece of the broker's own bytes.
      let at = 0;
      try {
        for (const batch of recordBatches(bytes)) {
          if (batch.partial) {
            // The broker slices its log by bytes, so the last batch may be cut; the follower
            // ignores it (docs/kafka-protocol.md, "What a follower checks when it appends") — but
            // only at the very end: followed by more bytes it would swallow them into one corrupt
            // batch.
            if (i !== segments.length - 1) {
              keepInline(bytes.subarray(0, at));
              return fail(
                'malformed',
                'a partial batch is followed by more segments',
                baseOffsetAt(bytes, at),
              );
            }
            at = bytes.length;
            break;
          }
          if (goesBack(batch.baseOffset)) {
            keepInline(bytes.subarray(0, at));
            return fail('malformed', `inline batch at offset ${batch.baseOffset} goes back`, undefined);
          }
          nextOffset = batch.lastOffset + 1n;
          at += batch.size;
        }
      } catch (error) {
        keepInline(bytes.subarray(0, at));
        return fail(
          'malformed',
          `inline bytes are not v2 batches: ${messageOf(error)}`,
          baseOffsetAt(bytes, at),
        );
      }
      keepInline(bytes);
      continue;
    }

    const { baseOffset: base, objectKey, position, length: size } = segment;
    const produced = bodyOf(i);
    if (!Buffer.isBuffer(produced)) return fail(produced.reason, produced.detail, base);
    if (produced.length !== size) {
      return fail(
        'getFailed',
        `${objectKey} gave ${produced.length} bytes for the ${size}-byte batch at ${position}`,
        base,
      );
    }
    // The batch as the producer sent it; the leader assigned BaseOffset and PartitionLeaderEpoch.
    const batch = new RecordBatch(produced, 0, size);
    const lengthField = batch.batchLength;
    if (lengthField !== size - LOG_OVERHEAD) {
      return fail(
        'lengthMismatch',
        `batch at offset ${base} declares Length ${lengthField}, its reference ${size} bytes`,
        base,
      );
    }
    if (batch.magic !== 2) {
      return fail('malformed', `batch at offset ${base} has magic ${batch.magic}`, base);
    }
    // The follower's leader-epoch cache throws on −1 and the partition is marked failed
    // (docs/kafka-protocol.md, "What a follower checks when it appends").
    if (segment.partitionLeaderEpoch === -1) {
      return fail('malformed', `batch at offset ${base} has partition leader epoch -1`, base);
    }
    if (goesBack(base)) return fail('malformed', `batch at offset ${base} goes back`, undefined);
    // The object must hold the very batch the leader stored (its CRC field), and that batch must
    // be whole (DefaultRecordBatch.isValid: CRC-32C over bytes 21..end, after both assigned fields).
    const stored = batch.crc;
    if (stored !== segment.crc) {
      return fail(
        'crcMismatch',
        `batch at offset ${base}: ${objectKey} holds CRC ${stored}, the leader stored CRC ${segment.crc}`,
        base,
      );
    }
    const crc = batch.computeCrc();
    if (crc !== stored) {
      return fail('crcMismatch', `batch at offset ${base}: CRC-32C ${crc} ≠ header CRC ${stored}`, base);
    }
    // The CRC proves the batch whole, not that it is the leader's: CRC-32C is linear, so whoever
    // can overwrite the object can forge a same-header batch whose CRC holds (issue #24). The
    // SHA-256 of its records must be the one the leader proved its log batch by. A reference
    // without one (a version-2 list) is asked inline, not filled unverified: this side asks for
    // version 3, a leader side that reads it answers in it, and one that does not answers stock,
    // so a version-2 list here comes from no leader side that follows the format.
    if (segment.digest === undefined) {
      return fail('malformed', `batch at offset ${base}: the reference carries no digest`, base);
    }
    if (!hash('sha256', batch.body(), 'buffer').equals(segment.digest)) {
      return fail(
        'digestMismatch',
        `batch at offset ${base}: the records ${objectKey} holds at ${position} are not the ones the leader stored`,
        base,
      );
    }
    keep({ bytes: produced, baseOffset: base, partitionLeaderEpoch: segment.partitionLeaderEpoch });
    references++;
    referenceBytes += size;
    nextOffset = base + BigInt(batch.lastOffsetDelta) + 1n;
  }
  if (cursor !== records.length) {
    return fail(
      'malformed',
      `records hold ${records.length - cursor} bytes that no segment accounts for`,
      baseOffsetAt(records, cursor),
    );
  }
  return end();
}
