// Leader side of replication through the WAL, on the replication ingress (the class comment says
// what it does). Its parts: fetch-strip-rewrite.ts (the answer: segment lists, references, the
// re-encoded response) and fetch-strip-events.ts (inline reasons, counters, channels).
import { channel } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  ApiKey,
  decodeFetchCapability,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  encodePrefetchHints,
  FETCH_CAPABILITY_TAG,
  type FetchCapability,
  type FetchRequest,
  type FetchResponse,
  type PartialBatch,
  PREFETCH_HINTS_TAG,
  type RawTaggedField,
  type RecordBatch,
  recordBatches,
  responseHeaderVersion,
  type SegmentsVersion,
  wantsPrefetchHints,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import type { TopicNames } from '../metadata/topic-names.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { StoreHealth } from '../store/store-health.js';
import type { TopicPolicy } from '../topics/topic-policy.js';
import type { WalBatchIndex } from '../wal/batch-index.js';
import type { SealingPolicy } from '../wal/sealing-policy.js';
import {
  FETCH_STRIP_CHANNELS,
  type FetchInlineReason,
  type FetchStripEvent,
  type FetchStripStats,
  newFetchStripStats,
  zeroByReason,
} from './fetch-strip-events.js';
import { type Plan, type PlannedBatch, rewriteResponse } from './fetch-strip-rewrite.js';

export {
  FETCH_INLINE_REASONS,
  FETCH_STRIP_CHANNELS,
  type FetchInlineReason,
  type FetchStripEvent,
  type FetchStripStats,
  type FetchTraceContextEvent,
  newFetchStripStats,
} from './fetch-strip-events.js';

const DIGEST_WARNING_INTERVAL_MS = 60_000;

/**
 * Fetch versions the leader side rewrites: v12 is the first flexible one (tagged fields), v18 the
 * newest replica fetch (4.1+). A KRaft follower always fetches with a flexible, topic-id version
 * fixed by metadata.version (docs/kafka-protocol.md, "A KRaft follower's Fetch version").
 */
export const FETCH_STRIP_VERSIONS = { min: 12, max: 18 } as const;

const strip = channel(FETCH_STRIP_CHANNELS.strip);

interface MarkedRequest {
  /** `${topicId}:${partition}` the follower side asked to get inline. */
  inline: Set<string>;
  /** The segment-list version the follower side reads (its capability's): what it gets. */
  version: SegmentsVersion;
  /** The follower side asked for prefetch hints (in a version this build writes), on this connection. */
  hintsFor: FilterConnection | undefined;
}

/** What a follower connection was hinted: the index's cursor, and the partitions it fetches. */
interface HintState {
  cursor: number;
  /** Interned partitions (the index's ids) this connection got records of. */
  partitions: Set<number>;
}

/**
 * Hints per response at most: the objects a follower will be referenced to next, oldest first. A
 * few rounds' worth; more would queue prefetches ahead of the fill's own GETs in the reader.
 */
export const MAX_PREFETCH_HINTS = 8;

/**
 * Leader side of replication through the WAL (docs/architecture.md, "Replication through the WAL",
 * step 2), on the replication ingress. Only a Fetch that the follower's sidecar marked with the
 * capability tag gets references; a stock follower that reaches the broker without walproxy gets
 * the stock response. In a marked response, each batch whose exact bytes are stored in a WAL object
 * becomes a reference (its 61-byte header as the leader stored it + object, position, length);
 * everything else stays inline, in order. A batch still uploading holds the response at most the
 * smallest max.hold.ms of the topics the response carries records of (`maxHoldMs` for topics
 * without their own), then goes inline: a slow store costs bytes, never availability. Partitions,
 * session ids, topic ids, errors, high watermark, log start offset and diverging epoch are written
 * back as the broker sent them.
 */
