import { channel } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  ApiKey,
  decodeProduceRequest,
  decodeProduceResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  ErrorCode,
  encodeFrame,
  encodeProduceResponse,
  type ProduceRequest,
  type ProduceResponse,
  type ProduceTopicData,
  peekProduceAcks,
  type RecordBatch,
  recordBatches,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import type { TopicNames } from '../metadata/topic-names.js';
import type { WalMetadataPublisher } from '../metadata/wal-metadata-publisher.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { StoreHealth } from '../store/store-health.js';
import type { TopicPolicy } from '../topics/topic-policy.js';
import type { WalBatchIndex } from '../wal/batch-index.js';
import type { WalAppendTicket, WalLocation, WalWriter } from '../wal/index.js';
import type { ProducerWaits } from '../wal/producer-waits.js';
import type { SealingPolicy } from '../wal/sealing-policy.js';
import { newProduceWalStats, type ProduceWalStats } from './produce-wal-stats.js';

/** What the filter publishes on node:diagnostics_channel; telemetry subscribes and maps them. */
export const PRODUCE_WAL_CHANNELS = {
  /** A Produce request had batches copied into the WAL (or waiting for a topic name): ProduceInterceptEvent. */
  intercept: 'walproxy:produce:intercept',
  /** A held Produce response was released once its durable-ack batches settled: ProduceDurableAckEvent. */
  durableAck: 'walproxy:produce:durable-ack',
} as const;

export interface ProduceInterceptEvent {
  /** The request's identity, to pair with its ProduceDurableAckEvent; read-only. */
  request: RequestInfo;
  /** Topics whose batches were copied now. */
  topics: number;
  batches: number;
  bytes: number;
  /** Topics named by an id not known yet: copied once the local broker names them. */
  deferredTopics: number;
  /** Whether the response will wait for stored batches (durable ack). */
  durableAck: boolean;
}

export interface ProduceDurableAckEvent {
  request: RequestInfo;
  /** From the broker's response to its release. */
  durationMs: number;
  /** `failed` when at least one partition was answered REQUEST_TIMED_OUT. */
  outcome: 'stored' | 'failed';
  batches: number;
  failedPartitions: number;
  /** The WAL objects that carried the request's stored batches. */
  objectKeys: string[];
}

const channels = {
  intercept: channel(PRODUCE_WAL_CHANNELS.intercept),
  durableAck: channel(PRODUCE_WAL_CHANNELS.durableAck),
};

/** Produce versions whose batches walproxy copies: v3 is the 4.x floor (magic v2), v13 adds topic ids. */
export const PRODUCE_WAL_VERSIONS = { min: 3, max: 13 } as const;

interface PendingBatch {
  topic: string;
  topicId: string | undefined;
  /** How the response names the topic: the id from v13, the name before. */
  responseTopicKey: string;
  partition: number;
  ticket: WalAppendTicket;
  durableAck: boolean;
  /** Its followers replicate it through this sidecar's WAL objects: they wait for its object. */
  followersWait: boolean;
  lastOffsetDelta: number;
  crc: number;
  recordCount: number;
  /** Placed in the open object at once, before the broker's answer (stored ahead, below). */
  storedAhead: boolean;
  bytes: number;
}

/** What one request put in the WAL: batches copied at once, and copies waiting for a topic name. */
interface PendingCopies {
  batches: PendingBatch[];
  deferred: Promise<PendingBatch[]>[];
  /** The producer's connection: its answers prove which topics it may write (stored ahead). */
  connection: FilterConnection | undefined;
}

/**
 * Leader side of the WAL (docs/architecture.md, "The WAL, leader side"): copies every record batch
 * of WAL topics into the open WAL object — zero-copy views of the request frame — and forwards the
 * original request bytes at once. Offsets are not needed to write the WAL: with acks=all the broker
 * answers only after followers replicated, and followers replicate through the WAL.
 *
 * Durable ack (per topic): the Produce response is held until every batch it acknowledges is
 * stored; a batch whose object could not be stored turns its partition's answer into the
 * retriable REQUEST_TIMED_OUT, so the producer retries — never a success for data that is not
 * stored. When the response is known, one metadata piece per stored batch (with the offsets the
 * leader assigned) goes to the metadata topic, asynchronously.
 */
