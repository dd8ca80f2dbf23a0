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
  encodeProduceReference,
  encodeProduceRequest,
  encodeProduceResponse,
  type ProducePartitionData,
  type ProduceRequest,
  type ProduceResponse,
  peekProduceAcks,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { SASL_AUTHENTICATE, SASL_HANDSHAKE } from '../metadata/sasl-messages.js';
import type { TopicNames } from '../metadata/topic-names.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { StoreHealth } from '../store/store-health.js';
import type { TopicPolicy } from '../topics/topic-policy.js';
import type { WalAppendTicket, WalLocation, WalWriter } from '../wal/wal-writer.js';
import { ZONE_PRODUCE_CHANNELS, type ZoneProduceStoreEvent } from './channels.js';
import { PRODUCE_REFERENCE_VERSIONS } from './produce-fill.js';
import { type ProducerConnection, ProducerLogins } from './produce-logins.js';
import { Acceptances } from './zone-acceptances.js';
import type { ZoneDirectory } from './zone-directory.js';
import {
  AUTHORIZATION_ERRORS,
  neutralizeReferences,
  oneBatch,
  referenceRefusal,
} from './zone-produce-rules.js';
import {
  newZoneProduceStats,
  type ZoneProduceBytesReasons,
  type ZoneProduceStats,
} from './zone-produce-stats.js';

export const ZONE_PRODUCE_DEFAULTS = {
  /**
   * A store write that has not finished by then sends the request as bytes instead (the producer
   * is waiting; S3 Express answers in ~5 ms at p50, ~15 ms at p99) and marks the store degraded.
   */
  storeTimeoutMs: 1_000,
  /**
   * After a leader could not fill a reference, requests to it go as bytes for this long; after an
   * answer that may be either a missing fill or the producer's own bad batch, only that connection's.
   */
  fallbackMs: 30_000,
  /**
   * How long later requests of a topic wait for the answer to its first Produce on a connection
   * before deciding without it (that first one goes as bytes, and its answer decides).
   */
  acceptanceWaitMs: 10_000,
  /**
   * Acceptances remembered at most; the oldest go first (they are learnt again with one Produce
   * as bytes). The memory budget's floor: a sidecar passes its zone share (memory-budget.ts).
   */
  maxAccepted: 10_000,
} as const;

const storeChannel = channel(ZONE_PRODUCE_CHANNELS.store);

export interface ZoneProduceOptions {
  /** This sidecar's WAL writer: its own zone's bucket. */
  writer: WalWriter;
  /** The URL of that store, as references name it (normalized --wal-store-url). */
  storeUrl: string;
  policy: TopicPolicy;
  topicNames: TopicNames;
  /** While degraded, nothing is referenced. */
  health?: StoreHealth | undefined;
  directory: ZoneDirectory;
  storeTimeoutMs?: number;
  fallbackMs?: number;
  acceptanceWaitMs?: number;
  /** Acceptances remembered at most (the memory budget's zoneAcceptances). */
  maxAccepted?: number;
  now?: () => number;
  log: Logger;
}

interface Candidate {
  topicKey: string;
  partition: ProducePartitionData;
  ticket: WalAppendTicket;
  batch: Buffer;
}

interface RequestState {
  readonly connection: ProducerConnection;
  /** Each topic of the request (name, or id from v13, as the response names it) → its acceptance key. */
  acceptance: Map<string, string>;
  /** `${topicKey}\0${partition}` of the partitions sent as references. */
  referenced: Set<string>;
}

/**
 * The producer's zone side of zone-local produce (docs/zone-local.md), on a zone egress towards a
 * leader in another pod. For a topic set `zone.local`, once a leader has accepted the topic from
 * this producer (its first Produce of the topic through this sidecar goes as bytes, and the
 * broker's answer is the authorization: see ProducerConnection in produce-logins.ts for who "this producer" is), each
 * partition's batch is stored in this zone's bucket first (a WAL object sealed at once: the
 * producer is waiting) and the request goes on with a reference in its place
 * (shared/src/zone/produce-references.ts); the leader's sidecar fills it back (produce-fill.ts).
 * The client's connection is still end to end with the leader, so the broker judges everything
 * as on a direct connection.
 *
 * Never worse than stock: whatever cannot go by reference goes as the client's bytes — acks=0,
 * a producer's first Produce of a topic (a producer denied write never makes us store anything),
 * a degraded or failing store, a leader that could not fill a reference lately.
 */