export class FetchStripFilter implements FrameFilter {
  readonly apiKeys = new Set<number>([ApiKey.Fetch]);
  readonly stats: FetchStripStats = newFetchStripStats();
  private readonly marked = new WeakMap<RequestInfo, MarkedRequest>();
  private readonly hinted = new WeakMap<FilterConnection, HintState>();
  private lastDigestWarningMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly deps: {
      index: WalBatchIndex;
      topicNames: TopicNames;
      /** The hold for topics without their own max.hold.ms (--max-hold-ms). */
      maxHoldMs: number;
      /** Per-topic settings: a topic's max.hold.ms (--topic-config). */
      policy?: TopicPolicy;
      /** Which mode=auto budget groups replicate inline now: their batches' inline reason. */
      sealing?: Pick<SealingPolicy, 'currentMode'>;
      /** The store this sidecar writes to (--wal-store-url): references name it for the follower. */
      storeUrl: string;
      /** While the store is degraded no response waits for an upload. */
      health?: StoreHealth;
      log: Logger;
    },
  ) {}

  onRequest(info: RequestInfo, frame: Buffer, connection?: FilterConnection): RequestDecision {
    const request =
      info.apiVersion >= FETCH_STRIP_VERSIONS.min && info.apiVersion <= FETCH_STRIP_VERSIONS.max
        ? this.decodeRequest(info, frame)
        : undefined;
    if (request !== undefined) {
      const tag = request.taggedFields?.find((t) => t.tag === FETCH_CAPABILITY_TAG);
      const capability = tag ? readCapability(tag.data) : undefined;
      if (capability) {
        const hints = request.taggedFields?.find((t) => t.tag === PREFETCH_HINTS_TAG);
        this.marked.set(info, {
          inline: new Set(capability.inlineRequests.map((r) => `${r.topicId}:${r.partition}`)),
          version: capability.version,
          hintsFor: hints !== undefined && wantsPrefetchHints(hints.data) ? connection : undefined,
        });
      } else if (tag) {
        this.stats.unknownCapabilityVersions++;
      }
    }
    // The broker ignores the unknown tags (KIP-482), so the request goes up as it came.
    return { action: 'forward', frame, expectResponse: true };
  }

  onClose(connection: FilterConnection): void {
    this.hinted.delete(connection);
  }

  /**
   * The request, or undefined when the codec cannot read it: Kafka is more lenient (any bytes
   * are a string to it, any negative length null), so the broker judges it and, unmarked, it
   * gets the stock answer.
   */
  private decodeRequest(info: RequestInfo, frame: Buffer): FetchRequest | undefined {
    try {
      const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
      const header = decodeRequestHeader(payload);
      return decodeFetchRequest(payload.subarray(header.headerLength), info.apiVersion);
    } catch (error) {
      this.stats.requestsNotDecoded++;
      this.deps.log.debug(
        { error: (error as Error).message },
        'fetch request not decoded; forwarded as sent',
      );
      return undefined;
    }
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer> {
    const marked = this.marked.get(info);
    if (!marked) return frame;
    this.marked.delete(info);
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    let headerLength: number;
    let response: FetchResponse;
    try {
      ({ headerLength } = decodeResponseHeader(
        payload,
        responseHeaderVersion(ApiKey.Fetch, info.apiVersion)!,
      ));
      response = decodeFetchResponse(payload.subarray(headerLength), info.apiVersion);
    } catch (error) {
      // The broker's own bytes: whatever they are, the follower gets them as stock would.
      this.stats.responsesNotDecoded++;
      this.deps.log.warn(
        { error: (error as Error).message },
        'fetch response not decoded; passed on as sent',
      );
      return frame;
    }
    // A topic created a moment ago may not be named yet: wait (at most the hold) for one
    // rate-limited refresh, so its first batches can be referenced and, being in the leader's
    // log, confirmed for the WAL. Ids the broker does not name (no Describe ACL) never wait.
    const unnamed = response.responses
      .map((t) => t.topicId)
      .filter(
        (id): id is string =>
          id !== undefined &&
          this.deps.topicNames.nameOf(id) === undefined &&
          !this.deps.topicNames.isUnknown(id),
      );
    // At most --max-hold-ms (an unnamed topic's hold), and the wait counts against the response's
    // hold (answer): no longer than the smallest hold of the topics it carries records of either.
    const arrived = performance.now();
    const nameWaitMs = unnamed.length > 0 ? Math.min(this.deps.maxHoldMs, this.responseHoldMs(response)) : 0;
    if (nameWaitMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        Promise.all(unnamed.map((id) => this.deps.topicNames.resolve(id))),
        new Promise((resolve) => {
          timer = setTimeout(resolve, nameWaitMs);
        }),
      ]).then(() => {
        clearTimeout(timer);
        return this.answer(info, frame, marked, headerLength, response, arrived);
      });
    }
    return this.answer(info, frame, marked, headerLength, response, arrived);
  }

  /** A topic's max.hold.ms (--topic-config), else --max-hold-ms; --max-hold-ms for an unnamed topic. */
  private holdOf(topic: string | undefined): number {
    if (topic === undefined) return this.deps.maxHoldMs;
    return this.deps.policy?.settingsFor(topic).maxHoldMs ?? this.deps.maxHoldMs;
  }

  /**
   * How long the response may be held at most: the smallest max.hold.ms of the topics it carries
   * records of. A Fetch response goes once, whole, so every partition in it waits as long as the
   * response does, whether or not its own batches are uploading: the largest hold of one topic (up
   * to 60 s) must not hold a topic that allows 50 ms (issue #24 item 7). Batches still uploading
   * when it ends go inline (notStoredInTime), whatever their own topic's hold.
   */
  private responseHoldMs(response: FetchResponse): number {
    let hold = Number.POSITIVE_INFINITY;
    for (const topic of response.responses) {
      if (!topic.partitions.some((p) => (p.records?.length ?? 0) > 0)) continue;
      const name = topic.topicId !== undefined ? this.deps.topicNames.nameOf(topic.topicId) : topic.topic;
      hold = Math.min(hold, this.holdOf(name));
    }
    return Number.isFinite(hold) ? hold : 0;
  }

  private answer(
    info: RequestInfo,
    frame: Buffer,
    marked: MarkedRequest,
    headerLength: number,
    response: FetchResponse,
    arrived: number,
  ): Buffer | Promise<Buffer> {
    const tally: FetchStripEvent = {
      references: 0,
      objectKeys: [],
      bytesReferenced: 0,
      inlineBytes: zeroByReason(),
      heldBatches: 0,
      holdMs: 0,
      durationMs: performance.now(),
    };
    const inlineMany = (reason: FetchInlineReason, batches: number, bytes: number) => {
      this.stats.inline[reason] += batches;
      this.stats.inlineBytes += bytes;
      this.stats.inlineBytesByReason[reason] += bytes;
      tally.inlineBytes[reason] += bytes;
    };
    const inline = (reason: FetchInlineReason, bytes: number) => inlineMany(reason, 1, bytes);

    // Which batches are in the WAL, and which of those are still uploading. Every byte that stays
    // inline is counted here, whether or not its partition has a WAL batch; the ones held for an
    // upload are counted when the hold ends (rewrite).
    const plans: Plan[] = [];
    /** Settle when a batch still uploading is stored (or fails). */
    const uploading: Promise<void>[] = [];
    const hintState = marked.hintsFor === undefined ? undefined : this.hintStateOf(marked.hintsFor);
    for (const topic of response.responses) {
      const topicId = topic.topicId;
      const name = topicId !== undefined ? this.deps.topicNames.nameOf(topicId) : topic.topic;
      // Batches of a topic that is not on the WAL path are stock by design, whatever else is
      // true of them; only a WAL topic's batches missing from the index are a fallback.
      const offWal = name === undefined ? undefined : this.offWalReason(name);
      for (const partition of topic.partitions) {
        const records = partition.records;
        if (records === null || records.length === 0) continue;
        if (name === undefined) {
          inline('unknownTopic', records.length);
          continue;
        }
        if (topicId !== undefined && marked.inline.has(`${topicId}:${partition.partitionIndex}`)) {
          inline('requestedInline', records.length);
          continue;
        }
        if (
          offWal === 'topicNotInWal' ||
          offWal === 'modeInline' ||
          (offWal === 'groupInline' && !this.deps.index.mayHold(name, partition.partitionIndex))
        ) {
          // The index never holds these batches (a topic off the WAL is not copied, a mode=inline
          // one is stored but not indexed, a quiet mode=auto partition's group has copied none of
          // it lately): counted from their headers, never looked up. In an inline replication
          // sidecar that lookup, per batch and per follower, was most of the strip's work (issue
          // #13's profile); a mode=auto topic that went inline must cost no more (issue #14).
          const counted = countHeaders(records);
          if (counted === undefined) inline(offWal, records.length);
          else {
            inlineMany('control', counted.control, counted.controlBytes);
            inlineMany(offWal, counted.other, counted.otherBytes);
          }
          continue;
        }
        if (hintState !== undefined) {
          const id = this.deps.index.partitionIdOf(name, partition.partitionIndex);
          if (id !== undefined) hintState.partitions.add(id);
        }
        const walked = walkBatches(records);
        if (walked === undefined) {
          inline(offWal ?? 'notV2', records.length);
          continue;
        }
        const batches: PlannedBatch[] = [];
        let anyInWal = false;
        for (const batch of walked) {
          if (batch.partial) {
            inline(offWal ?? 'partialBatch', batch.bytes.length);
            batches.push({ bytes: batch.bytes, header: batch.bytes, inWal: false });
            continue;
          }
          const match = this.deps.index.lookup(name, partition.partitionIndex, batch);
          const entry = match.found;
          // The leader's log holds exactly this batch: the broker appended it, so the WAL may
          // store it (a tentative batch of an acks=0 request, or one whose answer is still on
          // its way, is confirmed here, before the broker's answer waits on this follower).
          entry?.ticket?.confirm();
          if (entry?.ticket && this.deps.health?.usable === false) {
            const bytes = batch.bytes();
            inline('storeDegraded', bytes.length);
            batches.push({ bytes, header: batch.header(), inWal: false });
            continue;
          }
          if (entry && (entry.location || entry.ticket)) {
            anyInWal = true;
            const planned: PlannedBatch = {
              bytes: batch.bytes(),
              header: batch.header(),
              inWal: true,
              digest: entry.digest,
            };
            if (entry.location) planned.location = entry.location;
            else if (entry.ticket) {
              uploading.push(
                entry.ticket.durable.then((location) => {
                  planned.location = location;
                }),
              );
            }
            batches.push(planned);
            continue;
          }
          const reason: FetchInlineReason = batch.isControl
            ? 'control'
            : (offWal ??
              (match.found === undefined && match.digestMismatch
                ? 'digestMismatch'
                : this.deps.index.rewrittenByBroker(name, partition.partitionIndex, batch)
                  ? 'rewrittenByBroker'
                  : 'notInWal'));
          if (reason === 'digestMismatch') this.warnDigestMismatch(name, partition.partitionIndex, batch);
          const bytes = batch.bytes();
          inline(reason, bytes.length);
          batches.push({ bytes, header: batch.header(), inWal: false });
        }
        if (anyInWal) plans.push({ partition, batches });
      }
    }
    if (plans.length === 0) {
      this.report(tally);
      return frame;
    }
    const rewrite = () => {
      const out = rewriteResponse(
        {
          stats: this.stats,
          storeUrl: this.deps.storeUrl,
          log: this.deps.log,
          hints: hintState && ((referenced) => this.hintsTag(hintState, referenced)),
        },
        frame,
        info.apiVersion,
        marked.version,
        headerLength,
        response,
        plans,
        tally,
      );
      this.report(tally);
      return out;
    };
    if (uploading.length === 0) return rewrite();
    tally.heldBatches = uploading.length;
    // Counted from the response's arrival: a wait for topic names is part of the hold.
    const holdMs = Math.max(0, this.responseHoldMs(response) - (performance.now() - arrived));
    return this.holdFor(uploading, holdMs, tally).then(rewrite);
  }

  private hintStateOf(connection: FilterConnection): HintState {
    let state = this.hinted.get(connection);
    if (state === undefined) {
      state = { cursor: 0, partitions: new Set() };
      this.hinted.set(connection, state);
    }
    return state;
  }

  /**
   * The prefetch hints for a rewritten response: objects stored since this connection's last hints
   * that hold batches of partitions it fetches, minus those the response references already.
   * Undefined when there are none (no tag at all).
   */
  private hintsTag(state: HintState, referenced: ReadonlySet<string>): RawTaggedField | undefined {
    const { objects, cursor } = this.deps.index.storedSince(
      state.cursor,
      (id) => state.partitions.has(id),
      MAX_PREFETCH_HINTS,
    );
    state.cursor = cursor;
    const hints = objects
      .filter((o) => !referenced.has(o.objectKey))
      .map((o) => ({ store: o.store ?? this.deps.storeUrl, objectKey: o.objectKey, size: o.size }));
    if (hints.length === 0) return undefined;
    this.stats.prefetchHintsSent += hints.length;
    return { tag: PREFETCH_HINTS_TAG, data: encodePrefetchHints(hints) };
  }

  /**
   * Why a topic's batches are not referenced by design: it does not go to the WAL, its followers
   * replicate it stock (mode=inline), or its mode=auto budget group replicates inline now (the
   * sealing policy). Undefined for a WAL topic, or without a policy. The index is still asked
   * first: what it holds is referenced whatever the policy says now.
   */
  private offWalReason(topic: string): 'topicNotInWal' | 'modeInline' | 'groupInline' | undefined {
    const settings = this.deps.policy?.settingsFor(topic);
    if (settings === undefined) return undefined;
    if (!settings.wal) return 'topicNotInWal';
    if (settings.mode === 'inline') return 'modeInline';
    // Durable-ack topics are copied whatever their group's mode: one missing is a fallback.
    if (
      settings.mode === 'auto' &&
      !settings.durableAck &&
      this.deps.sealing?.currentMode(settings.latencyBudgetMs) === 'inline'
    )
      return 'groupInline';
    return undefined;
  }

  /** At most one warning a minute: a producer forging collisions must not flood the log. */
  private warnDigestMismatch(topic: string, partition: number, batch: RecordBatch): void {
    const now = Date.now();
    if (now - this.lastDigestWarningMs < DIGEST_WARNING_INTERVAL_MS) return;
    this.lastDigestWarningMs = now;
    this.deps.log.warn(
      { topic, partition, baseOffset: String(batch.baseOffset), crc: batch.crc, size: batch.size },
      'a produced batch has the CRC-32C, length and header of this log batch but other records: sent inline',
    );
  }

  /** Publishes the response's tally (durationMs holds its start until now). */
  private report(tally: FetchStripEvent): void {
    if (!strip.hasSubscribers) return;
    const inlineBytes = Object.values(tally.inlineBytes).reduce((a, b) => a + b, 0);
    if (tally.references + inlineBytes === 0) return;
    tally.durationMs = performance.now() - tally.durationMs;
    strip.publish(tally);
  }

  /** Waits until the uploading batches are stored or `holdMs` (what is left of the response's hold) has passed. */
  private async holdFor(uploading: Promise<void>[], holdMs: number, tally: FetchStripEvent): Promise<void> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(uploading),
      new Promise((resolve) => {
        timer = setTimeout(resolve, holdMs);
      }),
    ]);
    clearTimeout(timer);
    const held = Date.now() - started;
    tally.holdMs = held;
    this.stats.holds++;
    this.stats.holdMsTotal += held;
    this.stats.holdMsMax = Math.max(this.stats.holdMsMax, held);
  }
}

