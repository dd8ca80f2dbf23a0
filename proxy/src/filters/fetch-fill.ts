// Follower side of replication through the object store (docs/replication-follower.md), on the
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
//
// The parts, each in its own file: fetch-fill-pending.ts (the partitions asking for inline
// bytes), fetch-fill-store-reads.ts (reading the objects, the fill deadline, store backoff),
// fetch-fill-rebuild.ts (each batch checked as the follower would, and against the leader's
// digest), fetch-fill-splice.ts (the output frame), fetch-fill-events.ts (channels, counters).
import { channel } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  ApiKey,
  apiKeyInfo,
  decodeFetchRequest,
  decodeFetchResponse,
  decodePartitionSegments,
  decodePrefetchHints,
  decodeRequestHeader,
  decodeResponseHeader,
  decodeWalTrace,
  encodeFetchCapability,
  encodeFetchRequest,
  encodeFrame,
  encodePrefetchHintsWanted,
  FETCH_CAPABILITY_TAG,
  type FetchRequestTopic,
  type FetchResponse,
  type FetchResponsePartition,
  type FetchResponseTopic,
  type InlineRequest,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
  PREFETCH_HINTS_TAG,
  type RawTaggedField,
  responseHeaderVersion,
  WAL_TRACE_TAG,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import {
  FETCH_FILL_CHANNELS,
  type FetchFallbackEvent,
  type FetchFillEvent,
  type FetchFillStats,
  type FillInlineReason,
  newFetchFillStats,
} from './fetch-fill-events.js';
import {
  FETCH_FILL_PENDING_TTL_MS,
  type PendingFallback,
  PendingFallbacks,
  pendingKey,
} from './fetch-fill-pending.js';
import { messageOf, type Rebuilt, rebuild } from './fetch-fill-rebuild.js';
import { type Edit, rebuildFrame } from './fetch-fill-splice.js';
import { type FillReader, FillStoreReads, type ObjectReads, storeAndKey } from './fetch-fill-store-reads.js';

export {
  FETCH_FILL_CHANNELS,
  type FetchFallbackEvent,
  type FetchFallbackReason,
  type FetchFillEvent,
  type FetchFillStats,
  type FillInlineReason,
} from './fetch-fill-events.js';
export { FETCH_FILL_PENDING_TTL_MS } from './fetch-fill-pending.js';
export {
  FETCH_FILL_BACKOFF_MAX_MS,
  FETCH_FILL_BACKOFF_MIN_MS,
  type FillReader,
} from './fetch-fill-store-reads.js';

/**
 * Fetch versions this filter marks and fills: the flexible ones (v12+, which have tag buffers) up
 * to the newest walproxy decodes. A KRaft follower always fetches with one of them
 * (docs/kafka-protocol.md, "A KRaft follower's Fetch version"); any other version passes untouched,
 * unknown future ones included.
 */
export const FETCH_FILL_VERSIONS = { min: 12, max: 18 } as const;

/**
 * The latest a response to a marked request leaves, counted from its arrival, whatever the store
 * does. Half of replica.fetch.wait.max.ms (500 ms, what a leader itself may hold a follower's
 * fetch), 1/120 of replica.lag.time.max.ms (30 s): a healthy store answers well within it (S3
 * Express first bytes in single-digit ms, S3 Standard's p99 around 100-200 ms), and a store that
 * does not costs one response 250 ms before its leaders go inline (docs/replication-follower.md).
 */
export const FETCH_FILL_DEADLINE_MS = 250;

/** At most one digest-mismatch warning a minute: whoever overwrites objects must not flood the log. */
const DIGEST_WARNING_INTERVAL_MS = 60_000;

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

interface Tagged {
  readonly topic: FetchResponseTopic;
  readonly partition: FetchResponsePartition;
  readonly tag: RawTaggedField;
}

interface Plan extends Tagged {
  readonly segments: PartitionSegment[] | { readonly error: unknown };
  /** Per segment: its object (storeAndKey) and the index of its body among the object's ranges. */
  readonly slots: readonly { readonly where: string; readonly index: number }[];
}

const EMPTY = Buffer.alloc(0);
/** Requests that reach onRequest without a connection (direct callers) share one leader. */
const NO_CONNECTION = {};
const FETCH_DECODES = apiKeyInfo(ApiKey.Fetch)!.decodes!;
/** The prefetch hints tag of every marked request: the same bytes each time. */
const HINTS_WANTED = encodePrefetchHintsWanted();

const channels = {
  fill: channel(FETCH_FILL_CHANNELS.fill),
  fallback: channel(FETCH_FILL_CHANNELS.fallback),
};

function fillable(version: number): boolean {
  return version >= FETCH_FILL_VERSIONS.min && version <= FETCH_FILL_VERSIONS.max;
}

