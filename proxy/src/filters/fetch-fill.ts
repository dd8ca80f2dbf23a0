// Follower side of replication through the object store (ARCHITECTURE.md, Replication 3), on the
// egress listener: the follower broker's replica fetcher → this sidecar → the leader's sidecar.
// Requests are marked with the capability tag, so the leader side may answer with references;
// references in the answer are filled back into record batches from the WAL objects, so the stock
// follower appends exactly the bytes the leader stored. The wire contract is
// shared/src/replication/wal-references.ts.
//
// Degrade to inline, never stall (issue #12): one Fetch response carries every partition the
// follower fetches from that leader, WAL or not, so no store read may hold it for long. A response
// is released at the latest FETCH_FILL_DEADLINE_MS after it arrived; what the store has not
// answered by then ends its partition early and comes inline next time, and the leaders whose
// references name that store are fetched unmarked (stock, all inline) for a while.
import { hash } from 'node:crypto';
import { channel } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  ApiKey,
  apiKeyInfo,
  CRC_START,
  crc32c,
  decodeFetchRequest,
  decodeFetchResponse,
  decodePartitionSegments,
  decodeRequestHeader,
  decodeResponseHeader,
  decodeWalTrace,
  encodeFetchCapability,
  encodeFetchRequest,
  encodeFetchResponse,
  FETCH_CAPABILITY_TAG,
  type FetchRequestTopic,
  type FetchResponse,
  type FetchResponsePartition,
  type FetchResponseTopic,
  type InlineRequest,
  LOG_OVERHEAD,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
  type RawTaggedField,
  RECORD_BATCH_HEADER_SIZE,
  Reader,
  recordBatches,
  responseHeaderVersion,
  WAL_TRACE_TAG,
  type WalTraceContext,
  Writer,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { ByteRange } from '../store/object-store.js';
import type { WalRangeReader } from '../wal/range-reader.js';

/**
 * Fetch versions this filter marks and fills: the flexible ones (v12+, which have tag buffers)
 * up to the newest walproxy decodes. A KRaft follower always fetches with one of them
 * (kafka-protocol.md §3); any other version passes untouched, unknown future ones included.
 */
export const FETCH_FILL_VERSIONS = { min: 12, max: 18 } as const;

/** How long a partition keeps asking for inline bytes when nothing tells us it got them. */
export const FETCH_FILL_PENDING_TTL_MS = 30_000;

/**
 * The latest a response to a marked request leaves, counted from its arrival, whatever the store
 * does. Half of replica.fetch.wait.max.ms (500 ms, what a leader itself may hold a follower's
 * fetch), 1/120 of replica.lag.time.max.ms (30 s): a healthy store answers well within it (S3
 * Express first bytes in single-digit ms, S3 Standard's p99 around 100-200 ms), and a store that
 * does not costs one response 250 ms before its leaders go inline (docs/replication-follower.md).
 */
export const FETCH_FILL_DEADLINE_MS = 250;

/**
 * After reads of a store fail or miss the deadline, the follower side stops marking the Fetch
 * requests of the leaders whose references name that store, so those leader sides answer stock
 * (inline) for a while: 1 s, doubling per failure to 10 s, back to 0 after a fill from it succeeds.
 */
export const FETCH_FILL_BACKOFF_MIN_MS = 1_000;
export const FETCH_FILL_BACKOFF_MAX_MS = 10_000;

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

/** At most one digest-mismatch warning a minute: whoever overwrites objects must not flood the log. */
const DIGEST_WARNING_INTERVAL_MS = 60_000;

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

/** The part of WalRangeReader the filter uses. */
export type FillReader = Pick<WalRangeReader, 'read' | 'peek'>;

export interface FetchFillOptions {
  /**
   * The reader for a store that references name (the leader's --wal-store-url), or undefined
   * when this sidecar may not read it: S3 Express One Zone buckets are zonal, so a leader in
   * another zone writes to another bucket.
   */
  readerFor: (store: string) => FillReader | undefined;
  log: Logger;
  /** Monotonic milliseconds, for backoff windows and pending fallbacks; injectable for tests. */
  now?: () => number;
  pendingTtlMs?: number;
  /** Default FETCH_FILL_DEADLINE_MS. */
  fillDeadlineMs?: number;
}

interface PendingFallback {
  readonly topicId: string | undefined;
  readonly topic: string | undefined;
  readonly partition: number;
  readonly fromOffset: bigint;
  readonly registeredAt: number;
}

/** What a request leaves for its response. */
type SentRequest =
  | {
      readonly marked: true;
      /** The pending fallbacks whose inline requests it carried, by pendingKey. */
      readonly carried: ReadonlyMap<string, PendingFallback>;
      /** Its partitions' fetch offsets, for a fallback whose first missing batch is unreadable. */
      readonly topics: readonly FetchRequestTopic[];
      /** The connection it went out on: one leader (an egress listener dials one peer). */
      readonly leader: object;
    }
  | { readonly marked: false; readonly inline: FillInlineReason };