export class ProduceWalFilter implements FrameFilter {
  readonly apiKeys = new Set<number>([ApiKey.Produce]);
  readonly stats: ProduceWalStats = newProduceWalStats();
  private readonly pending = new WeakMap<RequestInfo, PendingCopies>();
  /**
   * Per producer connection, the topics its last answered Produce had appended without error
   * (forgotten with the connection, and for a topic as soon as an answer refuses it). Their
   * batches are stored ahead: placed in the open object as the request arrives, so that an
   * acks=all request queued behind the one the broker works on (a broker reads a connection's
   * next request only after answering the current one) finds its object stored when the broker
   * appends it, instead of waiting a round for its upload. A connection that has not yet shown it
   * may write a topic (authenticated, authorized, a valid producer state) gets nothing stored
   * before the broker's answer, as before (tentative batches): nothing a refused client sends
   * reaches the bucket. A batch stored ahead that the broker refuses (a leader change, a
   * revoked ACL, a sequence error) stays in its object, never indexed in the metadata topic nor
   * referenced to a follower (a follower's reference needs the leader's log batch and its
   * digest), and is counted.
   */
  private readonly provenTopics = new WeakMap<FilterConnection, Set<string>>();

  constructor(
    private readonly deps: {
      writer: WalWriter;
      /** Where the leader side finds stored batches again for follower fetches. */
      index?: WalBatchIndex;
      policy: TopicPolicy;
      topicNames: TopicNames;
      publisher: WalMetadataPublisher | undefined;
      /** While the store is degraded, topics without durable ack are not copied. */
      health?: StoreHealth;
      /**
       * Where a partition's batch of this request is stored already, if it is: a zone-local
       * produce filled from the producer's zone bucket (zone/produce-fill.ts). Such a batch is
       * indexed and published where it is, never uploaded a second time.
       */
      storedElsewhere?: (info: RequestInfo, topicKey: string, partition: number) => WalLocation | undefined;
      /**
       * Sees every batch of a WAL topic that would go into this sidecar's objects, copied or not
       * (its budget group's rate and mode come from them), and says whether `mode=auto` topics are
       * copied now. Absent: every batch is copied.
       */
      sealing?: SealingPolicy;
      /** The clock the sealing policy and the writer share. */
      now?: () => number;
      /**
       * Told which connections' requests wait for WAL objects, so that the writer seals an object
       * as soon as nothing more can join it (producer-waits.ts).
       */
      producerWaits?: ProducerWaits;
      log: Logger;
    },
  ) {}