/**
 * Egress filter for follower Fetch (API key 1), v12–v18. Every request goes out marked with
 * FETCH_CAPABILITY_TAG (carrying the partitions that need inline bytes) unless its leader's store
 * backs off; every partition of the answer that holds a segment list gets its records rebuilt,
 * and loses the tag.
 *
 * Never a gap, never a changed byte (docs/replication-follower.md, "The fallback rule"): a stock
 * follower accepts a gap, so a batch that cannot be rebuilt — or whose object has not come by the
 * fill deadline — ends its partition's records at the last good batch, and the following requests
 * ask the leader side to send that partition inline from the first missing batch — until an answer
 * delivers the partition, or FETCH_FILL_PENDING_TTL_MS passes, so no follower re-fetches one offset
 * forever. Partitions, errors, offsets, session and topic ids are left exactly as the broker wrote
 * them.
 */
export class FetchFillFilter implements FrameFilter {
  readonly apiKeys: ReadonlySet<number> = new Set<number>([ApiKey.Fetch]);
  readonly stats: FetchFillStats = newFetchFillStats();
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #pending: PendingFallbacks;
  readonly #reads: FillStoreReads;
  readonly #readerFor: (store: string) => FillReader | undefined;
  readonly #sent = new WeakMap<RequestInfo, SentRequest>();
  /** Per connection (so per leader): the stores its references name. */
  readonly #leaders = new WeakMap<object, Leader>();
  #lastDigestWarningMs = Number.NEGATIVE_INFINITY;

  constructor(options: FetchFillOptions) {
    this.#log = options.log;
    this.#now = options.now ?? (() => performance.now());
    this.#pending = new PendingFallbacks(
      this.#now,
      options.pendingTtlMs ?? FETCH_FILL_PENDING_TTL_MS,
      this.stats,
    );
    const deadline = options.fillDeadlineMs ?? FETCH_FILL_DEADLINE_MS;
    if (!Number.isSafeInteger(deadline) || deadline < 0) {
      throw new RangeError(`fillDeadlineMs must be a non-negative integer, got ${deadline}`);
    }
    this.#readerFor = options.readerFor;
    this.#reads = new FillStoreReads({
      readerFor: options.readerFor,
      log: this.#log,
      now: this.#now,
      fillDeadlineMs: deadline,
      stats: this.stats,
    });
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
    if (stores !== undefined && [...stores].some((s) => this.#reads.backingOff(s))) {
      this.stats.requestsDuringBackoff++;
      return unmarked('backoff');
    }
    this.#pending.expire();
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
      ...(request.taggedFields ?? []).filter(
        (f) => f.tag !== FETCH_CAPABILITY_TAG && f.tag !== PREFETCH_HINTS_TAG,
      ),
      { tag: FETCH_CAPABILITY_TAG, data: encodeFetchCapability({ inlineRequests }) },
      { tag: PREFETCH_HINTS_TAG, data: HINTS_WANTED },
    ].sort((a, b) => a.tag - b.tag);
    const body = encodeFetchRequest(request, info.apiVersion);
    this.#sent.set(info, {
      marked: true,
      carried: this.#pending.snapshot(),
      topics: request.topics,
      leader,
    });
    this.stats.requestsMarked++;
    return {
      action: 'forward',
      frame: encodeFrame(payload.subarray(0, header.headerLength), body),
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
        this.#pending.settle(sent.carried, topic, partition, bytes > 0);
      }
    }
    const trace = response.taggedFields?.find((f) => f.tag === WAL_TRACE_TAG);
    const hints = response.taggedFields?.find((f) => f.tag === PREFETCH_HINTS_TAG);
    if (hints !== undefined) this.#prefetch(hints);
    if (tagged.length === 0) {
      // Our top-level tags without references (not something a leader side sends): dropped all the same.
      return trace === undefined && hints === undefined
        ? frame
        : rebuildFrame(frame, header.headerLength, response, [], info.apiVersion, trace, hints);
    }
    return this.#fill(info, sent, frame, header.headerLength, response, tagged, trace, started, hints);
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
    hints: RawTaggedField | undefined,
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

    const { reads, peeked } = await this.#reads.read(objects, started);

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
        this.#pending.settle(sent.carried, topic, partition, rebuilt.length > 0);
      } else {
        failures.push(this.#fallback(sent, topic, partition, rebuilt));
      }
    }
    this.#reads.judge(objects, reads, peeked);

    const out = rebuildFrame(frame, headerLength, response, edits, info.apiVersion, trace, hints);
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
   * Starts reading the hinted objects into their readers' caches, so that the references that
   * name them, a round later, are cache hits (prefetch-hints.ts). Nothing waits for these reads
   * and their failures judge no store: a hint is only a hint.
   */
  #prefetch(tag: RawTaggedField): void {
    const hints = decodePrefetchHints(tag.data);
    if (hints === undefined) return;
    this.stats.prefetchHints += hints.length;
    for (const { store, objectKey, size } of hints) {
      if (this.#reads.backingOff(store)) continue;
      let reader: FillReader | undefined;
      try {
        reader = this.#readerFor(store);
      } catch {
        continue;
      }
      if (reader?.prefetch?.(objectKey, size) === true) this.stats.prefetchesStarted++;
    }
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
    this.#pending.register(topic, partition.partitionIndex, fromOffset);
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