export class ZoneProduce {
  readonly stats: ZoneProduceStats = newZoneProduceStats();
  private readonly logins = new ProducerLogins();
  private readonly acceptances: Acceptances;
  /** Leader id → until when its requests go as bytes. */
  private readonly fallbackUntil = new Map<number, number>();
  private readonly storeTimeoutMs: number;
  private readonly fallbackMs: number;
  private readonly now: () => number;

  constructor(private readonly options: ZoneProduceOptions) {
    this.storeTimeoutMs = options.storeTimeoutMs ?? ZONE_PRODUCE_DEFAULTS.storeTimeoutMs;
    this.fallbackMs = options.fallbackMs ?? ZONE_PRODUCE_DEFAULTS.fallbackMs;
    this.acceptances = new Acceptances(
      options.maxAccepted ?? ZONE_PRODUCE_DEFAULTS.maxAccepted,
      options.acceptanceWaitMs ?? ZONE_PRODUCE_DEFAULTS.acceptanceWaitMs,
    );
    this.now = options.now ?? Date.now;
  }

  /** The filter of the zone egress towards broker `leaderId`. */
  filterFor(leaderId: number): FrameFilter {
    const requests = new WeakMap<RequestInfo, RequestState>();
    const logins = new WeakMap<RequestInfo, ProducerConnection>();
    return {
      apiKeys: new Set([ApiKey.Produce, SASL_HANDSHAKE, SASL_AUTHENTICATE]),
      onRequest: (info, frame, connection) => {
        if (info.apiKey === ApiKey.Produce)
          return this.onRequest(leaderId, requests, info, frame, connection);
        const state = this.logins.stateOf(connection);
        this.logins.onRequest(info, frame, state);
        logins.set(info, state);
        return { action: 'forward', frame, expectResponse: true };
      },
      onResponse: (info, frame) => {
        if (info.apiKey === ApiKey.Produce) return this.onResponse(leaderId, requests, info, frame);
        const state = logins.get(info);
        if (state !== undefined) {
          logins.delete(info);
          this.logins.onAnswer(info, frame, state);
        }
        return frame;
      },
    };
  }

  /** Whether requests to `leaderId` go as bytes for now because it could not fill a reference. */
  inFallback(leaderId: number): boolean {
    const until = this.fallbackUntil.get(leaderId);
    if (until === undefined) return false;
    if (this.now() < until) return true;
    this.fallbackUntil.delete(leaderId);
    return false;
  }