/** What the filter knows of a leader, from its previous answers on one connection. */
interface Leader {
  /** The stores its last references named. */
  readonly stores: ReadonlySet<string>;
}

interface StoreBackoff {
  /** The last window's length: the next one doubles it. */
  ms: number;
  until: number;
}

interface Failure {
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
interface Piece {
  readonly bytes: Buffer;
  readonly baseOffset?: bigint;
  readonly partitionLeaderEpoch?: number;
}

interface Rebuilt {
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

/** What a read of one object gave: one buffer per range, or why not. */
type Read = Buffer[] | { readonly reason: 'getFailed' | 'deadline' | 'backoff'; readonly detail: string };

type Body = Buffer | { readonly reason: FetchFallbackReason; readonly detail: string };

interface Tagged {
  readonly topic: FetchResponseTopic;
  readonly partition: FetchResponsePartition;
  readonly tag: RawTaggedField;
}

interface ObjectReads {
  readonly store: string;
  readonly objectKey: string;
  readonly ranges: ByteRange[];
}

interface Plan extends Tagged {
  readonly segments: PartitionSegment[] | { readonly error: unknown };
  /** Per segment: its object (storeAndKey) and the index of its body among the object's ranges. */
  readonly slots: readonly { readonly where: string; readonly index: number }[];
}

const EMPTY = Buffer.alloc(0);
const MAGIC_OFFSET = 16;
const CRC_OFFSET = 17;
const PLE_OFFSET = 12;
const LAST_OFFSET_DELTA_OFFSET = 23;
/** Requests that reach onRequest without a connection (direct callers) share one leader. */
const NO_CONNECTION = {};
const FETCH_DECODES = apiKeyInfo(ApiKey.Fetch)!.decodes!;

const channels = {
  fill: channel(FETCH_FILL_CHANNELS.fill),
  fallback: channel(FETCH_FILL_CHANNELS.fallback),
};

function fillable(version: number): boolean {
  return version >= FETCH_FILL_VERSIONS.min && version <= FETCH_FILL_VERSIONS.max;
}

function pendingKey(topic: { topicId?: string | undefined; topic?: string | undefined }, partition: number) {
  return `${topic.topicId ?? `name:${topic.topic}`}\u0000${partition}`;
}

function frameOf(header: Buffer, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(FRAME_SIZE_PREFIX_BYTES + header.length + body.length);
  out.writeInt32BE(header.length + body.length, 0);
  header.copy(out, FRAME_SIZE_PREFIX_BYTES);
  body.copy(out, FRAME_SIZE_PREFIX_BYTES + header.length);
  return out;
}

function baseOffsetAt(bytes: Buffer, at: number): bigint | undefined {
  return at + 8 <= bytes.length ? bytes.readBigInt64BE(at) : undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function uvarintBytes(value: number): Buffer {
  const w = new Writer(undefined, 5);
  w.uvarint(value, 'uvarint');
  return w.finish();
}

/** Copies the pieces into `out` from `at`, with each reference batch's assigned fields; returns the end. */
function writePieces(out: Buffer, at: number, pieces: readonly Piece[]): number {
  for (const piece of pieces) {
    piece.bytes.copy(out, at);
    if (piece.baseOffset !== undefined) {
      out.writeBigInt64BE(piece.baseOffset, at);
      out.writeInt32BE(piece.partitionLeaderEpoch!, at + PLE_OFFSET);
    }
    at += piece.bytes.length;
  }
  return at;
}

/**
 * Splices a partition's records back together in segment order, checking every batch as the
 * follower would before appending it (kafka-protocol.md §4), and stops at the first one that
 * cannot be delivered whole: what comes back is always a contiguous prefix of the leader's log.
 */
function rebuild(
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
            // ignores it (§4) — but only at the very end: followed by more bytes it would
            // swallow them into one corrupt batch.
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
    const lengthField = produced.readInt32BE(8);
    if (lengthField !== size - LOG_OVERHEAD) {
      return fail(
        'lengthMismatch',
        `batch at offset ${base} declares Length ${lengthField}, its reference ${size} bytes`,
        base,
      );
    }
    if (produced[MAGIC_OFFSET] !== 2) {
      return fail('malformed', `batch at offset ${base} has magic ${produced[MAGIC_OFFSET]}`, base);
    }
    // The follower's leader-epoch cache throws on −1 and the partition is marked failed (§4).
    if (segment.partitionLeaderEpoch === -1) {
      return fail('malformed', `batch at offset ${base} has partition leader epoch -1`, base);
    }
    if (goesBack(base)) return fail('malformed', `batch at offset ${base} goes back`, undefined);
    // The object must hold the very batch the leader stored (its CRC field), and that batch must
    // be whole (DefaultRecordBatch.isValid: CRC-32C over bytes 21..end, after both assigned fields).
    const stored = produced.readUInt32BE(CRC_OFFSET);
    if (stored !== segment.crc) {
      return fail(
        'crcMismatch',
        `batch at offset ${base}: ${objectKey} holds CRC ${stored}, the leader stored CRC ${segment.crc}`,
        base,
      );
    }
    const crc = crc32c(produced.subarray(CRC_START));
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
    if (!hash('sha256', produced.subarray(RECORD_BATCH_HEADER_SIZE), 'buffer').equals(segment.digest)) {
      return fail(
        'digestMismatch',
        `batch at offset ${base}: the records ${objectKey} holds at ${position} are not the ones the leader stored`,
        base,
      );
    }
    keep({ bytes: produced, baseOffset: base, partitionLeaderEpoch: segment.partitionLeaderEpoch });
    references++;
    referenceBytes += size;
    nextOffset = base + BigInt(produced.readInt32BE(LAST_OFFSET_DELTA_OFFSET)) + 1n;
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

/** One rebuilt partition, for the output. */
interface Edit {
  readonly partition: FetchResponsePartition;
  readonly tag: RawTaggedField;
  readonly rebuilt: Rebuilt;
}

/** Where the response's top-level WAL_TRACE_TAG lies in the frame, to be cut out. */
interface TopCut {
  /** The top-level tag count, the first tag after it. */
  readonly countAt: number;
  readonly firstTagAt: number;
  /** The trace tag's bytes, header included. */
  readonly tagAt: number;
  readonly tagEnd: number;
  readonly newCount: Buffer;
}

function tagHeaderOf(field: RawTaggedField): Buffer {
  return Buffer.concat([uvarintBytes(field.tag), uvarintBytes(field.data.length)]);
}

/**
 * The trace tag's place in the response's top-level tag section, the frame's last bytes; undefined
 * when the decoded views do not say it (a NodeEndpoints tag, decoded rather than kept raw, hides
 * where the section starts): the caller then re-encodes.
 */
function topCutOf(frame: Buffer, response: FetchResponse, trace: RawTaggedField): TopCut | undefined {
  const raw = response.taggedFields ?? [];
  if (response.nodeEndpoints !== undefined || raw.some((t) => t.data.buffer !== frame.buffer))
    return undefined;
  const at = (t: RawTaggedField) => t.data.byteOffset - frame.byteOffset;
  const first = raw[0]!;
  const last = raw.at(-1)!;
  const firstTagAt = at(first) - tagHeaderOf(first).length;
  const count = uvarintBytes(raw.length);
  const countAt = firstTagAt - count.length;
  const traceHeader = tagHeaderOf(trace);
  const tagAt = at(trace) - traceHeader.length;
  if (
    countAt < 0 ||
    at(last) + last.data.length !== frame.length ||
    !frame.subarray(countAt, firstTagAt).equals(count) ||
    !frame.subarray(tagAt, at(trace)).equals(traceHeader)
  )
    return undefined;
  return {
    countAt,
    firstTagAt,
    tagAt,
    tagEnd: at(trace) + trace.data.length,
    newCount: uvarintBytes(raw.length - 1),
  };
}

/**
 * The response frame with each edited partition's records replaced by its pieces and its segment
 * list dropped (and the trace tag, `top`), written into one buffer: every other byte is copied
 * from the broker's frame as it is, and each filled byte is copied once, from the object cache to
 * the output. Undefined when a partition's fields are not where the decoded views say (null
 * records, say): the caller then re-encodes.
 */
function splice(frame: Buffer, edits: readonly Edit[], top?: TopCut): Buffer | undefined {
  const cuts: {
    edit: Edit;
    /** Where the records' length varint starts, and the first tag after the tag count. */
    lengthAt: number;
    firstTagAt: number;
    /** Our tag's bytes, header included. */
    tagAt: number;
    tagEnd: number;
    newLength: Buffer;
    newCount: Buffer;
  }[] = [];
  for (const edit of edits) {
    const { records } = edit.partition;
    const data = edit.tag.data;
    if (records === null || records.buffer !== frame.buffer || data.buffer !== frame.buffer) return undefined;
    const recordsAt = records.byteOffset - frame.byteOffset;
    const oldLength = uvarintBytes(records.length + 1);
    const lengthAt = recordsAt - oldLength.length;
    if (lengthAt < 0 || !frame.subarray(lengthAt, recordsAt).equals(oldLength)) return undefined;
    const tags = new Reader(frame, undefined, recordsAt + records.length);
    let count: number;
    try {
      count = tags.uvarint('TaggedFields');
    } catch {
      return undefined;
    }
    const dataAt = data.byteOffset - frame.byteOffset;
    const tagHeader = Buffer.concat([uvarintBytes(PARTITION_SEGMENTS_TAG), uvarintBytes(data.length)]);
    const tagAt = dataAt - tagHeader.length;
    if (count < 1 || tagAt < tags.offset || !frame.subarray(tagAt, dataAt).equals(tagHeader))
      return undefined;
    cuts.push({
      edit,
      lengthAt,
      firstTagAt: tags.offset,
      tagAt,
      tagEnd: dataAt + data.length,
      newLength: uvarintBytes(edit.rebuilt.length + 1),
      newCount: uvarintBytes(count - 1),
    });
  }
  cuts.sort((a, b) => a.lengthAt - b.lengthAt);
  let size = frame.length;
  let cursor = 0;
  for (const c of cuts) {
    if (c.lengthAt < cursor) return undefined;
    size += c.newLength.length + c.edit.rebuilt.length + c.newCount.length;
    size -= c.firstTagAt - c.lengthAt + (c.tagEnd - c.tagAt);
    cursor = c.tagEnd;
  }
  if (top !== undefined) {
    if (top.countAt < cursor) return undefined;
    size += top.newCount.length - (top.firstTagAt - top.countAt) - (top.tagEnd - top.tagAt);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  cursor = 0;
  for (const c of cuts) {
    at += frame.copy(out, at, cursor, c.lengthAt);
    at += c.newLength.copy(out, at);
    at = writePieces(out, at, c.edit.rebuilt.pieces);
    at += c.newCount.copy(out, at);
    at += frame.copy(out, at, c.firstTagAt, c.tagAt);
    cursor = c.tagEnd;
  }
  if (top !== undefined) {
    at += frame.copy(out, at, cursor, top.countAt);
    at += top.newCount.copy(out, at);
    at += frame.copy(out, at, top.firstTagAt, top.tagAt);
    cursor = top.tagEnd;
  }
  frame.copy(out, at, cursor);
  out.writeInt32BE(size - FRAME_SIZE_PREFIX_BYTES, 0);
  return out;
}

/**
 * The output frame: spliced where the views allow it, re-encoded otherwise, without any walproxy
 * tag (segment lists, the trace context) — the follower's broker gets a stock response.
 */
function rebuildFrame(
  frame: Buffer,
  headerLength: number,
  response: FetchResponse,
  edits: readonly Edit[],
  version: number,
  trace: RawTaggedField | undefined,
): Buffer {
  const top = trace === undefined ? undefined : topCutOf(frame, response, trace);
  const spliced = trace === undefined || top !== undefined ? splice(frame, edits, top) : undefined;
  return spliced ?? reencode(frame, headerLength, response, edits, version);
}

/** The same response through the codec: for frames splice cannot edit in place. */
function reencode(
  frame: Buffer,
  headerLength: number,
  response: FetchResponse,
  edits: readonly Edit[],
  version: number,
): Buffer {
  for (const { partition, rebuilt } of edits) {
    const records = Buffer.allocUnsafe(rebuilt.length);
    writePieces(records, 0, rebuilt.pieces);
    // Since 4.0 brokers write empty records, never null, for librdkafka's sake (kafka-protocol.md §1).
    partition.records = records;
    const rest = partition.taggedFields?.filter((f) => f.tag !== PARTITION_SEGMENTS_TAG) ?? [];
    partition.taggedFields = rest.length === 0 ? undefined : rest;
  }
  const rest = response.taggedFields?.filter((f) => f.tag !== WAL_TRACE_TAG) ?? [];
  response.taggedFields = rest.length === 0 ? undefined : rest;
  const header = frame.subarray(FRAME_SIZE_PREFIX_BYTES, FRAME_SIZE_PREFIX_BYTES + headerLength);
  return frameOf(header, encodeFetchResponse(response, version));
}

/**
 * Egress filter for follower Fetch (API key 1), v12–v18. Every request goes out marked with
 * FETCH_CAPABILITY_TAG (carrying the partitions that need inline bytes) unless its leader's store
 * backs off; every partition of the answer that holds a segment list gets its records rebuilt,
 * and loses the tag.
 *
 * Never a gap, never a changed byte (ARCHITECTURE.md Replication 3.2): a stock follower accepts a
 * gap, so a batch that cannot be rebuilt — or whose object has not come by the fill deadline —
 * ends its partition's records at the last good batch, and the following requests ask the leader
 * side to send that partition inline from the first missing batch — until an answer delivers the
 * partition, or FETCH_FILL_PENDING_TTL_MS passes, so no follower re-fetches one offset forever.
 * Partitions, errors, offsets, session and topic ids are left exactly as the broker wrote them.
 */
export class FetchFillFilter implements FrameFilter {
  readonly apiKeys: ReadonlySet<number> = new Set<number>([ApiKey.Fetch]);
  readonly stats: FetchFillStats = {
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
    backoffs: 0,
    responsesNotDecoded: 0,
    requestsNotDecoded: 0,
  };
  readonly #readerFor: (store: string) => FillReader | undefined;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #pendingTtlMs: number;
  readonly #fillDeadlineMs: number;
  readonly #pending = new Map<string, PendingFallback>();
  readonly #sent = new WeakMap<RequestInfo, SentRequest>();
  /** Per connection (so per leader): the stores its references name. */
  readonly #leaders = new WeakMap<object, Leader>();
  /** Per store URL: the backoff window its reads earned. */
  readonly #backoff = new Map<string, StoreBackoff>();
  #lastDigestWarningMs = Number.NEGATIVE_INFINITY;

  constructor(options: FetchFillOptions) {
    this.#readerFor = options.readerFor;
    this.#log = options.log;
    this.#now = options.now ?? (() => performance.now());
    this.#pendingTtlMs = options.pendingTtlMs ?? FETCH_FILL_PENDING_TTL_MS;
    const deadline = options.fillDeadlineMs ?? FETCH_FILL_DEADLINE_MS;
    if (!Number.isSafeInteger(deadline) || deadline < 0) {
      throw new RangeError(`fillDeadlineMs must be a non-negative integer, got ${deadline}`);
    }
    this.#fillDeadlineMs = deadline;
  }

  onRequest(info: RequestInfo, frame: Buffer, connection?: FilterConnection): RequestDecision {
    // Fetch always has a response (only Produce acks=0 does not).
    const untouched: RequestDecision = { action: 'forward', frame, expectResponse: true };
    const unmarked = (inline: FillInlineReason) => {
      this.#sent.set(info, { marked: false, inline });
      return untouched;
    };
    if (!fillable(info.apiVersion)) {
      // Older versions are counted when their answers can be read; newer ones pass unread.
      const readable = info.apiVersion >= FETCH_DECODES.min && info.apiVersion <= FETCH_DECODES.max;
      return readable ? unmarked('otherVersion') : untouched;
    }
    const leader = connection ?? NO_CONNECTION;
    const stores = this.#leaders.get(leader)?.stores;
    if (stores !== undefined && [...stores].some((s) => this.#backingOff(s))) {
      this.stats.requestsDuringBackoff++;
      return unmarked('backoff');
    }
    this.#expirePending();
    const inlineRequests: InlineRequest[] = [];
    for (const pending of this.#pending.values()) {
      if (pending.topicId === undefined) {
        this.stats.requestsUnmarked++;
        return unmarked('unmarkedByName');
      }
      inlineRequests.push({
        topicId: pending.topicId,
        partition: pending.partition,
        fromOffset: pending.fromOffset,
      });
    }
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    let header: ReturnType<typeof decodeRequestHeader>;
    let request: ReturnType<typeof decodeFetchRequest>;
    try {
      header = decodeRequestHeader(payload);
      request = decodeFetchRequest(payload.subarray(header.headerLength), info.apiVersion);
    } catch (error) {
      // Kafka reads more than this codec does (any bytes are a string to it): the leader's broker
      // judges the request as sent, and its answer, unmarked, is stock.
      this.stats.requestsNotDecoded++;
      this.#log.debug({ error: messageOf(error) }, 'fetch request not decoded; forwarded unmarked');
      return untouched;
    }
    // KIP-482: tags ascending, each at most once; a tag left by another walproxy hop is replaced,
    // since this hop is the one that fills the answer.
    request.taggedFields = [
      ...(request.taggedFields ?? []).filter((f) => f.tag !== FETCH_CAPABILITY_TAG),
      { tag: FETCH_CAPABILITY_TAG, data: encodeFetchCapability({ inlineRequests }) },
    ].sort((a, b) => a.tag - b.tag);
    const body = encodeFetchRequest(request, info.apiVersion);
    this.#sent.set(info, {
      marked: true,
      carried: new Map(this.#pending),
      topics: request.topics,
      leader,
    });
    this.stats.requestsMarked++;
    return {
      action: 'forward',
      frame: frameOf(payload.subarray(0, header.headerLength), body),
      expectResponse: true,
    };
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer> {
    const sent = this.#sent.get(info);
    if (sent === undefined) return frame;
    this.#sent.delete(info);
    if (!sent.marked) {
      this.#countUnmarked(info, frame, sent.inline);
      return frame;
    }
    const started = performance.now();
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    let header: ReturnType<typeof decodeResponseHeader>;
    let response: FetchResponse;
    try {
      header = decodeResponseHeader(payload, responseHeaderVersion(ApiKey.Fetch, info.apiVersion)!);
      response = decodeFetchResponse(payload.subarray(header.headerLength), info.apiVersion);
    } catch (error) {
      // A leader side marks only answers its codec read and wrote back (fetch-strip.ts), and
      // passes on unchanged, unmarked, the broker's answers it cannot read: an answer this codec
      // cannot read carries no segment list, so it is the leader broker's own bytes. Closing the
      // connection would bring the same answer back after a reconnect, a loop (issue #24 item 6);
      // the follower's broker gets it as it would without walproxy, and judges it. Bytes that are
      // not Kafka frames at all (a bad size, another correlation id) are the pipe's to close on.
      this.stats.responsesNotDecoded++;
      this.#log.debug({ error: messageOf(error) }, 'fetch response not decoded; passed on as sent');
      return frame;
    }
    const tagged: Tagged[] = [];
    for (const topic of response.responses) {
      for (const partition of topic.partitions) {
        const tag = partition.taggedFields?.find((f) => f.tag === PARTITION_SEGMENTS_TAG);
        if (tag !== undefined) {
          tagged.push({ topic, partition, tag });
          continue;
        }
        const bytes = partition.records?.length ?? 0;
        const asked = sent.carried.has(pendingKey(topic, partition.partitionIndex));
        this.#countInline(asked ? 'requestedInline' : 'unreferenced', bytes);
        this.#settle(sent, topic, partition, bytes > 0);
      }
    }
    const trace = response.taggedFields?.find((f) => f.tag === WAL_TRACE_TAG);
    if (tagged.length === 0) {
      // A trace tag without references (not something a leader side sends): dropped all the same.
      return trace === undefined
        ? frame
        : rebuildFrame(frame, header.headerLength, response, [], info.apiVersion, trace);
    }
    return this.#fill(info, sent, frame, header.headerLength, response, tagged, trace, started);
  }

  async #fill(
    info: RequestInfo,
    sent: Extract<SentRequest, { marked: true }>,
    frame: Buffer,
    headerLength: number,
    response: FetchResponse,
    tagged: readonly Tagged[],
    trace: RawTaggedField | undefined,
    started: number,
  ): Promise<Buffer> {
    // Every body of one object in one read, every object at once.
    const objects = new Map<string, ObjectReads>();
    const plans: Plan[] = tagged.map((t) => {
      let segments: PartitionSegment[];
      try {
        segments = decodePartitionSegments(t.tag.data);
      } catch (error) {
        return { ...t, segments: { error }, slots: [] };
      }
      const slots = segments.map((s) => {
        if (s.kind === 'inline') return { where: '', index: -1 };
        const where = storeAndKey(s.store, s.objectKey);
        let object = objects.get(where);
        if (object === undefined) {
          object = { store: s.store, objectKey: s.objectKey, ranges: [] };
          objects.set(where, object);
        }
        // The whole produced batch: its header supplies every field the broker did not assign.
        return { where, index: object.ranges.push({ offset: s.position, length: s.length }) - 1 };
      });
      return { ...t, segments, slots };
    });
    const stores = new Set([...objects.values()].map((o) => o.store));
    if (stores.size > 0) this.#leaders.set(sent.leader, { stores });

    const { reads, peeked } = await this.#read(objects, started);

    let references = 0;
    let bytes = 0;
    const edits: Edit[] = [];
    const failures: FetchFallbackEvent[] = [];
    for (const plan of plans) {
      const { topic, partition, segments, slots } = plan;
      const rebuilt: Rebuilt = Array.isArray(segments)
        ? rebuild(partition.records ?? EMPTY, segments, (i) => {
            const { where, index } = slots[i]!;
            const read = reads.get(where)!;
            return Array.isArray(read) ? read[index]! : read;
          })
        : {
            pieces: [],
            length: 0,
            references: 0,
            referenceBytes: 0,
            inlineBytes: 0,
            nextOffset: undefined,
            failure: {
              reason: 'malformed',
              detail: `segment list: ${messageOf(segments.error)}`,
              firstMissing: undefined,
            },
          };
      edits.push({ partition, tag: plan.tag, rebuilt });
      references += rebuilt.references;
      bytes += rebuilt.referenceBytes;
      this.#countInline('inlineSegments', rebuilt.inlineBytes);
      if (rebuilt.failure === undefined) {
        this.#settle(sent, topic, partition, rebuilt.length > 0);
      } else {
        failures.push(this.#fallback(sent, topic, partition, rebuilt));
      }
    }
    this.#judgeStores(objects, reads, peeked);

    const out = rebuildFrame(frame, headerLength, response, edits, info.apiVersion, trace);
    const durationMs = performance.now() - started;
    const stats = this.stats;
    stats.responsesFilled++;
    stats.referencesFilled += references;
    stats.bytesFilled += bytes;
    stats.fillLatencyMs.sum += durationMs;
    stats.fillLatencyMs.count++;
    stats.fillLatencyMs.max = Math.max(stats.fillLatencyMs.max, durationMs);
    if (channels.fill.hasSubscribers) {
      channels.fill.publish({
        references,
        objectKeys: [...new Set([...objects.values()].map((o) => o.objectKey))],
        uploads: (trace && decodeWalTrace(trace.data)) ?? [],
        bytes,
        durationMs,
        fallbacks: failures.length,
      } satisfies FetchFillEvent);
    }
    const forged = failures.find((f) => f.reason === 'digestMismatch');
    if (forged !== undefined) this.#warnDigestMismatch(forged);
    if (failures.length > 0) {
      const first = failures[0]!;
      this.#log.warn(
        {
          partitions: failures.length,
          first: { ...first, fromOffset: first.fromOffset.toString() },
        },
        'WAL references could not be filled; those partitions end at their last good batch and ask for inline bytes',
      );
    }
    return out;
  }

  /**
   * Reads every object, each from its store's reader, until all have answered or the fill
   * deadline (from the response's arrival) has passed. A read still running then goes on in the
   * background — its bytes land in the reader's cache for the next fetch — but its answer, good
   * or bad, no longer counts for this response. A store backing off is not asked: only what its
   * reader has cached is used (those objects are `peeked`: they say nothing of the store).
   */
  async #read(
    objects: ReadonlyMap<string, ObjectReads>,
    started: number,
  ): Promise<{ reads: Map<string, Read>; peeked: Set<string> }> {
    const reads = new Map<string, Read>();
    const peeked = new Set<string>();
    let released = false;
    const running: Promise<void>[] = [];
    for (const [where, { store, objectKey, ranges }] of objects) {
      let reader: FillReader | undefined;
      try {
        reader = this.#readerFor(store);
      } catch (error) {
        // A store name the reader factory refuses (malformed URL): not readable, as one not listed.
        reads.set(where, {
          reason: 'getFailed',
          detail: `store ${store} cannot be read: ${messageOf(error)}`,
        });
        continue;
      }
      if (reader === undefined) {
        reads.set(where, {
          reason: 'getFailed',
          detail: `store ${store} is not one this sidecar may read (--wal-read-store-url)`,
        });
        continue;
      }
      const answered = (read: Read) => {
        if (!released) reads.set(where, read);
      };
      const failed = (error: unknown) =>
        answered({ reason: 'getFailed', detail: `GET ${objectKey}: ${messageOf(error)}` });
      if (this.#backingOff(store)) {
        peeked.add(where);
        try {
          answered(
            reader.peek(objectKey, ranges) ?? {
              reason: 'backoff',
              detail: `${objectKey} is not cached and reads of ${store} are backing off`,
            },
          );
        } catch (error) {
          failed(error);
        }
        continue;
      }
      running.push(reader.read(objectKey, ranges).then(answered, failed));
    }
    if (running.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const left = this.#fillDeadlineMs - (performance.now() - started);
      await Promise.race([
        Promise.all(running),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, Math.max(0, left));
        }),
      ]);
      clearTimeout(timer);
    }
    released = true;
    for (const [where, { objectKey }] of objects) {
      if (!reads.has(where)) {
        reads.set(where, {
          reason: 'deadline',
          detail: `GET ${objectKey} had not answered ${this.#fillDeadlineMs} ms after the response arrived`,
        });
      }
    }
    return { reads, peeked };
  }

