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
  isProduceReference,
  type ProducePartitionData,
  type ProduceRequest,
  type ProduceResponse,
  peekProduceAcks,
  recordBatchAt,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import {
  decodeSaslAuthenticateRequest,
  decodeSaslAuthenticateResponse,
  decodeSaslHandshakeRequest,
  decodeSaslHandshakeResponse,
  SASL_AUTHENTICATE,
  SASL_HANDSHAKE,
} from '../metadata/sasl-messages.js';
import type { TopicNames } from '../metadata/topic-names.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';
import type { StoreHealth } from '../store/store-health.js';
import type { TopicPolicy } from '../topics/topic-policy.js';
import type { WalAppendTicket, WalLocation, WalWriter } from '../wal/wal-writer.js';
import { PRODUCE_REFERENCE_VERSIONS } from './produce-fill.js';
import { saslUsername } from './sasl-identity.js';
import type { ZoneDirectory } from './zone-directory.js';

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
} as const;

/**
 * The magic byte a client-sent reference is turned into before it leaves for a leader's zone
 * ingress: still not a Kafka magic (the broker refuses the partition exactly as it would have),
 * but no leader side ever fills it. Only this sidecar writes references.
 */
const NEUTRALIZED_MAGIC = 0x58;
const MAGIC_OFFSET = 16;

/** Why a partition's batch went to the leader as bytes. */
export interface ZoneProduceBytesReasons {
  /** The topic is not `zone.local`. */
  notZoneLocal: number;
  /** Produce v13 named the topic by an id this sidecar's broker has not named yet (a refresh is under way). */
  unknownTopicId: number;
  /** The connection's first Produce of the topic, or the last one was refused: the leader decides first. */
  notAcceptedYet: number;
  /** acks=0: no answer could tell the producer to retry. */
  acksZero: number;
  /** Not exactly one complete, CRC-valid magic v2 batch: the broker judges it as sent. */
  notOneBatch: number;
  /** The WAL store is degraded (StoreHealth), or refused the batch. */
  storeUnusable: number;
  /** The store write failed or took longer than storeTimeoutMs. */
  storeFailed: number;
  /** The leader could not fill a reference lately: bytes for fallbackMs. */
  leaderFallback: number;
  /**
   * This connection got a refusal that may have been of an unfilled reference (Produce < v8 says
   * no more than INVALID_RECORD / CORRUPT_MESSAGE): its requests go as bytes for fallbackMs.
   */
  connectionFallback: number;
  /**
   * The connection's SASL login is not (yet) accepted by the broker, or was refused: who the
   * broker will authorize is not known, so nothing of it is stored.
   */
  notAuthenticated: number;
  /** The leader is in our own zone: its bytes cross no zone. */
  sameZone: number;
  /** Produce versions outside 3–13. */
  unsupportedVersion: number;
}

export interface ZoneProduceStats {
  requestsReferenced: number;
  batchesReferenced: number;
  /** Bytes of the batches sent as references: what did not cross the zone link. */
  bytesReferenced: number;
  batchesAsBytes: ZoneProduceBytesReasons;
  /** Leaders that answered a reference as not filled (NOT_ENOUGH_REPLICAS, or INVALID_RECORD from a broker that got it). */
  fallbacksStarted: number;
  /** Connections that went to bytes after an INVALID_RECORD / CORRUPT_MESSAGE that may have been an unfilled reference. */
  connectionFallbacksStarted: number;
  /** Produce requests the codec could not read: forwarded as the client sent them, for the broker to judge. */
  requestsNotDecoded: number;
  /** Produce requests decided only once the connection's pending SASL login was answered. */
  requestsHeldForLogin: number;
  /** INVALID_RECORD / CORRUPT_MESSAGE for an unfilled reference, answered NOT_ENOUGH_REPLICAS so the producer retries. */
  refusalsRewritten: number;
  /** Client-sent partitions that looked like references, changed so that no leader ever fills them. */
  clientReferencesNeutralized: number;
  /** Wait for the store write of a referenced request: sum, count and maximum, milliseconds. */
  storeMsTotal: number;
  storeCount: number;
  storeMsMax: number;
}

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
  now?: () => number;
  log: Logger;
}

/**
 * Whose ACLs the broker applies on a connection, as far as this sidecar can tell, and only once the
 * broker said so: the user of a SASL PLAIN or SCRAM login once the broker answered its last
 * SaslAuthenticate without error, `anonymous` for a connection that never began a login (behind
 * the sidecar the broker's listener is PLAINTEXT: every such client is User:ANONYMOUS), and the
 * connection itself for mechanisms whose identity the sidecar cannot read (GSSAPI, OAUTHBEARER).
 * A login's first message only claims a user; a Produce pipelined behind it is decided once the
 * broker answered the login (a wrong password: the broker refuses it and closes the connection,
 * and nothing of that connection is stored).
 */