  private onRequest(
    leaderId: number,
    requests: WeakMap<RequestInfo, RequestState>,
    info: RequestInfo,
    original: Buffer,
    connection: FilterConnection,
  ): RequestDecision | Promise<RequestDecision> {
    const payload = original.subarray(FRAME_SIZE_PREFIX_BYTES);
    const acks = peekProduceAcks(payload);
    const bytes = this.stats.batchesAsBytes;
    if (
      info.apiVersion < PRODUCE_REFERENCE_VERSIONS.min ||
      info.apiVersion > PRODUCE_REFERENCE_VERSIONS.max
    ) {
      bytes.unsupportedVersion++;
      return { action: 'forward', frame: original, expectResponse: acks !== 0 };
    }
    let header: { headerLength: number };
    let request: ProduceRequest;
    try {
      header = decodeRequestHeader(payload);
      request = decodeProduceRequest(payload.subarray(header.headerLength), info.apiVersion);
    } catch (error) {
      // As on the client ingress (produce-wal.ts): the codec is stricter than Kafka, and what it
      // refuses the broker judges, answering per partition as stock does (or closing the
      // connection). Nothing of it is stored. A client-sent reference inside it cannot be
      // neutralized, but no leader side fills it either: it reads requests with this same codec,
      // cannot read this one, and hands it to its broker as it came, which refuses the partition.
      this.stats.requestsNotDecoded++;
      this.options.log.debug(
        { error: (error as Error).message },
        'zone-local produce: Produce request not decoded; forwarded as sent',
      );
      return { action: 'forward', frame: original, expectResponse: acks !== 0 };
    }
    const { frame, neutralized } = neutralizeReferences(
      original,
      request.topicData.flatMap((t) => t.partitionData),
    );
    this.stats.clientReferencesNeutralized += neutralized;
    // Whatever goes on, references included, is built from the neutralized bytes.
    if (frame !== original) {
      request = decodeProduceRequest(
        frame.subarray(FRAME_SIZE_PREFIX_BYTES + header.headerLength),
        info.apiVersion,
      );
    }
    const asBytes: RequestDecision = { action: 'forward', frame, expectResponse: acks !== 0 };
    const partitions = request.topicData.reduce((n, t) => n + t.partitionData.length, 0);
    if (acks === 0) {
      bytes.acksZero += partitions;
      return asBytes;
    }
    const connectionState = this.logins.stateOf(connection);
    const requestState: RequestState = {
      connection: connectionState,
      acceptance: new Map(),
      referenced: new Set(),
    };
    requests.set(info, requestState);
    const headerBytes = frame.subarray(
      FRAME_SIZE_PREFIX_BYTES,
      FRAME_SIZE_PREFIX_BYTES + header.headerLength,
    );
    const decide = (identity: string): RequestDecision | Promise<RequestDecision> => {
      const outcome = this.classify(leaderId, request, identity, requestState);
      if ('waitFor' in outcome) return Promise.all(outcome.waitFor).then(() => decide(identity));
      if (outcome.candidates.length === 0) return asBytes;
      return this.reference(info, headerBytes, request, outcome.candidates, requestState, asBytes);
    };
    const start = (): RequestDecision | Promise<RequestDecision> => {
      const identity = this.logins.identityOf(connectionState);
      if (identity === undefined) {
        // A login the broker has not accepted (or refused): it would judge this request as
        // nobody's we know, and an unauthenticated client must not make us store anything.
        bytes.notAuthenticated += partitions;
        return asBytes;
      }
      return decide(identity);
    };
    if (connectionState.saslPending > 0) {
      // Pipelined behind a login the broker has not answered: the user it claims is not proven
      // yet. Decided once it is answered; the pipe holds this request (and the ones behind it)
      // meanwhile, within its buffering bound.
      this.stats.requestsHeldForLogin++;
      return this.logins.answered(connectionState).then(start);
    }
    return start();
  }

  /**
   * Which partitions go by reference, their batches handed to the writer; or, when a topic's first
   * answer on this connection is still awaited, what to wait for before deciding (the request is
   * then held: it goes by reference if the leader accepted the topic). Holding rather than sending
   * bytes keeps a pipelining producer's first requests off the zone link too.
   */
  private classify(
    leaderId: number,
    request: ProduceRequest,
    identity: string,
    state: RequestState,
  ): { candidates: Candidate[] } | { waitFor: Promise<unknown>[] } {
    const bytes = this.stats.batchesAsBytes;
    const leaderZone = this.options.directory.zoneOfNode(leaderId);
    const blocked: keyof ZoneProduceBytesReasons | undefined =
      leaderZone === this.options.directory.ownZone
        ? 'sameZone'
        : this.inFallback(leaderId)
          ? 'leaderFallback'
          : this.now() < state.connection.bytesUntil
            ? 'connectionFallback'
            : this.options.health !== undefined && !this.options.health.usable
              ? 'storeUnusable'
              : undefined;
    const topics = request.topicData.map((topic) => {
      const topicKey = topic.topicId ?? topic.name ?? '';
      const name =
        topic.name ??
        (topic.topicId !== undefined ? this.options.topicNames.nameOf(topic.topicId) : undefined);
      const settings = name === undefined ? undefined : this.options.policy.settingsFor(name);
      const wanted = settings?.zoneLocal === true && blocked === undefined;
      const key = `${identity}\u0000${name ?? topicKey}`;
      state.acceptance.set(topicKey, key);
      return { topic, topicKey, key, name, settings, wanted };
    });
    const waitFor = topics
      .filter((t) => t.wanted && !this.acceptances.has(t.key))
      .map((t) => this.acceptances.answerOf(t.key))
      .filter((p) => p !== undefined);
    if (waitFor.length > 0) return { waitFor };

    const candidates: Candidate[] = [];
    for (const { topic, topicKey, key, name, settings, wanted } of topics) {
      const first = wanted && !this.acceptances.has(key);
      // This request asks the leader first: its answer says whether the topic may go by reference.
      if (first) this.acceptances.ask(key);
      for (const partition of topic.partitionData) {
        const reason: keyof ZoneProduceBytesReasons | undefined =
          name === undefined
            ? 'unknownTopicId'
            : !settings?.zoneLocal
              ? 'notZoneLocal'
              : (blocked ?? (first ? 'notAcceptedYet' : undefined));
        const batch = reason === undefined ? oneBatch(partition.records) : undefined;
        if (reason !== undefined || batch === undefined) {
          bytes[reason ?? 'notOneBatch']++;
          continue;
        }
        let ticket: WalAppendTicket;
        try {
          // Sealed at once: the producer is waiting for this object, not for more batches. Stored
          // whatever the sealing policy would say of its size: what it saves is the produce's hop
          // across zones, which the policy's replication prices do not see.
          ticket = this.options.writer.append(
            { topicId: topic.topicId, topicName: name!, partition: partition.index, batch },
            {
              budgetMs: settings!.latencyBudgetMs,
              lingerMs: 0,
              targetBytes: settings!.targetBytes,
              requiresStore: true,
            },
          );
        } catch {
          bytes.storeUnusable++;
          continue;
        }
        candidates.push({ topicKey, partition, ticket, batch });
      }
    }
    return { candidates };
  }

