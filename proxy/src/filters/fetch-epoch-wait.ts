// Follower side, on the egress listener: a partition whose new leader has not yet applied its own
// leader change is asked again in a few milliseconds, not a second later (issue #24,
// docs/operations.md "Rolling restarts").
//
// When leaderships move (a broker fenced by its stopping sidecar, a controlled shutdown), every
// broker applies the change from the metadata log on its own. A follower that applies it before
// the new leader fetches from a broker that does not yet know it leads: the broker answers the
// partition UNKNOWN_LEADER_EPOCH, and Kafka's fetcher sets the partition aside for
// replica.fetch.backoff.ms (1 s by default) — and while the partition is absent from its fetches,
// the new leader's high watermark, and every acks=all produce waiting on it, stand still. Measured
// on the e2e cluster (docs/operations.md): the new leader took 50-130 ms to apply, a follower's
// fetch came inside that window in most sidecar restarts, and acks stalled 1.0-2.4 s where
// stock's restarts took ~0.2 s.
//
// This filter holds such a response and asks the leader again for those partitions alone, every
// EPOCH_WAIT_RETRY_MS, with a sessionless replica fetch of its own on the same connection (the
// follower's partition fields and replica id as it sent them, max wait 0); once the leader answers
// them without UNKNOWN_LEADER_EPOCH, their answers replace the errors and the response goes on.
// The follower gets the leader's own answer, only later: its records, high watermark and diverging
// epoch exactly as the leader wrote them for the offset the follower asked. Its fetch session is
// not touched (the extra fetch has none), and its next incremental fetch carries the partition's
// new offset as any changed partition. After EPOCH_WAIT_MAX_MS (the default
// replica.fetch.backoff.ms) without such an answer, or when a re-ask cannot be made or read, the
// response goes on as the broker wrote it: stock behaviour, counted.
import {
  ApiKey,
  apiKeyInfo,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeFetchRequest,
  encodeFetchResponse,
  encodeFrame,
  encodeRequestHeader,
  type FetchRequest,
  type FetchRequestTopic,
  type FetchResponse,
  type FetchResponsePartition,
  responseHeaderVersion,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';

/** Kafka's UNKNOWN_LEADER_EPOCH: the request's leader epoch is newer than the broker knows. */
export const UNKNOWN_LEADER_EPOCH = 75;
/** The pause before each re-ask: the leader is applying a metadata change, tens of milliseconds. */
export const EPOCH_WAIT_RETRY_MS = 20;
/** How long a response is held at most: Kafka's default replica.fetch.backoff.ms. */
export const EPOCH_WAIT_MAX_MS = 1_000;
/** Fetch sessions (KIP-227): session id 0 with epoch -1 is a full fetch that opens none. */
const NO_SESSION = { sessionId: 0, sessionEpoch: -1 } as const;

const FETCH_DECODES = apiKeyInfo(ApiKey.Fetch)!.decodes!;

export interface FetchEpochWaitStats {
  /** Partitions answered UNKNOWN_LEADER_EPOCH and delivered with the leader's later answer. */
  partitionsAnsweredLater: number;
  /** Re-asks sent (each for every waiting partition of one response). */
  reasks: number;
  /** Responses passed on with the error as the broker wrote it, and why. */
  passed: { waitedLongEnough: number; notAsked: number; reaskFailed: number };
}

export interface FetchEpochWaitOptions {
  log: Logger;
  now?: () => number;
  retryMs?: number;
  maxWaitMs?: number;
  /** Injectable for tests: resolves after `ms`. */
  sleep?: (ms: number) => Promise<void>;
}

/** What a request leaves for its response: its frame as sent, and its connection. */
interface Sent {
  readonly frame: Buffer;
  readonly connection: FilterConnection;
}

/** A follower's fetch, decoded for a re-ask. */
interface Asked {
  readonly clientId: string | null;
  readonly request: FetchRequest;
  readonly connection: FilterConnection;
}

const sameTopic = (a: { topicId?: string | undefined; topic?: string | undefined }, b: typeof a) =>
  a.topicId !== undefined ? a.topicId === b.topicId : a.topic === b.topic;

export class FetchEpochWaitFilter implements FrameFilter {
  readonly apiKeys: ReadonlySet<number> = new Set<number>([ApiKey.Fetch]);
  readonly stats: FetchEpochWaitStats = {
    partitionsAnsweredLater: 0,
    reasks: 0,
    passed: { waitedLongEnough: 0, notAsked: 0, reaskFailed: 0 },
  };
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #retryMs: number;
  readonly #maxWaitMs: number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #sent = new WeakMap<RequestInfo, Sent>();
  /** walproxy's own correlation ids: negative, apart from the broker fence's (controller-tap.ts). */
  #nextCorrelationId = -0x20000000;

  constructor(options: FetchEpochWaitOptions) {
    this.#log = options.log;
    this.#now = options.now ?? (() => performance.now());
    this.#retryMs = options.retryMs ?? EPOCH_WAIT_RETRY_MS;
    this.#maxWaitMs = options.maxWaitMs ?? EPOCH_WAIT_MAX_MS;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  onRequest(info: RequestInfo, frame: Buffer, connection: FilterConnection): RequestDecision {
    // Kept as sent, decoded only if its answer has a partition to re-ask (a leader change): every
    // other fetch costs this filter nothing but its answer's decode.
    if (
      info.apiVersion >= FETCH_DECODES.min &&
      info.apiVersion <= FETCH_DECODES.max &&
      connection.sendUpstream !== undefined
    )
      this.#sent.set(info, { frame, connection });
    return { action: 'forward', frame, expectResponse: true };
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer | Promise<Buffer> {
    const sent = this.#sent.get(info);
    if (sent === undefined) return frame;
    this.#sent.delete(info);
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    let headerLength: number;
    let response: FetchResponse;
    try {
      headerLength = decodeResponseHeader(
        payload,
        responseHeaderVersion(ApiKey.Fetch, info.apiVersion)!,
      ).headerLength;
      response = decodeFetchResponse(payload.subarray(headerLength), info.apiVersion);
    } catch {
      // Not ours to judge (fetch-fill.ts says why such answers pass on as sent).
      return frame;
    }
    if (response.errorCode) return frame;
    if (!response.responses.some((t) => t.partitions.some((p) => p.errorCode === UNKNOWN_LEADER_EPOCH)))
      return frame;
    const asked = followerFetch(sent, info.apiVersion);
    // Only a follower's fetch (a replica id) is re-asked; one the codec cannot read, the broker judged.
    if (asked === undefined) return frame;
    const waiting = this.#waitingPartitions(response, asked.request);
    if (waiting === undefined) return frame;
    if (waiting.topics.length === 0) {
      this.stats.passed.notAsked++;
      this.#log.info(
        { reason: 'a partition the request did not carry' },
        'UNKNOWN_LEADER_EPOCH passed on as the broker wrote it: the follower backs off replica.fetch.backoff.ms',
      );
      return frame;
    }
    return this.#askAgain(info, asked, frame, headerLength, response, waiting.topics);
  }

  /**
   * The partitions answered UNKNOWN_LEADER_EPOCH, as the follower asked for them; undefined when
   * there are none. A partition the request did not carry (an incremental fetch leaves out what did
   * not change) cannot be asked again: then none is (`topics` empty), the response goes on as is.
   */
  #waitingPartitions(
    response: FetchResponse,
    request: FetchRequest,
  ): { topics: FetchRequestTopic[] } | undefined {
    const topics: FetchRequestTopic[] = [];
    let any = false;
    for (const topic of response.responses) {
      for (const partition of topic.partitions) {
        if (partition.errorCode !== UNKNOWN_LEADER_EPOCH) continue;
        any = true;
        // A topic may come in several entries: the broker starts a new one whenever the session's
        // partition order changes topic. The re-ask asks each topic once.
        const askedPartition = request.topics
          .filter((t) => sameTopic(t, topic))
          .flatMap((t) => t.partitions)
          .find((p) => p.partition === partition.partitionIndex);
        if (askedPartition === undefined) return { topics: [] };
        let entry = topics.find((t) => sameTopic(t, topic));
        if (entry === undefined) {
          const { topic: name, topicId } = topic;
          entry = { ...(topicId !== undefined ? { topicId } : { topic: name }), partitions: [] };
          topics.push(entry);
        }
        entry.partitions.push(askedPartition);
      }
    }
    return any ? { topics } : undefined;
  }

  async #askAgain(
    info: RequestInfo,
    asked: Asked,
    frame: Buffer,
    headerLength: number,
    response: FetchResponse,
    topics: FetchRequestTopic[],
  ): Promise<Buffer> {
    const started = this.#now();
    let remaining = topics;
    let answered = 0;
    while (remaining.length > 0) {
      if (this.#now() - started + this.#retryMs > this.#maxWaitMs) {
        this.stats.passed.waitedLongEnough++;
        this.#passed(remaining, `the leader had not applied its leader change after ${this.#maxWaitMs} ms`);
        break;
      }
      await this.#sleep(this.#retryMs);
      let again: FetchResponse;
      try {
        again = await this.#reask(info, asked, remaining);
      } catch (error) {
        this.stats.passed.reaskFailed++;
        this.#passed(remaining, `the re-ask failed: ${(error as Error).message}`);
        break;
      }
      this.stats.reasks++;
      if (again.errorCode) {
        this.stats.passed.reaskFailed++;
        this.#passed(remaining, `the re-ask was answered with error code ${again.errorCode}`);
        break;
      }
      const still: FetchRequestTopic[] = [];
      for (const topic of remaining) {
        const stillWaiting = topic.partitions.filter((p) => {
          const later = findPartition(again, topic, p.partition)?.partition;
          if (later === undefined || later.errorCode === UNKNOWN_LEADER_EPOCH) return true;
          const held = findPartition(response, topic, p.partition);
          if (held === undefined) return true;
          held.entry.partitions[held.index] = later;
          answered++;
          return false;
        });
        if (stillWaiting.length > 0) still.push({ ...topic, partitions: stillWaiting });
      }
      remaining = still;
    }
    if (answered === 0) return frame;
    this.stats.partitionsAnsweredLater += answered;
    // At info: a leader change's trace, a few lines per follower and leader change.
    this.#log.info(
      { partitions: answered, waitedMs: Math.round(this.#now() - started) },
      'partitions whose new leader had not yet applied its leader change: answered after a re-ask',
    );
    return encodeFrame(
      frame.subarray(FRAME_SIZE_PREFIX_BYTES, FRAME_SIZE_PREFIX_BYTES + headerLength),
      encodeFetchResponse(response, info.apiVersion),
    );
  }

  /** Rare (a leader change gone wrong), so at info: what the follower's broker will back off on. */
  #passed(topics: FetchRequestTopic[], reason: string): void {
    this.#log.info(
      { reason, partitions: topics.reduce((n, t) => n + t.partitions.length, 0) },
      'UNKNOWN_LEADER_EPOCH passed on as the broker wrote it: the follower backs off replica.fetch.backoff.ms',
    );
  }

  /** One sessionless replica fetch of the given partitions, answered at once (max wait 0). */
  async #reask(info: RequestInfo, asked: Asked, topics: FetchRequestTopic[]): Promise<FetchResponse> {
    const correlationId = this.#nextCorrelationId++;
    if (this.#nextCorrelationId >= -0x10000000) this.#nextCorrelationId = -0x20000000;
    const { request } = asked;
    const body: FetchRequest = {
      ...(request.replicaId !== undefined ? { replicaId: request.replicaId } : {}),
      ...(request.replicaState !== undefined ? { replicaState: request.replicaState } : {}),
      ...(request.clusterId !== undefined ? { clusterId: request.clusterId } : {}),
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: request.maxBytes,
      isolationLevel: request.isolationLevel,
      ...NO_SESSION,
      topics,
      forgottenTopicsData: [],
      rackId: request.rackId ?? '',
    };
    const header = encodeRequestHeader({
      apiKey: ApiKey.Fetch,
      apiVersion: info.apiVersion,
      correlationId,
      clientId: asked.clientId,
    });
    const answer = await asked.connection.sendUpstream!(
      encodeFrame(header, encodeFetchRequest(body, info.apiVersion)),
      correlationId,
    );
    const payload = answer.subarray(FRAME_SIZE_PREFIX_BYTES);
    const responseHeader = decodeResponseHeader(
      payload,
      responseHeaderVersion(ApiKey.Fetch, info.apiVersion)!,
    );
    return decodeFetchResponse(payload.subarray(responseHeader.headerLength), info.apiVersion);
  }
}

/** The request decoded, if it is a follower's fetch (a replica id) the codec reads. */
function followerFetch(sent: Sent, version: number): Asked | undefined {
  try {
    const payload = sent.frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    const header = decodeRequestHeader(payload);
    const request = decodeFetchRequest(payload.subarray(header.headerLength), version);
    if ((request.replicaState?.replicaId ?? request.replicaId ?? -1) < 0) return undefined;
    return { clientId: header.clientId, request, connection: sent.connection };
  } catch {
    return undefined;
  }
}

/** A partition of a response, in whichever of its topic's entries it came. */
function findPartition(
  response: FetchResponse,
  topic: { topicId?: string | undefined; topic?: string | undefined },
  partition: number,
):
  | { entry: { partitions: FetchResponsePartition[] }; index: number; partition: FetchResponsePartition }
  | undefined {
  for (const entry of response.responses) {
    if (!sameTopic(entry, topic)) continue;
    const index = entry.partitions.findIndex((p) => p.partitionIndex === partition);
    if (index >= 0) return { entry, index, partition: entry.partitions[index]! };
  }
  return undefined;
}
