import { channel } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  ApiKey,
  decodeFetchCapability,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeFetchResponse,
  encodePartitionSegments,
  encodeWalTrace,
  FETCH_CAPABILITY_TAG,
  type FetchCapability,
  type FetchRequest,
  type FetchResponse,
  type FetchResponsePartition,
  PARTITION_SEGMENTS_TAG,
  type PartialBatch,
  type PartitionSegment,
  type RecordBatch,
  recordBatches,
  responseHeaderVersion,
  type SegmentsVersion,
  WAL_TRACE_TAG,
  type WalTraceContext,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import type { TopicNames } from '../metadata/topic-names.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { StoreHealth } from '../store/store-health.js';
import type { TopicPolicy } from '../topics/topic-policy.js';
import type { WalBatchIndex } from '../wal/batch-index.js';
import type { SealingPolicy } from '../wal/sealing-policy.js';
import type { WalLocation } from '../wal/wal-writer.js';

/** Header fields a reference carries (kafka-protocol.md §4: the batch header layout). */
const BASE_OFFSET_OFFSET = 0;
const PARTITION_LEADER_EPOCH_OFFSET = 12;
const CRC_OFFSET = 17;
const DIGEST_WARNING_INTERVAL_MS = 60_000;

/**
 * Fetch versions the leader side rewrites: v12 is the first flexible one (tagged fields), v18 the
 * newest replica fetch (4.1+). A KRaft follower always fetches with a flexible, topic-id version
 * fixed by metadata.version (kafka-protocol.md §3).
 */
