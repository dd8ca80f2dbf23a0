// What the zone filters' fuzz tests share (zone-produce.fuzz.test.ts, produce-fill.fuzz.test.ts):
// both sides of zone-local produce over memory stores, set up as a real pair of sidecars is, and a
// model of the broker's per-partition answers, closely enough for what the filters rely on.
import {
  ApiKey,
  decodeProduceReference,
  decodeProduceRequest,
  decodeProduceResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  ErrorCode,
  encodeProduceResponse,
  encodeResponseHeader,
  isProduceReference,
  type ProducePartitionResponse,
  type ProduceRequest,
  type ProduceResponse,
  type ProduceTopicResponse,
  peekProduceAcks,
  produceReferenceMismatch,
  responseHeaderVersion,
} from '@walproxy/shared';
import { createLogger } from '../../src/log.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import type { FilterConnection, RequestDecision, RequestInfo } from '../../src/net/frame-filter.js';
import { StoreHealth } from '../../src/store/store-health.js';
import { TopicPolicy } from '../../src/topics/topic-policy.js';
import { WalRangeReader } from '../../src/wal/range-reader.js';
import { WalWriter } from '../../src/wal/wal-writer.js';
import { ProduceFillFilter } from '../../src/zone/produce-fill.js';
import { ZoneDirectory } from '../../src/zone/zone-directory.js';
import { ZoneProduce } from '../../src/zone/zone-produce.js';
import { framed, fuzzFixtures, isProtocolError, oneValidBatch, type Rng } from '../filters/fuzz-support.js';
import { MemoryObjectStore } from '../wal/memory-store.js';
import { zoneConfig } from './zone-fixtures.js';

export const log = createLogger('silent');
export const ZONE_A_STORE = 's3://walproxy-zone-a/wal';
export const LEADER = 2;
const PARTITIONS: Record<string, number> = { 'wal-fuzz': 3, 'plain-fuzz': 1 };

export const fixtures = fuzzFixtures();
export const namesById = new Map(Object.entries(fixtures.manifest.topics).map(([name, id]) => [id, name]));
/** What the structural mutations rename topics to: the captured topics, and names and ids no broker knows. */
export const TOPIC_CHOICES = {
  names: ['wal-fuzz', 'plain-fuzz', 'wal-other', 'wal-füzz', '', '__consumer_offsets'],
  ids: Object.values(fixtures.manifest.topics),
};

/**
 * The producer's zone sidecar (S_Z, zone-a: `wal-*` topics zone-local) with its zone egress filter
 * towards leader 2 (zone-b), and the leader's sidecar's fill, reading zone-a's store.
 */
export function zonePair() {
  const zoneStore = new MemoryObjectStore();
  const writer = new WalWriter({ store: zoneStore, brokerId: 1 });
  const policy = new TopicPolicy(
    {
      wal: false,
      latencyBudgetMs: 50,
      lingerMs: 0,
      targetBytes: 400_000,
      durableAck: false,
      mode: 'wal',
      maxHoldMs: 200,
      zoneLocal: false,
    },
    [{ pattern: 'wal-*', settings: { wal: true, zoneLocal: true } }],
  );
  const topicNames = {
    nameOf: (id: string) => namesById.get(id),
    isUnknown: (id: string) => !namesById.has(id),
    resolve: async (id: string) => namesById.get(id),
  } as unknown as TopicNames;
  const health = new StoreHealth({ store: ZONE_A_STORE, probe: async () => undefined, log });
  health.markHealthy('fuzz');
  const directory = new ZoneDirectory(zoneConfig);
  directory.learnNodeZone(LEADER, 'zone-b');
  const zoneProduce = new ZoneProduce({
    writer,
    storeUrl: ZONE_A_STORE,
    policy,
    topicNames,
    health,
    directory,
    log,
    // A held request never waits long for an answer the case does not give.
    acceptanceWaitMs: 50,
  });
  const egress = zoneProduce.filterFor(LEADER);
  const reader = new WalRangeReader({ store: zoneStore });
  const fill = new ProduceFillFilter({
    readerFor: (url) => (url === ZONE_A_STORE ? reader : undefined),
    log,
  });
  return { zoneStore, writer, zoneProduce, egress, fill };
}

export type ZonePair = ReturnType<typeof zonePair>;

/** The leader accepts `wal-fuzz` from the anonymous producer: its later batches go by reference. */
export async function acceptWalFuzz(pair: ZonePair, connection: FilterConnection): Promise<void> {
  const fixture = fixtures.produce.find((f) => f.name === 'Produce v9')!;
  const info: RequestInfo = { apiKey: ApiKey.Produce, apiVersion: 9, correlationId: 1 };
  const decision = await pair.egress.onRequest!(info, fixture.request, connection);
  if (decision.action !== 'forward' || !decision.frame.equals(fixture.request))
    throw new Error('the first produce of a topic must go as the client sent it');
  pair.egress.onResponse!(info, fixture.response);
}