interface ConnectionState {
  readonly id: number;
  /** The mechanism of the connection's SASL login; `?` for a SASL request that named none readable. */
  mechanism?: string;
  /** The user the login's first message claims: trusted only once the broker accepted the login. */
  claimedUser?: string;
  /** The user of a login the broker accepted. */
  user?: string;
  /** The broker answered the login's last step without error (the login is over and succeeded). */
  authenticated: boolean;
  /** SaslAuthenticate steps of the current login the broker answered without error. */
  steps: number;
  /** The broker refused the connection's SASL handshake or login: nothing of it is ever stored. */
  refused: boolean;
  /** SaslHandshake / SaslAuthenticate requests not answered yet. */
  saslPending: number;
  /** Settled when saslPending drops to 0: the Produce requests held behind the login decide then. */
  saslSettled?: Awaiting;
  /**
   * The leader side of this connection filled a reference (a referenced partition was appended):
   * an INVALID_RECORD / CORRUPT_MESSAGE for a referenced partition is then the batch's own. The
   * connection is end to end with one leader-side process, so this holds for its whole life.
   */
  filled: boolean;
  /** Until when this connection's requests go as bytes (connectionFallback). */
  bytesUntil: number;
}

/** How many successful SaslAuthenticate steps complete a login, for the mechanisms this sidecar reads. */
const LOGIN_STEPS: Readonly<Record<string, number>> = {
  // RFC 4616: one message, one answer.
  PLAIN: 1,
  // RFC 5802: client-first → server-first (error code 0, nothing proven yet), client-final →
  // server-final: only the second answer says the password was right.
  'SCRAM-SHA-256': 2,
  'SCRAM-SHA-512': 2,
};

interface Awaiting {
  promise: Promise<void>;
  settle(): void;
}

interface Candidate {
  topicKey: string;
  partition: ProducePartitionData;
  ticket: WalAppendTicket;
  batch: Buffer;
}

interface RequestState {
  readonly connection: ConnectionState;
  /** Each topic of the request (name, or id from v13, as the response names it) → its acceptance key. */
  acceptance: Map<string, string>;
  /** `${topicKey}\0${partition}` of the partitions sent as references. */
  referenced: Set<string>;
}

/** Acceptances remembered at most; the oldest go first (they are learnt again with one Produce as bytes). */
const MAX_ACCEPTED = 10_000;

