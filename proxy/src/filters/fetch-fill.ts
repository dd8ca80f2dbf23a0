// Follower side of replication through the object store (ARCHITECTURE.md, Replication 3), on the
// egress listener: the follower broker's replica fetcher → this sidecar → the leader's sidecar.
// Requests are marked with the capability tag, so the leader side may answer with references;
// references in the answer are filled back into record batches from the WAL objects, so the stock
// follower appends exactly the bytes the leader stored. The wire contract is
// shared/src/replication/wal-references.ts.
import { channel } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  ApiKey,
  CRC_START,
  crc32c,
  decodeFetchRequest,
  decodeFetchResponse,
  decodePartitionSegments,
  decodeRequestHeader,
  decodeResponseHeader,
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
  RECORD_BATCH_HEADER_SIZE,
  recordBatches,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
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
 * After a fill whose object reads failed, the follower side stops marking its Fetch requests, so
 * the leader side answers stock (inline) for a while, instead of every other fetch waiting on a
 * store that does not answer: 1 s, doubling per failure to 10 s, back to 0 after a fill succeeds.
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
 * Why a partition's records end early: the store failed or returned too few bytes (getFailed),
 * a rebuilt batch's CRC-32C is wrong (crcMismatch), its Length field disagrees with the reference
 * (lengthMismatch), or the segment list does not describe valid batches in order — undecodable
 * tag, inline bytes past the records or left over, magic ≠ 2, leader epoch −1, offsets going
 * back (malformed).
 */
export type FetchFallbackReason = 'getFailed' | 'crcMismatch' | 'lengthMismatch' | 'malformed';

export interface FetchFillEvent {
  /** Reference batches rebuilt and delivered. */
  references: number;
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
  /** Record bytes that arrived inline in responses to marked requests (across the link). */
  inlineBytes: number;
  /** Partitions ended early, by reason. */
  fallbacks: Record<FetchFallbackReason, number>;
  /** Partitions asking the leader side for inline bytes now. */
  pendingInline: number;
  /** Pending fallbacks dropped after FETCH_FILL_PENDING_TTL_MS without an answer that settled them. */
  pendingExpired: number;
  /** Time from a response's arrival to its rebuilt frame, over responsesFilled. */
  fillLatencyMs: { sum: number; count: number; max: number };
  /** Fillable requests forwarded unmarked (so answered inline) while object reads back off. */
  requestsDuringBackoff: number;
  /** Times object reads failed and the follower side went inline for a while. */
  backoffs: number;
}

export interface FetchFillOptions {
  /**
   * The reader for a store that references name (the leader's --wal-store-url), or undefined
   * when this sidecar may not read it: S3 Express One Zone buckets are zonal, so a leader in
   * another zone writes to another bucket.
   */
  readerFor: (store: string) => Pick<WalRangeReader, 'read'> | undefined;
  log: Logger;
  /** Monotonic milliseconds, for the pending fallbacks' lifetime; injectable for tests. */
  now?: () => number;
  pendingTtlMs?: number;
}

interface PendingFallback {
  readonly topicId: string | undefined;
  readonly topic: string | undefined;
  readonly partition: number;
  readonly fromOffset: bigint;
  readonly registeredAt: number;
}

/** What a marked request leaves for its response. */
interface MarkedRequest {
  /** The pending fallbacks whose inline requests it carried. */
  readonly carried: ReadonlySet<PendingFallback>;
  /** Its partitions' fetch offsets, for a fallback whose first missing batch is unreadable. */
  readonly topics: readonly FetchRequestTopic[];
}

interface Failure {
  readonly reason: FetchFallbackReason;
  readonly detail: string;
  /** Base offset of the first batch not delivered, when its bytes say it. */
  readonly firstMissing: bigint | undefined;
}

interface Rebuilt {
  readonly records: Buffer;
  readonly references: number;
  readonly referenceBytes: number;
  readonly inlineBytes: number;
  /** Last offset + 1 of the last batch delivered: where the follower fetches next. */
  readonly nextOffset: bigint | undefined;
  readonly failure: Failure | undefined;
}

type Body = Buffer | { readonly error: unknown };

interface Plan {
  readonly topic: FetchResponseTopic;
  readonly partition: FetchResponsePartition;
  readonly segments: PartitionSegment[] | { readonly error: unknown };
  /** Per segment: the index of its body among its object's ranges, -1 for inline segments. */
  readonly slots: readonly number[];
}

const EMPTY = Buffer.alloc(0);
const MAGIC_OFFSET = 16;
const CRC_OFFSET = 17;
const PLE_OFFSET = 12;
const LAST_OFFSET_DELTA_OFFSET = 23;

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

/**
 * Splices a partition's records back together in segment order, checking every batch as the
 * follower would before appending it (kafka-protocol.md §4), and stops at the first one that
 * cannot be delivered whole: what comes back is always a contiguous prefix of the leader's log.
 */