/**
 * The follower side's capability, or undefined when it speaks another version of the reference
 * format (a rolling upgrade of walproxy) or its bytes cannot be read: such a follower gets the
 * stock response, inline. The broker ignores the tag, so it is no reason to close the connection.
 * A version-2 follower side (before digests) still gets references, in version 2: a rolling
 * upgrade that updates leaders first keeps replicating through the store.
 */
function readCapability(data: Buffer): Required<FetchCapability> | undefined {
  try {
    return decodeFetchCapability(data);
  } catch {
    return undefined;
  }
}

/**
 * The batches of a run, counted as walkBatches would find them but without keeping or looking any
 * up: control batches, and the rest (a partial last batch included), with their bytes. Undefined
 * where the walk fails (a batch that is not magic v2, a Length below the v2 header).
 */
function countHeaders(
  records: Buffer,
): { control: number; controlBytes: number; other: number; otherBytes: number } | undefined {
  let control = 0;
  let controlBytes = 0;
  let other = 0;
  let otherBytes = 0;
  try {
    for (const batch of recordBatches(records)) {
      if (!batch.partial && batch.isControl) {
        control++;
        controlBytes += batch.size;
      } else {
        other++;
        otherBytes += batch.partial ? batch.bytes.length : batch.size;
      }
    }
  } catch {
    return undefined;
  }
  return { control, controlBytes, other, otherBytes };
}

/**
 * The batches of a partition's records, or undefined when they are not a run of magic v2 batches
 * (an old message set, bytes the walk cannot read): such records go on exactly as the broker sent
 * them.
 */
function walkBatches(records: Buffer): Array<RecordBatch | PartialBatch> | undefined {
  try {
    return [...recordBatches(records)];
  } catch {
    return undefined;
  }
}
