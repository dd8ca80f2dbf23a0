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
  FETCH_CAPABILITY_TAG,
  type FetchCapability,
  type FetchResponsePartition,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
  ProtocolError,
  type RecordBatch,
  recordBatches,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import type { TopicNames } from '../metadata/topic-names.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { TopicPolicy } from '../topics/topic-policy.js';
import type { IndexedBatch, WalBatchIndex } from '../wal/batch-index.js';

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

export interface FetchStripStats {
  responsesRewritten: number;
  referencesSent: number;
  bytesReferenced: number;
  inlineBytes: number;
  /** Batches sent inline, by why. */
  inline: {
    /** Transaction markers: the coordinator writes them, they never pass through Produce. */
    control: number;
    /** Sent by an idempotent producer, but the broker rewrote the bytes (LogAppendTime, recompression). */
    rewrittenByBroker: number;
    notInWal: number;
    /**
     * A produced batch had the same partition, CRC-32C, length and header but other records (a
     * CRC collision): referencing it would give the follower the wrong bytes.
     */
    digestMismatch: number;
    notStoredInTime: number;
    requestedInline: number;
    unknownTopic: number;
  };
  holds: number;
  holdMsTotal: number;
  holdMsMax: number;
  /** Marked requests from a follower side that reads another reference format: answered stock. */
  unknownCapabilityVersions: number;
}

/** What the filter publishes on node:diagnostics_channel; telemetry subscribes and maps them. */
export const FETCH_STRIP_CHANNELS = {
  /** A marked Fetch response carrying records was answered: FetchStripEvent. */
  strip: 'walproxy:fetch:strip',
} as const;

export type FetchInlineReason = keyof FetchStripStats['inline'];