function rebuild(
  records: Buffer,
  segments: readonly PartitionSegment[],
  bodyOf: (store: string, objectKey: string, segmentIndex: number) => Body,
): Rebuilt {
  const parts: Buffer[] = [];
  let references = 0;
  let referenceBytes = 0;
  let inlineBytes = 0;
  let nextOffset: bigint | undefined;
  let cursor = 0;
  const end = (failure?: Failure): Rebuilt => ({
    records: parts.length === 0 ? EMPTY : Buffer.concat(parts),
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
      let at = 0;
      try {
        for (const batch of recordBatches(bytes)) {
          if (batch.partial) {
            // The broker slices its log by bytes, so the last batch may be cut; the follower
            // ignores it (§4) — but only at the very end: followed by more bytes it would
            // swallow them into one corrupt batch.
            if (i !== segments.length - 1) {
              return fail(
                'malformed',
                'a partial batch is followed by more segments',
                baseOffsetAt(bytes, at),
              );
            }
            parts.push(batch.bytes);
            inlineBytes += batch.bytes.length;
            break;
          }
          if (goesBack(batch.baseOffset)) {
            return fail('malformed', `inline batch at offset ${batch.baseOffset} goes back`, undefined);
          }
          parts.push(batch.bytes());
          inlineBytes += batch.size;
          nextOffset = batch.lastOffset + 1n;
          at += batch.size;
        }
      } catch (error) {
        return fail(
          'malformed',
          `inline bytes are not v2 batches: ${messageOf(error)}`,
          baseOffsetAt(bytes, at),
        );
      }
      continue;
    }

    const { baseOffset: base, store, objectKey, position, length } = segment;
    const produced = bodyOf(store, objectKey, i);
    if (!Buffer.isBuffer(produced)) {
      return fail('getFailed', `GET ${objectKey}: ${messageOf(produced.error)}`, base);
    }
    if (produced.length !== length) {
      return fail(
        'getFailed',
        `${objectKey} gave ${produced.length} bytes for the ${length}-byte batch at ${position}`,
        base,
      );
    }
    // The batch as the leader stored it: the produced bytes with the two fields the broker
    // assigned on append (wal-references.ts explains why nothing else can differ).
    const header = Buffer.from(produced.subarray(0, RECORD_BATCH_HEADER_SIZE));
    header.writeBigInt64BE(base, 0);
    header.writeInt32BE(segment.partitionLeaderEpoch, PLE_OFFSET);
    const body = produced.subarray(RECORD_BATCH_HEADER_SIZE);
    const lengthField = header.readInt32BE(8);
    if (lengthField !== length - LOG_OVERHEAD) {
      return fail(
        'lengthMismatch',
        `batch at offset ${base} declares Length ${lengthField}, its reference ${length} bytes`,
        base,
      );
    }
    if (header[MAGIC_OFFSET] !== 2) {
      return fail('malformed', `batch at offset ${base} has magic ${header[MAGIC_OFFSET]}`, base);
    }
    // The follower's leader-epoch cache throws on −1 and the partition is marked failed (§4).
    if (header.readInt32BE(PLE_OFFSET) === -1) {
      return fail('malformed', `batch at offset ${base} has partition leader epoch -1`, base);
    }
    if (goesBack(base)) return fail('malformed', `batch at offset ${base} goes back`, undefined);
    // The object must hold the very batch the leader stored (its CRC field), and that batch must
    // be whole (DefaultRecordBatch.isValid: CRC-32C over bytes 21..end).
    const stored = header.readUInt32BE(CRC_OFFSET);
    if (stored !== segment.crc) {
      return fail(
        'crcMismatch',
        `batch at offset ${base}: ${objectKey} holds CRC ${stored}, the leader stored CRC ${segment.crc}`,
        base,
      );
    }
    const crc = crc32c(body, crc32c(header.subarray(CRC_START)));
    if (crc !== stored) {
      return fail('crcMismatch', `batch at offset ${base}: CRC-32C ${crc} ≠ header CRC ${stored}`, base);
    }
    parts.push(header, body);
    references++;
    referenceBytes += length;
    nextOffset = base + BigInt(header.readInt32BE(LAST_OFFSET_DELTA_OFFSET)) + 1n;
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

/**
 * Egress filter for follower Fetch (API key 1), v12–v18. Every request goes out marked with
 * FETCH_CAPABILITY_TAG (carrying the partitions that need inline bytes); every partition of the
 * answer that holds a segment list gets its records rebuilt, and loses the tag.
 *
 * Never a gap, never a changed byte (ARCHITECTURE.md Replication 3.2): a stock follower accepts a
 * gap, so a batch that cannot be rebuilt ends its partition's records at the last good batch, and
 * the following requests ask the leader side to send that partition inline from the first
 * missing batch — until an answer delivers the partition, or FETCH_FILL_PENDING_TTL_MS passes, so
 * no follower re-fetches one offset forever. Partitions, errors, offsets, session and topic ids
 * are left exactly as the broker wrote them.
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
    fallbacks: { getFailed: 0, crcMismatch: 0, lengthMismatch: 0, malformed: 0 },
    pendingInline: 0,
    pendingExpired: 0,
    fillLatencyMs: { sum: 0, count: 0, max: 0 },
    requestsDuringBackoff: 0,
    backoffs: 0,
  };
  readonly #readerFor: (store: string) => Pick<WalRangeReader, 'read'> | undefined;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #pendingTtlMs: number;
  readonly #pending = new Map<string, PendingFallback>();
  readonly #marked = new WeakMap<RequestInfo, MarkedRequest>();
  /** Until when (#now) requests go out unmarked, and the length of the last such window. */
  #inlineUntil = 0;
  #backoffMs = 0;

  constructor(options: FetchFillOptions) {
    this.#readerFor = options.readerFor;
    this.#log = options.log;
    this.#now = options.now ?? (() => performance.now());
    this.#pendingTtlMs = options.pendingTtlMs ?? FETCH_FILL_PENDING_TTL_MS;
  }

  onRequest(info: RequestInfo, frame: Buffer): RequestDecision {
    // Fetch always has a response (only Produce acks=0 does not).
    const untouched: RequestDecision = { action: 'forward', frame, expectResponse: true };
    if (!fillable(info.apiVersion)) return untouched;
    if (this.#now() < this.#inlineUntil) {
      this.stats.requestsDuringBackoff++;
      return untouched;
    }
    this.#expirePending();
    const inlineRequests: InlineRequest[] = [];
    for (const pending of this.#pending.values()) {
      if (pending.topicId === undefined) {
        this.stats.requestsUnmarked++;
        return untouched;
      }
      inlineRequests.push({
        topicId: pending.topicId,
        partition: pending.partition,
        fromOffset: pending.fromOffset,
      });
    }
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    const header = decodeRequestHeader(payload);
    const request = decodeFetchRequest(payload.subarray(header.headerLength), info.apiVersion);
    // KIP-482: tags ascending, each at most once; a tag left by another walproxy hop is replaced,
    // since this hop is the one that fills the answer.
    request.taggedFields = [
      ...(request.taggedFields ?? []).filter((f) => f.tag !== FETCH_CAPABILITY_TAG),
      { tag: FETCH_CAPABILITY_TAG, data: encodeFetchCapability({ inlineRequests }) },
    ].sort((a, b) => a.tag - b.tag);
    const body = encodeFetchRequest(request, info.apiVersion);
    this.#marked.set(info, { carried: new Set(this.#pending.values()), topics: request.topics });
    this.stats.requestsMarked++;
    return {
      action: 'forward',
      frame: frameOf(payload.subarray(0, header.headerLength), body),
      expectResponse: true,
    };
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer> {
    const marked = this.#marked.get(info);
    if (marked === undefined) return frame;
    this.#marked.delete(info);
    const started = performance.now();
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    const header = decodeResponseHeader(payload, responseHeaderVersion(ApiKey.Fetch, info.apiVersion)!);
    const response = decodeFetchResponse(payload.subarray(header.headerLength), info.apiVersion);
    const tagged: { topic: FetchResponseTopic; partition: FetchResponsePartition; data: Buffer }[] = [];
    for (const topic of response.responses) {
      for (const partition of topic.partitions) {
        const tag = partition.taggedFields?.find((f) => f.tag === PARTITION_SEGMENTS_TAG);
        if (tag !== undefined) {
          tagged.push({ topic, partition, data: tag.data });
          continue;
        }
        const bytes = partition.records?.length ?? 0;
        this.stats.inlineBytes += bytes;
        this.#settle(marked, topic, partition, bytes > 0);
      }
    }
    if (tagged.length === 0) return frame;
    return this.#fill(info, marked, payload.subarray(0, header.headerLength), response, tagged, started);
  }

  async #fill(
    info: RequestInfo,
    marked: MarkedRequest,
    headerBytes: Buffer,
    response: FetchResponse,
    tagged: readonly { topic: FetchResponseTopic; partition: FetchResponsePartition; data: Buffer }[],
    started: number,
  ): Promise<Buffer> {
    // Every body of one object in one read (one ranged GET covering them all), every object at once.
    const ranges = new Map<string, ByteRange[]>();
    const plans: Plan[] = tagged.map(({ topic, partition, data }) => {
      let segments: PartitionSegment[];
      try {
        segments = decodePartitionSegments(data);
      } catch (error) {
        return { topic, partition, segments: { error }, slots: [] };
      }
      const slots = segments.map((s) => {
        if (s.kind === 'inline') return -1;
        const where = storeAndKey(s.store, s.objectKey);
        let list = ranges.get(where);
        if (list === undefined) {
          list = [];
          ranges.set(where, list);
        }
        return (
          // The whole produced batch: its header supplies every field the broker did not assign.
          list.push({ offset: s.position, length: s.length }) - 1
        );
      });
      return { topic, partition, segments, slots };
    });
    const reads = new Map<string, Buffer[] | { error: unknown }>(
      await Promise.all(
        [...ranges].map(async ([where, list]) => {
          const { store, objectKey } = splitStoreAndKey(where);
          try {
            const reader = this.#readerFor(store);
            if (reader === undefined)
              throw new Error(`store ${store} is not one this sidecar may read (--wal-read-store-url)`);
            return [where, await reader.read(objectKey, list)] as const;
          } catch (error) {
            return [where, { error }] as const;
          }
        }),
      ),
    );

    let references = 0;
    let bytes = 0;
    const failures: FetchFallbackEvent[] = [];
    for (const { topic, partition, segments, slots } of plans) {
      const records = partition.records ?? EMPTY;
      const rebuilt: Rebuilt = Array.isArray(segments)
        ? rebuild(records, segments, (store, objectKey, i) => {
            const read = reads.get(storeAndKey(store, objectKey))!;
            return Array.isArray(read) ? read[slots[i]!]! : read;
          })
        : {
            records: EMPTY,
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
      // Since 4.0 brokers write empty records, never null, for librdkafka's sake (kafka-protocol.md §1).
      partition.records = rebuilt.records;
      const rest = partition.taggedFields?.filter((f) => f.tag !== PARTITION_SEGMENTS_TAG) ?? [];
      partition.taggedFields = rest.length === 0 ? undefined : rest;
      references += rebuilt.references;
      bytes += rebuilt.referenceBytes;
      this.stats.inlineBytes += rebuilt.inlineBytes;
      if (rebuilt.failure === undefined) {
        this.#settle(marked, topic, partition, rebuilt.records.length > 0);
      } else {
        failures.push(this.#fallback(marked, topic, partition, rebuilt));
      }
    }

    const body = encodeFetchResponse(response, info.apiVersion);
    const out = frameOf(headerBytes, body);
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
        bytes,
        durationMs,
        fallbacks: failures.length,
      } satisfies FetchFillEvent);
    }
    if (failures.some((f) => f.reason === 'getFailed')) this.#backOff();
    else if (references > 0) this.#backoffMs = 0;
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

  /** Object reads failed: the next requests go unmarked (stock, inline) for a growing while. */
  #backOff(): void {
    this.#backoffMs = Math.min(
      FETCH_FILL_BACKOFF_MAX_MS,
      Math.max(FETCH_FILL_BACKOFF_MIN_MS, this.#backoffMs * 2),
    );
    this.#inlineUntil = this.#now() + this.#backoffMs;
    this.stats.backoffs++;
    this.#log.warn(
      { inlineForMs: this.#backoffMs },
      'object store reads failed; follower fetches go inline (stock) for a while',
    );
  }

  /** Registers (or renews) the partition's inline request, counts it, and says so. */
  #fallback(
    marked: MarkedRequest,
    topic: FetchResponseTopic,
    partition: FetchResponsePartition,
    rebuilt: Rebuilt,
  ): FetchFallbackEvent {
    const failure = rebuilt.failure!;
    // The first missing batch's base offset, unless it is unreadable or points before what was
    // delivered; then where the follower fetches next (kept prefix, else the request's offset).
    const floor = rebuilt.nextOffset ?? this.#fetchOffset(marked, topic, partition.partitionIndex);
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
    marked: MarkedRequest,
    topic: FetchResponseTopic,
    partition: FetchResponsePartition,
    delivered: boolean,
  ): void {
    const key = pendingKey(topic, partition.partitionIndex);
    const pending = this.#pending.get(key);
    if (pending === undefined || !marked.carried.has(pending)) return;
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

  #fetchOffset(marked: MarkedRequest, topic: FetchResponseTopic, partition: number): bigint | undefined {
    const asked = marked.topics.find((t) =>
      topic.topicId !== undefined ? t.topicId === topic.topicId : t.topic === topic.topic,
    );
    return asked?.partitions.find((p) => p.partition === partition)?.fetchOffset;
  }
}

/** One map key for an object of a store (a newline appears in neither a URL nor a WAL key). */
function storeAndKey(store: string, objectKey: string): string {
  return `${store}\n${objectKey}`;
}

function splitStoreAndKey(where: string): { store: string; objectKey: string } {
  const at = where.indexOf('\n');
  return { store: where.slice(0, at), objectKey: where.slice(at + 1) };
}