export const FETCH_STRIP_VERSIONS = { min: 12, max: 18 } as const;

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
function zeroByReason(): Record<FetchInlineReason, number> {
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

const channels = {
  strip: channel(FETCH_STRIP_CHANNELS.strip),
  traceContext: channel(FETCH_STRIP_CHANNELS.traceContext),
};

interface PlannedBatch {
  bytes: Buffer;
  header: Buffer;
  /** Whether the WAL holds (or is uploading) exactly this batch. */
  inWal: boolean;
  /** For a batch in the WAL: the SHA-256 of its records the index proved it by. */
  digest?: Buffer;
  /** Where, once stored; set when an upload the response waited for ends in time. */
  location?: WalLocation;
}

/** A partition with at least one WAL batch: its batches in order, each referenced or inline. */
interface Plan {
  partition: FetchResponsePartition;
  batches: PlannedBatch[];
}

interface MarkedRequest {
  /** `${topicId}:${partition}` the follower side asked to get inline. */
  inline: Set<string>;
  /** The segment-list version the follower side reads (its capability's): what it gets. */
  version: SegmentsVersion;
}

/**
 * Leader side of replication through the WAL (ARCHITECTURE.md, Replication 2), on the
 * replication ingress. Only a Fetch that the follower's sidecar marked with the capability tag
 * gets references; a stock follower that reaches the broker without walproxy gets the stock
 * response. In a marked response, each batch whose exact bytes are stored in a WAL object
 * becomes a reference (its 61-byte header as the leader stored it + object, position, length);
 * everything else stays inline, in order. A batch still uploading holds the response at most
 * the smallest max.hold.ms of the topics the response carries records of (`maxHoldMs` for topics
 * without their own), then goes inline: a slow store costs bytes, never availability. Partitions,
 * session ids, topic ids, errors, high watermark, log start offset and diverging epoch are
 * written back as the broker sent them.
 */
export class FetchStripFilter implements FrameFilter {
  readonly apiKeys = new Set<number>([ApiKey.Fetch]);
  readonly stats: FetchStripStats = newFetchStripStats();
  private readonly marked = new WeakMap<RequestInfo, MarkedRequest>();
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

  onRequest(info: RequestInfo, frame: Buffer): RequestDecision {
    const request =
      info.apiVersion >= FETCH_STRIP_VERSIONS.min && info.apiVersion <= FETCH_STRIP_VERSIONS.max
        ? this.decodeRequest(info, frame)
        : undefined;
    if (request !== undefined) {
      const tag = request.taggedFields?.find((t) => t.tag === FETCH_CAPABILITY_TAG);
      const capability = tag ? readCapability(tag.data) : undefined;
      if (capability) {
        this.marked.set(info, {
          inline: new Set(capability.inlineRequests.map((r) => `${r.topicId}:${r.partition}`)),
          version: capability.version,
        });
      } else if (tag) {
        this.stats.unknownCapabilityVersions++;
      }
    }
    // The broker ignores the unknown tag (KIP-482), so the request goes up as it came.
    return { action: 'forward', frame, expectResponse: true };
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
      const out = this.rewrite(frame, info.apiVersion, marked.version, headerLength, response, plans, tally);
      this.report(tally);
      return out;
    };
    if (uploading.length === 0) return rewrite();
    tally.heldBatches = uploading.length;
    // Counted from the response's arrival: a wait for topic names is part of the hold.
    const holdMs = Math.max(0, this.responseHoldMs(response) - (performance.now() - arrived));
    return this.holdFor(uploading, holdMs, tally).then(rewrite);
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
    if (!channels.strip.hasSubscribers) return;
    const inlineBytes = Object.values(tally.inlineBytes).reduce((a, b) => a + b, 0);
    if (tally.references + inlineBytes === 0) return;
    tally.durationMs = performance.now() - tally.durationMs;
    channels.strip.publish(tally);
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

  /**
   * Adds WAL_TRACE_TAG with the sampled upload spans of the referenced objects, when tracing
   * listens and knows one: no byte is added otherwise (wal-trace.ts).
   */
  private carryTraceContext(response: FetchResponse, objectKeys: readonly string[]): void {
    if (!channels.traceContext.hasSubscribers) return;
    const ask: FetchTraceContextEvent = { objectKeys, uploads: [] };
    channels.traceContext.publish(ask);
    if (ask.uploads.length === 0) return;
    let data: Buffer;
    try {
      data = encodeWalTrace(ask.uploads);
    } catch (error) {
      // Tracing is best effort: a bad context costs the link, never the response.
      this.deps.log.debug({ error: (error as Error).message }, 'trace context not carried');
      return;
    }
    // KIP-482: tags ascending, each at most once.
    response.taggedFields = [
      ...(response.taggedFields ?? []).filter((t) => t.tag !== WAL_TRACE_TAG),
      { tag: WAL_TRACE_TAG, data },
    ].sort((a, b) => a.tag - b.tag);
  }

  private rewrite(
    frame: Buffer,
    version: number,
    segmentsVersion: SegmentsVersion,
    headerLength: number,
    response: FetchResponse,
    plans: Plan[],
    tally: FetchStripEvent,
  ): Buffer {
    let referenced = 0;
    const objectKeys = new Set<string>();
    for (const { partition, batches } of plans) {
      const segments: PartitionSegment[] = [];
      const inline: Buffer[] = [];
      for (const b of batches) {
        const location = b.location;
        if (location) {
          // The follower side rebuilds the stored header from the object's copy plus the two
          // fields the broker assigned, and proves the records by the digest the index proved
          // them by (wal-references.ts; a version-2 follower side gets no digest).
          segments.push({
            kind: 'reference',
            baseOffset: b.header.readBigInt64BE(BASE_OFFSET_OFFSET),
            partitionLeaderEpoch: b.header.readInt32BE(PARTITION_LEADER_EPOCH_OFFSET),
            crc: b.header.readUInt32BE(CRC_OFFSET),
            ...(b.digest !== undefined ? { digest: b.digest } : {}),
            store: location.store ?? this.deps.storeUrl,
            objectKey: location.objectKey,
            position: location.position,
            length: location.length,
          });
          referenced++;
          objectKeys.add(location.objectKey);
          this.stats.referencesSent++;
          this.stats.bytesReferenced += b.bytes.length;
          tally.bytesReferenced += b.bytes.length;
          continue;
        }
        if (b.inWal) {
          // Counted here: the other inline batches were counted when the response was planned.
          this.stats.inline.notStoredInTime++;
          this.stats.inlineBytes += b.bytes.length;
          this.stats.inlineBytesByReason.notStoredInTime += b.bytes.length;
          tally.inlineBytes.notStoredInTime += b.bytes.length;
        }
        const last = segments.at(-1);
        if (last?.kind === 'inline') last.length += b.bytes.length;
        else segments.push({ kind: 'inline', length: b.bytes.length });
        inline.push(b.bytes);
      }
      partition.records = Buffer.concat(inline);
      const tags = (partition.taggedFields ?? []).filter((t) => t.tag !== PARTITION_SEGMENTS_TAG);
      tags.push({ tag: PARTITION_SEGMENTS_TAG, data: encodePartitionSegments(segments, segmentsVersion) });
      partition.taggedFields = tags.sort((a, b) => a.tag - b.tag);
    }
    tally.references = referenced;
    tally.objectKeys = [...objectKeys];
    // Everything ended up inline (every held batch missed the hold): the broker's bytes as they were.
    if (referenced === 0) return frame;
    this.stats.responsesRewritten++;
    this.carryTraceContext(response, tally.objectKeys);
    const body = encodeFetchResponse(response, version);
    return frameOf(frame.subarray(FRAME_SIZE_PREFIX_BYTES, FRAME_SIZE_PREFIX_BYTES + headerLength), body);
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

function frameOf(header: Buffer, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(FRAME_SIZE_PREFIX_BYTES + header.length + body.length);
  out.writeInt32BE(header.length + body.length, 0);
  header.copy(out, FRAME_SIZE_PREFIX_BYTES);
  body.copy(out, FRAME_SIZE_PREFIX_BYTES + header.length);
  return out;
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