/**
 * The producer's zone side of zone-local produce (docs/zone-local.md), on a zone egress towards a
 * leader in another pod. For a topic set `zone.local`, once a leader has accepted the topic from
 * this producer (its first Produce of the topic through this sidecar goes as bytes, and the
 * broker's answer is the authorization: see ConnectionState for who "this producer" is), each
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
  readonly stats: ZoneProduceStats = {
    requestsReferenced: 0,
    batchesReferenced: 0,
    bytesReferenced: 0,
    batchesAsBytes: {
      notZoneLocal: 0,
      unknownTopicId: 0,
      notAcceptedYet: 0,
      acksZero: 0,
      notOneBatch: 0,
      storeUnusable: 0,
      storeFailed: 0,
      leaderFallback: 0,
      connectionFallback: 0,
      notAuthenticated: 0,
      sameZone: 0,
      unsupportedVersion: 0,
    },
    fallbacksStarted: 0,
    connectionFallbacksStarted: 0,
    requestsNotDecoded: 0,
    requestsHeldForLogin: 0,
    refusalsRewritten: 0,
    clientReferencesNeutralized: 0,
    storeMsTotal: 0,
    storeCount: 0,
    storeMsMax: 0,
  };
  private readonly connections = new WeakMap<FilterConnection, ConnectionState>();
  private nextConnectionId = 0;
  /** `${identity}\0${topic}` a leader answered without error, oldest first. */
  private readonly accepted = new Set<string>();
  /** Keys whose first Produce is not answered yet: later ones wait for that answer. */
  private readonly awaiting = new Map<string, Awaiting>();
  /** Leader id → until when its requests go as bytes. */
  private readonly fallbackUntil = new Map<number, number>();
  private readonly storeTimeoutMs: number;
  private readonly fallbackMs: number;
  private readonly acceptanceWaitMs: number;
  private readonly now: () => number;

  constructor(private readonly options: ZoneProduceOptions) {
    this.storeTimeoutMs = options.storeTimeoutMs ?? ZONE_PRODUCE_DEFAULTS.storeTimeoutMs;
    this.fallbackMs = options.fallbackMs ?? ZONE_PRODUCE_DEFAULTS.fallbackMs;
    this.acceptanceWaitMs = options.acceptanceWaitMs ?? ZONE_PRODUCE_DEFAULTS.acceptanceWaitMs;
    this.now = options.now ?? Date.now;
  }

  /** The filter of the zone egress towards broker `leaderId`. */
  filterFor(leaderId: number): FrameFilter {
    const requests = new WeakMap<RequestInfo, RequestState>();
    const logins = new WeakMap<RequestInfo, ConnectionState>();
    return {
      apiKeys: new Set([ApiKey.Produce, SASL_HANDSHAKE, SASL_AUTHENTICATE]),
      onRequest: (info, frame, connection) => {
        if (info.apiKey === ApiKey.Produce)
          return this.onRequest(leaderId, requests, info, frame, connection);
        const state = this.connectionState(connection);
        this.onSasl(info, frame, state);
        logins.set(info, state);
        return { action: 'forward', frame, expectResponse: true };
      },
      onResponse: (info, frame) => {
        if (info.apiKey === ApiKey.Produce) return this.onResponse(leaderId, requests, info, frame);
        const state = logins.get(info);
        if (state !== undefined) {
          logins.delete(info);
          this.onSaslAnswer(info, frame, state);
        }
        return frame;
      },
    };
  }

  private connectionState(connection: FilterConnection): ConnectionState {
    let state = this.connections.get(connection);
    if (state === undefined) {
      state = {
        id: this.nextConnectionId++,
        authenticated: false,
        steps: 0,
        refused: false,
        saslPending: 0,
        filled: false,
        bytesUntil: 0,
      };
      this.connections.set(connection, state);
    }
    return state;
  }

  /**
   * A SASL request on its way to the broker: the connection is no longer anonymous, its Produce
   * requests wait for the answer, and a handshake (a login, or a KIP-368 re-authentication) starts
   * a new login whose user is only claimed so far.
   */
  private onSasl(info: RequestInfo, frame: Buffer, state: ConnectionState): void {
    state.saslPending++;
    state.mechanism ??= '?';
    if (info.apiKey === SASL_HANDSHAKE) {
      state.mechanism = '?';
      state.claimedUser = undefined;
      state.user = undefined;
      state.authenticated = false;
      state.steps = 0;
    }
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    try {
      const { headerLength } = decodeRequestHeader(payload);
      const body = payload.subarray(headerLength);
      if (info.apiKey === SASL_HANDSHAKE) state.mechanism = decodeSaslHandshakeRequest(body, info.apiVersion);
      else if (state.steps === 0)
        state.claimedUser ??= saslUsername(
          state.mechanism,
          decodeSaslAuthenticateRequest(body, info.apiVersion),
        );
    } catch {
      // Not ours to judge: the broker answers a malformed login; the connection stays unnamed.
    }
  }

  /** The broker's answer to a SASL request: the login goes on, succeeded, or was refused. */
  private onSaslAnswer(info: RequestInfo, frame: Buffer, state: ConnectionState): void {
    if (saslRefused(info, frame)) {
      // The broker closes the connection (SaslServerAuthenticator); nothing of it is stored.
      state.refused = true;
      state.authenticated = false;
      state.user = undefined;
    } else if (info.apiKey === SASL_AUTHENTICATE) {
      state.steps++;
      // A mechanism whose identity we cannot read keys acceptances by the connection alone, so
      // only the broker's own answer to a Produce on it can ever let its batches be stored:
      // "authenticated" after any accepted step is then safe, whatever the number of steps.
      if (state.steps >= (LOGIN_STEPS[state.mechanism ?? '?'] ?? 1)) {
        state.authenticated = true;
        state.user = state.claimedUser;
      }
    }
    if (--state.saslPending === 0 && state.saslSettled !== undefined) {
      const settled = state.saslSettled;
      state.saslSettled = undefined;
      settled.settle();
    }
  }

  /** Settled once every SASL request of the connection sent so far is answered. */
  private saslAnswered(state: ConnectionState): Promise<void> {
    if (state.saslSettled === undefined) {
      let settle!: () => void;
      const promise = new Promise<void>((resolve) => {
        settle = resolve;
      });
      state.saslSettled = { promise, settle };
    }
    return state.saslSettled.promise;
  }

  /**
   * Who the broker authorizes on this connection, as a key for what it accepted; undefined while
   * that is not known (a login not over) or after the broker refused the login.
   */
  private identityOf(state: ConnectionState): string | undefined {
    if (state.refused) return undefined;
    if (state.mechanism === undefined) return 'anonymous';
    if (!state.authenticated) return undefined;
    return state.user !== undefined ? `user:${state.user}` : `connection:${state.id}`;
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
    const frame = this.neutralized(
      original,
      request.topicData.flatMap((t) => t.partitionData),
    );
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
    const connectionState = this.connectionState(connection);
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
      const identity = this.identityOf(connectionState);
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
      return this.saslAnswered(connectionState).then(start);
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
      .filter((t) => t.wanted && !this.accepted.has(t.key))
      .map((t) => this.awaiting.get(t.key)?.promise)
      .filter((p) => p !== undefined);
    if (waitFor.length > 0) return { waitFor };

    const candidates: Candidate[] = [];
    for (const { topic, topicKey, key, name, settings, wanted } of topics) {
      const first = wanted && !this.accepted.has(key);
      // This request asks the leader first: its answer says whether the topic may go by reference.
      if (first) this.awaiting.set(key, this.awaitAnswer(key));
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

  /** Settled by the leader's next answer for the key's topic, or after a while anyway. */
  private awaitAnswer(key: string): Awaiting {
    let settle!: () => void;
    const promise = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const timer = setTimeout(() => awaiting.settle(), this.acceptanceWaitMs);
    timer.unref();
    const awaiting: Awaiting = {
      promise,
      settle: () => {
        clearTimeout(timer);
        if (this.awaiting.get(key) === awaiting) this.awaiting.delete(key);
        settle();
      },
    };
    return awaiting;
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
      for (const key of state.acceptance.values()) this.awaiting.get(key)?.settle();
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
          this.accepted.delete(key);
          this.accepted.add(key);
          if (this.accepted.size > MAX_ACCEPTED) this.accepted.delete(this.accepted.values().next().value!);
        } else if (topic.partitionResponses.some((p) => AUTHORIZATION_ERRORS.has(p.errorCode))) {
          // A revoked ACL: the next batches of this topic wait for the leader's word again.
          this.accepted.delete(key);
        }
        // Requests held for this answer decide now: by reference if it accepted the topic.
        this.awaiting.get(key)?.settle();
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

  /** The frame, with the magic of any client-sent reference changed so that no leader fills it. */
  private neutralized(frame: Buffer, partitions: ProducePartitionData[]): Buffer {
    let out = frame;
    for (const partition of partitions) {
      if (!isProduceReference(partition.records)) continue;
      if (out === frame) out = Buffer.from(frame);
      out[partition.records.byteOffset - frame.byteOffset + MAGIC_OFFSET] = NEUTRALIZED_MAGIC;
      this.stats.clientReferencesNeutralized++;
    }
    return out;
  }
}

const AUTHORIZATION_ERRORS: ReadonlySet<number> = new Set([
  ErrorCode.TOPIC_AUTHORIZATION_FAILED,
  ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
  ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
]);

/**
 * Whether the broker's answer to a SASL request refuses the handshake or the login (or cannot be
 * read: then nothing of the connection is trusted either).
 */
function saslRefused(info: RequestInfo, frame: Buffer): boolean {
  try {
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    const { headerLength } = decodeResponseHeader(
      payload,
      responseHeaderVersion(info.apiKey, info.apiVersion)!,
    );
    const body = payload.subarray(headerLength);
    const errorCode =
      info.apiKey === SASL_HANDSHAKE
        ? decodeSaslHandshakeResponse(body, info.apiVersion).errorCode
        : decodeSaslAuthenticateResponse(body, info.apiVersion).errorCode;
    return errorCode !== 0;
  } catch {
    return true;
  }
}

/**
 * Whether the broker's refusal of a referenced partition may be of a reference nobody filled:
 * - `unfilled`: certainly (from v8 the magic check, ProduceRequest.validateRecords, says "magic"
 *   in its message; a filled batch is magic 2), so every producer of that leader would meet it;
 * - `maybe`: before v8 INVALID_RECORD / CORRUPT_MESSAGE carry no message, and the producer's own
 *   batch may be what the broker refused;
 * - undefined: the batch's own refusal, answered as stock (the leader side is known to fill).
 */
function referenceRefusal(
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
function oneBatch(records: Buffer | null): Buffer | undefined {
  if (records === null) return undefined;
  try {
    const batch = recordBatchAt(records, 0);
    return !batch.partial && batch.size === records.length && batch.isCrcValid() ? records : undefined;
  } catch {
    return undefined;
  }
}