  onRequest(info: RequestInfo, frame: Buffer, connection?: FilterConnection): RequestDecision {
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    if (info.apiVersion < PRODUCE_WAL_VERSIONS.min || info.apiVersion > PRODUCE_WAL_VERSIONS.max) {
      this.stats.unsupportedVersions++;
      return { action: 'forward', frame, expectResponse: peekProduceAcks(payload) !== 0 };
    }
    let request: ProduceRequest;
    try {
      const header = decodeRequestHeader(payload);
      request = decodeProduceRequest(payload.subarray(header.headerLength), info.apiVersion);
    } catch (error) {
      // The codec is stricter than Kafka, which reads any bytes as a string, any negative length
      // as null and ignores bytes after the body: what the codec refuses, the broker judges, as
      // stock (it answers, or closes the connection). Nothing of it is copied. Only a request
      // whose acks cannot be found closes here: the pipe must know whether an answer comes.
      const acks = peekProduceAcks(payload);
      this.stats.requestsNotDecoded++;
      this.deps.log.debug(
        { error: (error as Error).message },
        'Produce request not decoded; forwarded as sent',
      );
      return { action: 'forward', frame, expectResponse: acks !== 0 };
    }
    const copied: PendingCopies = { batches: [], deferred: [], connection };
    const proven = connection === undefined ? undefined : this.provenTopics.get(connection);
    const bytesBefore = this.stats.bytesCopied;
    const namedTwice = partitionsNamedTwice(request.topicData);
    let topics = 0;
    for (const topicData of request.topicData) {
      const topic =
        topicData.name ??
        (topicData.topicId !== undefined ? this.deps.topicNames.nameOf(topicData.topicId) : undefined);
      if (topic !== undefined) {
        const batches = this.copyTopic(info, topicData, topic, namedTwice, proven?.has(topic) === true);
        if (batches.length > 0) topics++;
        copied.batches.push(...batches);
      } else if (topicData.topicId !== undefined && this.deps.topicNames.isUnknown(topicData.topicId)) {
        // The local broker does not name this id (no Describe ACL, or not propagated yet): nothing
        // to copy, nothing to wait for; followers get it inline.
        this.stats.unknownTopicIds++;
      } else if (topicData.topicId !== undefined) {
        // Produce v13 names topics by id, and this id is new to us (a topic created a moment
        // ago): copy once the local broker has told us its name. The request goes upstream
        // now; only its response waits, so an acknowledged batch is never missing from the WAL.
        const topicId = topicData.topicId;
        copied.deferred.push(
          this.deps.topicNames.resolve(topicId).then((name) => {
            if (name !== undefined)
              return this.copyTopic(info, topicData, name, namedTwice, proven?.has(name) === true);
            this.stats.unknownTopicIds++;
            return [];
          }),
        );
      }
    }
    const expectResponse = request.acks !== 0;
    if (copied.batches.length > 0 || copied.deferred.length > 0) {
      this.stats.requestsCopied++;
      // acks=0 has no response: the batches are still stored, but no offsets are ever learnt,
      // so no metadata record can be written for them.
      if (expectResponse) this.pending.set(info, copied);
      if (connection !== undefined && this.deps.producerWaits !== undefined) {
        const ours = copied.batches.filter((b) => b.followersWait);
        this.deps.producerWaits.sent(
          connection,
          info,
          {
            expectsAnswer: expectResponse,
            // acks=all: answered once followers have it, and they get it through the object;
            // durable ack: answered once it is stored.
            waitsForTheWal:
              (request.acks === -1 && ours.length > 0) || copied.batches.some((b) => b.durableAck),
            batches: ours.map((b) => b.ticket),
          },
          (this.deps.now ?? Date.now)(),
        );
      }
      if (channels.intercept.hasSubscribers) {
        channels.intercept.publish({
          request: info,
          topics,
          batches: copied.batches.length,
          bytes: this.stats.bytesCopied - bytesBefore,
          deferredTopics: copied.deferred.length,
          durableAck: expectResponse && copied.batches.some((b) => b.durableAck),
        } satisfies ProduceInterceptEvent);
      }
    }
    return { action: 'forward', frame, expectResponse };
  }

  /** The connection closed: ProducerWaits forgets it and the requests it left unanswered. */
  onClose(connection: FilterConnection): void {
    this.deps.producerWaits?.closed(connection);
  }