/** Awaits a decision (or an answer), or says it hung. */
export async function settled<T>(value: T | Promise<T>, ms = 5_000): Promise<T | 'hung'> {
  if (!(value instanceof Promise)) return value;
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => {
    timer = setTimeout(() => resolve('hung'), ms);
  });
  try {
    return await Promise.race([value, hung]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a throw from a filter's onRequest is the one allowed: a request whose acks cannot be found (not Kafka: the broker cannot read it either). */
export function allowedThrow(error: unknown, frame: Buffer): boolean {
  if (!isProtocolError(error)) return false;
  try {
    peekProduceAcks(frame.subarray(4));
    return false;
  } catch {
    return true;
  }
}

export function decodeRequest(frame: Buffer, version: number): ProduceRequest | undefined {
  try {
    const payload = frame.subarray(4);
    return decodeProduceRequest(payload.subarray(decodeRequestHeader(payload).headerLength), version);
  } catch {
    return undefined;
  }
}

/**
 * A broker's answers: one per partition, judged on the last copy sent (Kafka 4.4 appends one copy
 * of a partition named twice and answers it once); unknown topics and partitions, bad acks and any
 * partition that is not one complete CRC-valid v2 batch refused; one in ten refused as
 * NOT_LEADER_OR_FOLLOWER anyway.
 */
export function brokerResponse(rng: Rng, info: RequestInfo, request: ProduceRequest): Buffer {
  const version = info.apiVersion;
  const topics = new Map<string, ProduceTopicResponse>();
  const byPartition = new Map<string, ProducePartitionResponse>();
  let next = 1_000n;
  for (const topic of request.topicData) {
    const topicKey = version >= 13 ? topic.topicId! : topic.name!;
    const name = version >= 13 ? namesById.get(topicKey) : topicKey;
    let entry = topics.get(topicKey);
    if (entry === undefined) {
      entry = { ...(version >= 13 ? { topicId: topicKey } : { name: topicKey }), partitionResponses: [] };
      topics.set(topicKey, entry);
    }
    for (const p of topic.partitionData) {
      let errorCode = 0;
      if (name === undefined || PARTITIONS[name] === undefined || p.index < 0 || p.index >= PARTITIONS[name]!)
        errorCode = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION;
      else if (request.acks !== 0 && request.acks !== 1 && request.acks !== -1)
        errorCode = ErrorCode.INVALID_REQUIRED_ACKS;
      else if (!oneValidBatch(p.records)) errorCode = ErrorCode.CORRUPT_MESSAGE;
      else if (rng.chance(0.1)) errorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER;
      const baseOffset = errorCode === 0 ? next : -1n;
      if (errorCode === 0) next += BigInt(p.records!.readInt32BE(23)) + 1n;
      const key = `${topicKey}\u0000${p.index}`;
      const answer: ProducePartitionResponse = {
        index: p.index,
        errorCode,
        baseOffset,
        logAppendTimeMs: -1n,
        logStartOffset: 0n,
        recordErrors: [],
        errorMessage: null,
      };
      const earlier = byPartition.get(key);
      if (earlier !== undefined) Object.assign(earlier, answer);
      else {
        byPartition.set(key, answer);
        entry.partitionResponses.push(answer);
      }
    }
  }
  const header = encodeResponseHeader(
    { correlationId: info.correlationId },
    responseHeaderVersion(ApiKey.Produce, version)!,
  );
  return framed(
    Buffer.concat([
      header,
      encodeProduceResponse({ responses: [...topics.values()], throttleTimeMs: 0 }, version),
    ]),
  );
}

export function decodeResponse(info: RequestInfo, frame: Buffer): ProduceResponse {
  const payload = frame.subarray(4);
  const { headerLength } = decodeResponseHeader(
    payload,
    responseHeaderVersion(ApiKey.Produce, info.apiVersion)!,
  );
  return decodeProduceResponse(payload.subarray(headerLength), info.apiVersion);
}

/** The client's frame with the magic byte of every client-sent reference neutralized (0x57 → 0x58), as S_Z forwards it. */
export function neutralizedAsSZ(frame: Buffer, request: ProduceRequest | undefined): Buffer {
  if (request === undefined) return frame;
  let out = frame;
  for (const p of request.topicData.flatMap((t) => t.partitionData)) {
    if (!isProduceReference(p.records)) continue;
    if (out === frame) out = Buffer.from(frame);
    out[p.records.byteOffset - frame.byteOffset + 16] = 0x58;
  }
  return out;
}

/**
 * Whether every reference of a request can be filled from `store`, judged without the fill's
 * code: each decodes, names zone-a's store, and the bytes at its place are the batch it stands for.
 */
export function everyReferenceFills(request: ProduceRequest, store: MemoryObjectStore): boolean {
  for (const p of request.topicData.flatMap((t) => t.partitionData)) {
    if (!isProduceReference(p.records)) continue;
    let reference: ReturnType<typeof decodeProduceReference>;
    try {
      reference = decodeProduceReference(p.records);
    } catch {
      return false;
    }
    const object = store.objects.get(reference.objectKey);
    if (reference.store !== ZONE_A_STORE || object === undefined) return false;
    if (reference.position < 0 || reference.position + reference.batchSize > object.length) return false;
    const batch = object.subarray(reference.position, reference.position + reference.batchSize);
    if (produceReferenceMismatch(reference, batch) !== undefined) return false;
  }
  return true;
}

/** Whether a decision is a forward; narrows. */
export function isForward(
  decision: RequestDecision,
): decision is Extract<RequestDecision, { action: 'forward' }> {
  return decision.action === 'forward';
}