  /**
   * A store that missed the deadline or failed a read backs off (once per response, however many
   * of its objects did); one whose reads all answered is back to a fresh backoff.
   */
  #judgeStores(
    objects: ReadonlyMap<string, ObjectReads>,
    reads: ReadonlyMap<string, Read>,
    peeked: ReadonlySet<string>,
  ): void {
    // A store's worst answer in this response decides.
    const rank = { answered: 0, getFailed: 1, deadline: 2 } as const;
    const outcome = new Map<string, keyof typeof rank>();
    for (const [where, { store }] of objects) {
      if (peeked.has(where)) continue;
      const read = reads.get(where)!;
      // Only peeked objects answer 'backoff', and they were skipped.
      const now = Array.isArray(read) ? 'answered' : (read.reason as 'getFailed' | 'deadline');
      const before = outcome.get(store);
      if (before === undefined || rank[now] > rank[before]) outcome.set(store, now);
    }
    let missed = false;
    for (const [store, what] of outcome) {
      if (what === 'deadline' || what === 'getFailed') this.#backOff(store, what);
      else if (what === 'answered') this.#backoff.delete(store);
      missed ||= what === 'deadline';
    }
    if (missed) this.stats.deadlineMisses++;
  }

  /** At most one a minute: the fallback itself is counted every time (fallbacks.digestMismatch). */
  #warnDigestMismatch(event: FetchFallbackEvent): void {
    const now = this.#now();
    if (now - this.#lastDigestWarningMs < DIGEST_WARNING_INTERVAL_MS) return;
    this.#lastDigestWarningMs = now;
    this.#log.warn(
      {
        topicId: event.topicId,
        topic: event.topic,
        partition: event.partition,
        fromOffset: event.fromOffset.toString(),
        detail: event.detail,
      },
      'a WAL object holds a batch whose records are not the ones the leader stored (overwritten or forged): refused, the partition goes inline',
    );
  }

  #backingOff(store: string): boolean {
    const backoff = this.#backoff.get(store);
    return backoff !== undefined && this.#now() < backoff.until;
  }

  /** Reads of `store` failed or were too slow: its leaders' requests go unmarked for a growing while. */
  #backOff(store: string, why: 'deadline' | 'getFailed'): void {
    const backoff = this.#backoff.get(store) ?? { ms: 0, until: 0 };
    backoff.ms = Math.min(FETCH_FILL_BACKOFF_MAX_MS, Math.max(FETCH_FILL_BACKOFF_MIN_MS, backoff.ms * 2));
    backoff.until = this.#now() + backoff.ms;
    this.#backoff.set(store, backoff);
    this.stats.backoffs++;
    this.#log.warn(
      { store, inlineForMs: backoff.ms, why },
      why === 'deadline'
        ? 'object store reads missed the fill deadline; fetches from the leaders using this store go inline (stock) for a while'
        : 'object store reads failed; fetches from the leaders using this store go inline (stock) for a while',
    );
  }

  #countInline(reason: FillInlineReason, bytes: number): void {
    this.stats.inlineBytes += bytes;
    this.stats.inline[reason] += bytes;
  }

  /** The record bytes of an answer to an unmarked request: all of them came inline. */
  #countUnmarked(info: RequestInfo, frame: Buffer, reason: FillInlineReason): void {
    let bytes = 0;
    try {
      const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
      const header = decodeResponseHeader(payload, responseHeaderVersion(ApiKey.Fetch, info.apiVersion)!);
      const response = decodeFetchResponse(payload.subarray(header.headerLength), info.apiVersion);
      for (const topic of response.responses) {
        for (const partition of topic.partitions) bytes += partition.records?.length ?? 0;
      }
    } catch {
      // Not ours to judge: the answer goes on as the broker sent it, as without walproxy.
      return;
    }
    this.#countInline(reason, bytes);
  }

  /** Registers (or renews) the partition's inline request, counts it, and says so. */
  #fallback(
    sent: Extract<SentRequest, { marked: true }>,
    topic: FetchResponseTopic,
    partition: FetchResponsePartition,
    rebuilt: Rebuilt,
  ): FetchFallbackEvent {
    const failure = rebuilt.failure!;
    // The first missing batch's base offset, unless it is unreadable or points before what was
    // delivered; then where the follower fetches next (kept prefix, else the request's offset).
    const floor = rebuilt.nextOffset ?? this.#fetchOffset(sent, topic, partition.partitionIndex);
    const candidate = failure.firstMissing;
    const fromOffset =
      candidate !== undefined && (floor === undefined || candidate >= floor) ? candidate : (floor ?? 0n);
    const pending: PendingFallback = {
      topicId: topic.topicId,
      topic: topic.topic,
      partition: partition.partitionIndex,
      fromOffset,
      registeredAt: this.#now(),
    };
    this.#pending.set(pendingKey(topic, partition.partitionIndex), pending);
    this.stats.pendingInline = this.#pending.size;
    this.stats.fallbacks[failure.reason]++;
    const event: FetchFallbackEvent = {
      topicId: topic.topicId,
      topic: topic.topic,
      partition: partition.partitionIndex,
      fromOffset,
      reason: failure.reason,
      detail: failure.detail,
    };
    if (channels.fallback.hasSubscribers) channels.fallback.publish(event);
    return event;
  }

  /**
   * Drops the partition's pending fallback once an answer to a request that carried it delivers
   * the partition whole with bytes in it (the leader side honoured it, or the references filled),
   * or reports an error for it (its leadership or state changed; a new failure registers anew).
   * An empty answer settles nothing: a full response may leave a partition out of its byte budget.
   */
  #settle(
    sent: Extract<SentRequest, { marked: true }>,
    topic: FetchResponseTopic,
    partition: FetchResponsePartition,
    delivered: boolean,
  ): void {
    const key = pendingKey(topic, partition.partitionIndex);
    const pending = this.#pending.get(key);
    if (pending === undefined || sent.carried.get(key) !== pending) return;
    if (!delivered && partition.errorCode === 0) return;
    this.#pending.delete(key);
    this.stats.pendingInline = this.#pending.size;
  }

  #expirePending(): void {
    const now = this.#now();
    for (const [key, pending] of this.#pending) {
      if (now - pending.registeredAt < this.#pendingTtlMs) continue;
      this.#pending.delete(key);
      this.stats.pendingExpired++;
    }
    this.stats.pendingInline = this.#pending.size;
  }

  #fetchOffset(
    sent: Extract<SentRequest, { marked: true }>,
    topic: FetchResponseTopic,
    partition: number,
  ): bigint | undefined {
    const asked = sent.topics.find((t) =>
      topic.topicId !== undefined ? t.topicId === topic.topicId : t.topic === topic.topic,
    );
    return asked?.partitions.find((p) => p.partition === partition)?.fetchOffset;
  }
}

/** One map key for an object of a store (a newline appears in neither a URL nor a WAL key). */
function storeAndKey(store: string, objectKey: string): string {
  return `${store}\n${objectKey}`;
}