  /** Appends every batch of one topic's partitions to the WAL, if the topic goes to the WAL. */
  private copyTopic(
    info: RequestInfo,
    topicData: ProduceTopicData,
    topic: string,
    namedTwice: ReadonlySet<string>,
    /** The connection's last answered Produce to this topic was appended: store ahead. */
    storeAhead: boolean,
  ): PendingBatch[] {
    const settings = this.deps.policy.settingsFor(topic);
    if (!settings.wal) return [];
    // A degraded store would make these batches wait for nothing: without durable ack the
    // producer does not wait, and followers get them inline, as stock.
    const skip = !settings.durableAck && this.deps.health !== undefined && !this.deps.health.usable;
    const sealing = this.deps.sealing;
    const budgetMs = settings.latencyBudgetMs;
    // Durable ack and mode=wal|inline ask for the stored copy whatever it costs; only mode=auto
    // follows its group's mode, and its objects may be abandoned below break-even.
    const requiresStore = settings.durableAck || settings.mode !== 'auto';
    const now = sealing === undefined ? 0 : (this.deps.now ?? Date.now)();
    const batches: PendingBatch[] = [];
    for (const partitionData of topicData.partitionData) {
      if (partitionData.records === null) continue;
      if (namedTwice.has(partitionKey(topicData, partitionData.index))) {
        // Kafka keeps one of the copies (a map by partition) and answers once: the answer cannot
        // tell which one its log holds, so none is stored and followers get them inline.
        this.stats.partitionsNamedTwice++;
        continue;
      }
      const readable = readableBatches(partitionData.records);
      if (readable === undefined) {
        // A batch the WAL cannot read (magic 0/1, a Length below the v2 header, a batch cut
        // short): the broker judges the partition and answers as stock does (CORRUPT_MESSAGE,
        // INVALID_RECORD); nothing of it is copied, and the rest of the request is.
        this.stats.partitionsNotCopied++;
        continue;
      }
      for (const batch of readable) {
        const bytes = batch.bytes();
        // Stored already (in the producer's zone bucket): nothing to upload, nothing to confirm,
        // whatever our own store's health. Its object is paid for and none of ours would hold it,
        // so it neither feeds its budget group's rate nor waits for the group's mode.
        const stored = this.deps.storedElsewhere?.(info, topicData.topicId ?? topic, partitionData.index);
        if (stored === undefined) sealing?.observe(budgetMs, bytes.length, now);
        if (skip && stored === undefined) {
          this.stats.batchesNotCopiedStoreDegraded++;
          this.stats.bytesNotCopiedStoreDegraded += bytes.length;
          continue;
        }
        if (stored === undefined && !requiresStore && sealing?.mode(budgetMs, now) === 'inline') {
          // Not worth an object: followers replicate it as stock, nothing is uploaded.
          this.stats.batchesNotCopiedInlineMode++;
          this.stats.bytesNotCopiedInlineMode += bytes.length;
          continue;
        }
        const ahead = storeAhead && stored === undefined;
        let ticket: WalAppendTicket | undefined = stored && {
          durable: Promise.resolve(stored),
          confirm: () => undefined,
          reject: () => undefined,
          // In no object of ours: nothing of this sidecar's objects waits for it.
          group: Number.NaN,
          isPending: () => false,
        };
        try {
          ticket ??= this.deps.writer.append(
            { topicId: topicData.topicId, topicName: topic, partition: partitionData.index, batch: bytes },
            // Tentative until the broker's answer (or a follower's fetch) shows it appended the
            // batch, unless stored ahead (provenTopics): a Produce of a connection the broker has
            // not yet accepted for the topic never lands in the bucket.
            {
              budgetMs,
              lingerMs: settings.lingerMs,
              targetBytes: settings.targetBytes,
              requiresStore,
              tentative: !ahead,
            },
          );
        } catch (error) {
          // Not a batch the WAL can hold (e.g. an old magic): the broker judges it, and
          // followers get it inline. A client's bad input must not break the connection.
          this.stats.batchesNotCopied++;
          this.deps.log.debug({ topic, error: (error as Error).message }, 'batch not copied to the WAL');
          continue;
        }
        if (stored !== undefined) this.stats.batchesStoredElsewhere++;
        else {
          this.stats.batchesCopied++;
          this.stats.bytesCopied += bytes.length;
          if (ahead) this.stats.batchesStoredAhead++;
        }
        if (settings.mode !== 'inline') this.deps.index?.add(topic, partitionData.index, bytes, ticket);
        batches.push({
          topic,
          topicId: topicData.topicId,
          responseTopicKey: topicData.topicId ?? topic,
          partition: partitionData.index,
          ticket,
          durableAck: settings.durableAck,
          // Followers of mode=inline topics get the bytes from the broker: nothing waits for the object.
          followersWait: settings.mode !== 'inline' && stored === undefined,
          lastOffsetDelta: batch.lastOffsetDelta,
          crc: batch.crc,
          recordCount: batch.recordCount,
          storedAhead: ahead,
          bytes: bytes.length,
        });
      }
    }
    return batches;
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer> {
    const copied = this.pending.get(info);
    if (!copied) return frame;
    this.pending.delete(info);
    this.deps.producerWaits?.answered(info, (this.deps.now ?? Date.now)());
    if (copied.deferred.length === 0) return this.release(info, frame, copied.batches, copied.connection);
    return Promise.all(copied.deferred).then((more) =>
      this.release(info, frame, copied.batches.concat(...more), copied.connection),
    );
  }

  private release(
    info: RequestInfo,
    frame: Buffer,
    batches: PendingBatch[],
    connection: FilterConnection | undefined,
  ): Buffer | Promise<Buffer> {
    if (batches.length === 0) return frame;
    const response = this.decodeResponse(info, frame);
    // The broker's answer decides what the WAL keeps: an appended partition's batches may be
    // stored now, a refused one's (ACL, quota, invalid records, unknown partition) never are
    // (unless stored ahead: counted, never referenced). It also decides which topics this
    // connection's next batches are stored ahead for: one refused partition withdraws its topic.
    const appended = new Set<string>();
    const refused = new Set<string>();
    for (const batch of batches) {
      if (answerFor(batch, response.body)?.errorCode === 0) {
        batch.ticket.confirm();
        appended.add(batch.topic);
      } else {
        batch.ticket.reject();
        refused.add(batch.topic);
        if (batch.storedAhead) {
          this.stats.batchesStoredAheadRefused++;
          this.stats.bytesStoredAheadRefused += batch.bytes;
        }
      }
    }
    if (connection !== undefined) {
      let proven = this.provenTopics.get(connection);
      for (const topic of appended) {
        if (refused.has(topic)) continue;
        if (proven === undefined) {
          proven = new Set();
          this.provenTopics.set(connection, proven);
        }
        proven.add(topic);
      }
      for (const topic of refused) proven?.delete(topic);
    }
    const mustWait = batches.filter((b) => b.durableAck);
    if (mustWait.length === 0) {
      for (const batch of batches) {
        batch.ticket.durable.then(
          (location) => this.publish(batch, location, response.body),
          () => undefined,
        );
      }
      return frame;
    }
    const started = performance.now();
    return Promise.allSettled(mustWait.map((b) => b.ticket.durable)).then(() =>
      this.releaseDurable(info, frame, batches, started, response),
    );
  }

  private decodeResponse(info: RequestInfo, frame: Buffer): { headerBytes: Buffer; body: ProduceResponse } {
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    const { headerLength } = decodeResponseHeader(
      payload,
      responseHeaderVersion(ApiKey.Produce, info.apiVersion)!,
    );
    return {
      headerBytes: payload.subarray(0, headerLength),
      body: decodeProduceResponse(payload.subarray(headerLength), info.apiVersion),
    };
  }

  /** Called when every durable-ack batch of the request has settled. */
  private async releaseDurable(
    info: RequestInfo,
    frame: Buffer,
    batches: PendingBatch[],
    started: number,
    response: { headerBytes: Buffer; body: ProduceResponse },
  ): Promise<Buffer> {
    const failed = new Set<string>();
    const objectKeys = channels.durableAck.hasSubscribers ? new Set<string>() : undefined;
    for (const batch of batches) {
      const outcome = await batch.ticket.durable.then(
        (location) => ({ location }),
        (error: Error) => ({ error }),
      );
      if ('location' in outcome) {
        this.publish(batch, outcome.location, response.body);
        objectKeys?.add(outcome.location.objectKey);
      } else if (batch.durableAck && answerFor(batch, response.body)?.errorCode === 0) {
        failed.add(`${batch.responseTopicKey}\u0000${batch.partition}`);
      }
    }
    this.stats.durableAckFailures += failed.size;
    const report = (outcome: ProduceDurableAckEvent['outcome'], failedPartitions: number) =>
      objectKeys &&
      channels.durableAck.publish({
        request: info,
        durationMs: performance.now() - started,
        outcome,
        batches: batches.length,
        failedPartitions,
        objectKeys: [...objectKeys],
      } satisfies ProduceDurableAckEvent);
    if (failed.size === 0) {
      report('stored', 0);
      return frame;
    }

    let rewritten = 0;
    for (const topic of response.body.responses) {
      const key = topic.topicId ?? topic.name ?? '';
      for (const partition of topic.partitionResponses) {
        if (!failed.has(`${key}\u0000${partition.index}`) || partition.errorCode !== 0) continue;
        partition.errorCode = ErrorCode.REQUEST_TIMED_OUT;
        partition.baseOffset = -1n;
        partition.logAppendTimeMs = -1n;
        if (info.apiVersion >= 8)
          partition.errorMessage = 'walproxy: the WAL object holding this batch could not be stored';
        rewritten++;
      }
    }
    this.stats.durableAckFailuresAfterAppend += rewritten;
    report('failed', rewritten);
    if (rewritten === 0) return frame;
    this.deps.log.warn(
      { partitions: rewritten },
      'WAL upload failed; answering REQUEST_TIMED_OUT for batches the broker appended (durable ack): a non-idempotent retry duplicates them',
    );
    const body = encodeProduceResponse(response.body, info.apiVersion);
    return encodeFrame(response.headerBytes, body);
  }

  private publish(batch: PendingBatch, location: WalLocation, response: ProduceResponse): void {
    const publisher = this.deps.publisher;
    if (!publisher) return;
    const partition = answerFor(batch, response);
    // Only batches the leader appended have offsets; a rejected batch stays in its object,
    // unindexed, until the object expires.
    if (partition?.errorCode !== 0 || partition.baseOffset < 0n) return;
    publisher.publish({
      store: location.store,
      objectKey: location.objectKey,
      objectSize: location.objectSize,
      topic: batch.topic,
      topicId: batch.topicId,
      partition: batch.partition,
      position: location.position,
      length: location.length,
      baseOffset: partition.baseOffset,
      lastOffset: partition.baseOffset + BigInt(batch.lastOffsetDelta),
      crc: batch.crc,
      recordCount: batch.recordCount,
      uploadedAtMs: location.uploadedAtMs,
    });
  }
}

/**
 * Every batch of a partition's records, or undefined when one of them is not a complete magic v2
 * batch: the partition is then the broker's alone to judge.
 */
function readableBatches(records: Buffer): RecordBatch[] | undefined {
  const batches: RecordBatch[] = [];
  try {
    for (const batch of recordBatches(records)) {
      if (batch.partial) return undefined;
      batches.push(batch);
    }
  } catch {
    return undefined;
  }
  return batches;
}

/** A partition of a request, by the topic's name (v3-12) or id (v13+) as the request gives it. */
function partitionKey(topicData: ProduceTopicData, partition: number): string {
  return `${topicData.name ?? topicData.topicId}\u0000${partition}`;
}

/** The partitions a request names more than once (in one topic entry, or in two entries of a topic). */
function partitionsNamedTwice(topicData: readonly ProduceTopicData[]): Set<string> {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const t of topicData) {
    for (const p of t.partitionData) {
      const key = partitionKey(t, p.index);
      if (seen.has(key)) twice.add(key);
      seen.add(key);
    }
  }
  return twice;
}

/** The broker's answer for the batch's partition. */
function answerFor(batch: PendingBatch, response: ProduceResponse) {
  const topic = response.responses.find((t) => (t.topicId ?? t.name) === batch.responseTopicKey);
  return topic?.partitionResponses.find((p) => p.index === batch.partition);
}