  /** Waits for the batches' store write, then forwards the request with references in their place. */
  private async reference(
    info: RequestInfo,
    headerBytes: Buffer,
    request: ProduceRequest,
    candidates: Candidate[],
    state: RequestState,
    asBytes: RequestDecision,
  ): Promise<RequestDecision> {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    let locations: WalLocation[];
    let stored = false;
    try {
      locations = await Promise.race([
        Promise.all(candidates.map((c) => c.ticket.durable)),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`not stored within ${this.storeTimeoutMs} ms`)),
            this.storeTimeoutMs,
          );
        }),
      ]);
      stored = true;
    } catch (error) {
      // The store is failing or slow: the producer gets the stock path at once.
      this.stats.batchesAsBytes.storeFailed += candidates.length;
      this.options.health?.markDegraded(`zone-local produce: ${(error as Error).message}`);
      this.options.log.debug(
        { error: (error as Error).message },
        'zone-local produce: store write failed, sending bytes',
      );
      return asBytes;
    } finally {
      clearTimeout(timer);
      const ms = performance.now() - started;
      this.stats.storeMsTotal += ms;
      this.stats.storeCount++;
      this.stats.storeMsMax = Math.max(this.stats.storeMsMax, ms);
      if (storeChannel.hasSubscribers) {
        storeChannel.publish({
          batches: candidates.length,
          bytes: candidates.reduce((n, c) => n + c.batch.length, 0),
          durationMs: ms,
          outcome: stored ? 'stored' : 'failed',
        } satisfies ZoneProduceStoreEvent);
      }
    }
    this.options.health?.markHealthy('zone-local produce stored');
    for (const [i, c] of candidates.entries()) {
      const location = locations[i]!;
      c.partition.records = encodeProduceReference(c.batch, {
        store: this.options.storeUrl,
        objectKey: location.objectKey,
        position: location.position,
        objectSize: location.objectSize,
      });
      state.referenced.add(`${c.topicKey}\u0000${c.partition.index}`);
      this.stats.bytesReferenced += c.batch.length;
    }
    this.stats.requestsReferenced++;
    this.stats.batchesReferenced += candidates.length;
    return {
      action: 'forward',
      frame: encodeFrame(headerBytes, encodeProduceRequest(request, info.apiVersion)),
      expectResponse: true,
    };
  }

  private onResponse(
    leaderId: number,
    requests: WeakMap<RequestInfo, RequestState>,
    info: RequestInfo,
    frame: Buffer,
  ): Buffer {
    const state = requests.get(info);
    if (state === undefined) return frame;
    requests.delete(info);
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    let headerLength: number;
    let response: ProduceResponse;
    try {
      ({ headerLength } = decodeResponseHeader(
        payload,
        responseHeaderVersion(ApiKey.Produce, info.apiVersion)!,
      ));
      response = decodeProduceResponse(payload.subarray(headerLength), info.apiVersion);
    } catch (error) {
      // The broker's answer goes to the client as it came (stock); nothing is learnt from it, and
      // requests held for it decide without it (as bytes, unless the topic was accepted before).
      this.options.log.debug(
        { error: (error as Error).message },
        'zone-local produce: Produce response not decoded; forwarded as sent',
      );
      for (const key of state.acceptance.values()) this.acceptances.answered(key);
      return frame;
    }
    const rewritten = this.learn(leaderId, info.apiVersion, state, response);
    if (!rewritten) return frame;
    return encodeFrame(payload.subarray(0, headerLength), encodeProduceResponse(response, info.apiVersion));
  }

  /** Learns from the leader's answer; returns whether a partition's answer was changed. */
  private learn(leaderId: number, version: number, state: RequestState, response: ProduceResponse): boolean {
    let changed = false;
    let leaderFallback = false;
    let connectionFallback = false;
    const referenced = (topicKey: string, p: { index: number }) =>
      state.referenced.has(`${topicKey}\u0000${p.index}`);
    // A referenced partition appended: the leader side of this connection fills references, so a
    // refusal of another one is of the batch itself, whatever the Produce version.
    if (
      response.responses.some((t) =>
        t.partitionResponses.some((p) => p.errorCode === 0 && referenced(t.topicId ?? t.name ?? '', p)),
      )
    )
      state.connection.filled = true;
    for (const topic of response.responses) {
      const topicKey = topic.topicId ?? topic.name ?? '';
      const key = state.acceptance.get(topicKey);
      if (key !== undefined) {
        if (topic.partitionResponses.every((p) => p.errorCode === 0)) {
          this.acceptances.accept(key);
        } else if (topic.partitionResponses.some((p) => AUTHORIZATION_ERRORS.has(p.errorCode))) {
          // A revoked ACL: the next batches of this topic wait for the leader's word again.
          this.acceptances.revoke(key);
        }
        // Requests held for this answer decide now: by reference if it accepted the topic.
        this.acceptances.answered(key);
      }
      for (const p of topic.partitionResponses) {
        if (!referenced(topicKey, p)) continue;
        // A fill failure (the leader side's answer, every partition): a store or configuration
        // matter, never one producer's batch (only CRC-valid batches are referenced), so the
        // leader gets bytes from everyone for a while.
        if (p.errorCode === ErrorCode.NOT_ENOUGH_REPLICAS) leaderFallback = true;
        else {
          const refusal = referenceRefusal(version, p.errorCode, p.errorMessage, state.connection.filled);
          if (refusal === undefined) continue;
          // The broker may have got the reference unfilled (a leader side without zone-local
          // produce: an older walproxy, or none) and refused it without appending: retriable,
          // and the retry goes as bytes, which the broker then judges as stock.
          p.errorCode = ErrorCode.NOT_ENOUGH_REPLICAS;
          if (version >= 8)
            p.errorMessage = 'walproxy: the leader did not take a zone-local reference; not appended, retry';
          this.stats.refusalsRewritten++;
          changed = true;
          if (refusal === 'unfilled') leaderFallback = true;
          else connectionFallback = true;
        }
      }
    }
    if (leaderFallback) {
      if (!this.inFallback(leaderId)) {
        this.stats.fallbacksStarted++;
        this.options.log.warn(
          { leaderId, forMs: this.fallbackMs },
          'zone-local produce: the leader could not fill a reference; sending it bytes for a while',
        );
      }
      this.fallbackUntil.set(leaderId, this.now() + this.fallbackMs);
    } else if (connectionFallback) {
      // Before Produce v8 nothing tells an unfilled reference from the producer's own bad batch
      // (INVALID_RECORD / CORRUPT_MESSAGE, no message): only this connection goes to bytes, so a
      // bad batch costs its own producer one retry and nobody else anything.
      if (this.now() >= state.connection.bytesUntil) this.stats.connectionFallbacksStarted++;
      state.connection.bytesUntil = this.now() + this.fallbackMs;
    }
    return changed;
  }
}