export interface FetchStripEvent {
  references: number;
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

const channels = { strip: channel(FETCH_STRIP_CHANNELS.strip) };

interface MarkedRequest {
  /** `${topicId}:${partition}` the follower side asked to get inline. */
  inline: Set<string>;
}

/**
 * Leader side of replication through the WAL (ARCHITECTURE.md, Replication 2), on the
 * replication ingress. Only a Fetch that the follower's sidecar marked with the capability tag
 * gets references; a stock follower that reaches the broker without walproxy gets the stock
 * response. In a marked response, each batch whose exact bytes are stored in a WAL object
 * becomes a reference (its 61-byte header as the leader stored it + object, position, length);
 * everything else stays inline, in order. A batch still uploading holds the response at most
 * `maxHoldMs`, then goes inline: a slow store costs bytes, never availability. Partitions,
 * session ids, topic ids, errors, high watermark, log start offset and diverging epoch are
 * written back as the broker sent them.
 */
export class FetchStripFilter implements FrameFilter {
  readonly apiKeys = new Set<number>([ApiKey.Fetch]);
  readonly stats: FetchStripStats = {
    responsesRewritten: 0,
    referencesSent: 0,
    bytesReferenced: 0,
    inlineBytes: 0,
    inline: {
      control: 0,
      rewrittenByBroker: 0,
      notInWal: 0,
      digestMismatch: 0,
      notStoredInTime: 0,
      requestedInline: 0,
      unknownTopic: 0,
    },
    holds: 0,
    holdMsTotal: 0,
    holdMsMax: 0,
    unknownCapabilityVersions: 0,
  };
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
      /** The store this sidecar writes to (--wal-store-url): references name it for the follower. */
      storeUrl: string;
      log: Logger;
    },
  ) {}

  onRequest(info: RequestInfo, frame: Buffer): RequestDecision {
    if (info.apiVersion >= FETCH_STRIP_VERSIONS.min && info.apiVersion <= FETCH_STRIP_VERSIONS.max) {
      const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
      const header = decodeRequestHeader(payload);
      const request = decodeFetchRequest(payload.subarray(header.headerLength), info.apiVersion);
      const tag = request.taggedFields?.find((t) => t.tag === FETCH_CAPABILITY_TAG);
      const capability = tag ? readCapability(tag.data) : undefined;
      if (capability) {
        this.marked.set(info, {
          inline: new Set(capability.inlineRequests.map((r) => `${r.topicId}:${r.partition}`)),
        });
      } else if (tag) {
        this.stats.unknownCapabilityVersions++;
      }
    }
    // The broker ignores the unknown tag (KIP-482), so the request goes up as it came.
    return { action: 'forward', frame, expectResponse: true };
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer> {
    const marked = this.marked.get(info);
    if (!marked) return frame;
    this.marked.delete(info);
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    const { headerLength } = decodeResponseHeader(
      payload,
      responseHeaderVersion(ApiKey.Fetch, info.apiVersion)!,
    );
    const response = decodeFetchResponse(payload.subarray(headerLength), info.apiVersion);
    const tally: FetchStripEvent = {
      references: 0,
      bytesReferenced: 0,
      inlineBytes: {
        control: 0,
        rewrittenByBroker: 0,
        notInWal: 0,
        digestMismatch: 0,
        notStoredInTime: 0,
        requestedInline: 0,
        unknownTopic: 0,
      },
      heldBatches: 0,
      holdMs: 0,
      durationMs: performance.now(),
    };

    // Which batches are in the WAL, and which of those are still uploading.
    const plans: Array<{
      partition: FetchResponsePartition;
      batches: Array<{ bytes: Buffer; header: Buffer; entry?: IndexedBatch }>;
    }> = [];
    const uploading: IndexedBatch[] = [];
    let holdMs = 0;
    for (const topic of response.responses) {
      const topicId = topic.topicId;
      const name = topicId !== undefined ? this.deps.topicNames.nameOf(topicId) : topic.topic;
      for (const partition of topic.partitions) {
        const records = partition.records;
        if (records === null || records.length === 0) continue;
        if (name === undefined) {
          this.stats.inline.unknownTopic++;
          tally.inlineBytes.unknownTopic += records.length;
          continue;
        }
        if (topicId !== undefined && marked.inline.has(`${topicId}:${partition.partitionIndex}`)) {
          this.stats.inline.requestedInline++;
          tally.inlineBytes.requestedInline += records.length;
          continue;
        }
        const batches: Array<{ bytes: Buffer; header: Buffer; entry?: IndexedBatch }> = [];
        let anyInWal = false;
        for (const batch of recordBatches(records)) {
          if (batch.partial) {
            batches.push({ bytes: batch.bytes, header: batch.bytes });
            continue;
          }
          const match = this.deps.index.lookup(name, partition.partitionIndex, batch);
          const entry = match.found;
          if (entry) {
            anyInWal = true;
            if (!entry.location) {
              uploading.push(entry);
              holdMs = Math.max(holdMs, this.deps.policy?.settingsFor(name).maxHoldMs ?? this.deps.maxHoldMs);
            }
            batches.push({ bytes: batch.bytes(), header: batch.header(), entry });
          } else {
            const reason: FetchInlineReason = batch.isControl
              ? 'control'
              : match.digestMismatch
                ? 'digestMismatch'
                : this.deps.index.rewrittenByBroker(name, partition.partitionIndex, batch)
                  ? 'rewrittenByBroker'
                  : 'notInWal';
            if (reason === 'digestMismatch') this.warnDigestMismatch(name, partition.partitionIndex, batch);
            this.stats.inline[reason]++;
            const bytes = batch.bytes();
            tally.inlineBytes[reason] += bytes.length;
            batches.push({ bytes, header: batch.header() });
          }
        }
        if (anyInWal) plans.push({ partition, batches });
      }
    }
    if (plans.length === 0) {
      this.report(tally);
      return frame;
    }
    const rewrite = () => {
      const out = this.rewrite(frame, info.apiVersion, headerLength, response, plans, tally);
      this.report(tally);
      return out;
    };
    if (uploading.length === 0) return rewrite();
    tally.heldBatches = uploading.length;
    return this.holdFor(uploading, holdMs, tally).then(rewrite);
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

  /** Waits until the uploading batches are stored or `holdMs` (the longest hold of their topics) has passed. */
  private async holdFor(uploading: IndexedBatch[], holdMs: number, tally: FetchStripEvent): Promise<void> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(uploading.map((e) => e.ticket.durable)),
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

  private rewrite(
    frame: Buffer,
    version: number,
    headerLength: number,
    response: ReturnType<typeof decodeFetchResponse>,
    plans: Array<{
      partition: FetchResponsePartition;
      batches: Array<{ bytes: Buffer; header: Buffer; entry?: IndexedBatch }>;
    }>,
    tally: FetchStripEvent,
  ): Buffer {
    let referenced = 0;
    for (const { partition, batches } of plans) {
      const segments: PartitionSegment[] = [];
      const inline: Buffer[] = [];
      for (const b of batches) {
        const location = b.entry?.location;
        if (location) {
          // The follower side rebuilds the stored header from the object's copy plus the two
          // fields the broker assigned (wal-references.ts, version 2).
          segments.push({
            kind: 'reference',
            baseOffset: b.header.readBigInt64BE(BASE_OFFSET_OFFSET),
            partitionLeaderEpoch: b.header.readInt32BE(PARTITION_LEADER_EPOCH_OFFSET),
            crc: b.header.readUInt32BE(CRC_OFFSET),
            store: this.deps.storeUrl,
            objectKey: location.objectKey,
            position: location.position,
            length: location.length,
          });
          referenced++;
          this.stats.referencesSent++;
          this.stats.bytesReferenced += b.bytes.length;
          tally.bytesReferenced += b.bytes.length;
          continue;
        }
        if (b.entry) {
          this.stats.inline.notStoredInTime++;
          tally.inlineBytes.notStoredInTime += b.bytes.length;
        }
        const last = segments.at(-1);
        if (last?.kind === 'inline') last.length += b.bytes.length;
        else segments.push({ kind: 'inline', length: b.bytes.length });
        inline.push(b.bytes);
        this.stats.inlineBytes += b.bytes.length;
      }
      partition.records = Buffer.concat(inline);
      const tags = (partition.taggedFields ?? []).filter((t) => t.tag !== PARTITION_SEGMENTS_TAG);
      tags.push({ tag: PARTITION_SEGMENTS_TAG, data: encodePartitionSegments(segments) });
      partition.taggedFields = tags.sort((a, b) => a.tag - b.tag);
    }
    tally.references = referenced;
    // Everything ended up inline (every held batch missed the hold): the broker's bytes as they were.
    if (referenced === 0) return frame;
    this.stats.responsesRewritten++;
    const body = encodeFetchResponse(response, version);
    return frameOf(frame.subarray(FRAME_SIZE_PREFIX_BYTES, FRAME_SIZE_PREFIX_BYTES + headerLength), body);
  }
}

/**
 * The follower side's capability, or undefined when it speaks another version of the reference
 * format (a rolling upgrade of walproxy): such a follower gets the stock response, inline.
 */
function readCapability(data: Buffer): FetchCapability | undefined {
  try {
    return decodeFetchCapability(data);
  } catch (error) {
    if (error instanceof ProtocolError && error.code === 'WALPROXY_ERR_UNSUPPORTED_VERSION') return undefined;
    throw error;
  }
}

function frameOf(header: Buffer, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(FRAME_SIZE_PREFIX_BYTES + header.length + body.length);
  out.writeInt32BE(header.length + body.length, 0);
  header.copy(out, FRAME_SIZE_PREFIX_BYTES);
  body.copy(out, FRAME_SIZE_PREFIX_BYTES + header.length);
  return out;
}
