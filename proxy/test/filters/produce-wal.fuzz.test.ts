// Mutated Produce requests, from frames captured on a real cluster, through ProduceWalFilter the
// way the connection pipe calls it (issue #12, "bad input as stock answers it"). For every case:
// - the request goes upstream byte for byte as the client sent it: the broker answers it, so the
//   client gets the stock answer, also for bytes the codec refuses (Kafka reads more leniently);
//   the only other outcome is a ProtocolError (the pipe then closes the connection), and only
//   for a request whose acks cannot be found, which the broker cannot read either;
// - the response comes back as the broker sent it;
// - the WAL stores no batch the broker did not append: a broker model answers each partition
//   (the last batch sent for a partition is the one it appends; a partition must hold exactly one
//   complete, CRC-valid v2 batch), and every stored batch and every metadata piece must be the
//   batch of a partition it answered success, at the offsets it assigned.
import {
  ApiKey,
  decodeProduceResponse,
  decodeResponseHeader,
  ErrorCode,
  encodeProduceResponse,
  encodeResponseHeader,
  type ProducePartitionResponse,
  type ProduceRequest,
  type ProduceTopicResponse,
  parseWalObject,
  peekProduceAcks,
  peekRequestKey,
  responseHeaderVersion,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { decodeProduce, mutateProduceRequest } from '../../../e2e/src/fuzz/produce-mutations.js';
import { PRODUCE_WAL_VERSIONS, ProduceWalFilter } from '../../src/filters/produce-wal.js';
import { createLogger } from '../../src/log.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import type { WalMetadataPublisher, WalPiece } from '../../src/metadata/wal-metadata-publisher.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import { TopicPolicy } from '../../src/topics/topic-policy.js';
import { WalWriter } from '../../src/wal/index.js';
import { MemoryObjectStore } from '../wal/memory-store.js';
import {
  caseName,
  framed,
  fuzzCases,
  fuzzFixtures,
  isProtocolError,
  oneValidBatch,
  Rng,
} from './fuzz-support.js';

const FILE = 'produce-wal.fuzz';
const CASES = 2_400;
const PARTITIONS: Record<string, number> = { 'wal-fuzz': 3, 'plain-fuzz': 1 };

const fixtures = fuzzFixtures();
const namesById = new Map(Object.entries(fixtures.manifest.topics).map(([name, id]) => [id, name]));
/** What the structural mutations rename topics to: the captured topics, and names and ids no broker knows. */
const TOPIC_CHOICES = {
  names: ['wal-fuzz', 'plain-fuzz', 'wal-other', 'wal-füzz', '', '__consumer_offsets'],
  ids: Object.values(fixtures.manifest.topics),
};

/**
 * A filter over a memory store. `namesLater`: the local broker has not named any topic id yet
 * (topics created a moment ago), so v13 requests are copied once their ids resolve.
 */
function setup(durableAck: boolean, namesLater: boolean) {
  const store = new MemoryObjectStore();
  const writer = new WalWriter({ store, brokerId: 1, lingerMs: 0 });
  const topicNames = {
    nameOf: (id: string) => (namesLater ? undefined : namesById.get(id)),
    isUnknown: (id: string) => !namesLater && !namesById.has(id),
    resolve: async (id: string) => namesById.get(id),
  } as unknown as TopicNames;
  const pieces: WalPiece[] = [];
  const publisher = { publish: (p: WalPiece) => pieces.push(p) } as unknown as WalMetadataPublisher;
  const policy = new TopicPolicy(
    { wal: false, lingerMs: 0, targetBytes: 400_000, durableAck, mode: 'wal', maxHoldMs: 200 },
    [{ pattern: 'wal-*', settings: { wal: true } }],
  );
  const filter = new ProduceWalFilter({ writer, policy, topicNames, publisher, log: createLogger('silent') });
  return { store, writer, filter, pieces };
}

interface Answer {
  topicKey: string;
  topic: string | undefined;
  partition: number;
  errorCode: number;
  baseOffset: bigint;
  /** What the broker appended, when errorCode is 0. */
  records: Buffer | null;
}

/**
 * A broker's answers, closely enough for what the filter relies on: one answer per partition,
 * judged on the last batch sent for it (Kafka 4.4 appends one copy of a partition named twice and
 * answers it once: e2e/test/fuzz-produce.test.ts); unknown topics and partitions, bad acks and
 * any partition that is not one complete CRC-valid v2 batch are refused (a transactional id on
 * batches that are not transactional is not: Kafka appends them); one partition in ten is
 * refused as NOT_LEADER_OR_FOLLOWER anyway.
 */
function brokerAnswers(rng: Rng, request: ProduceRequest, version: number): Answer[] {
  const byPartition = new Map<string, Answer>();
  let next = 1_000n;
  for (const topic of request.topicData) {
    const topicKey = version >= 13 ? topic.topicId! : topic.name!;
    const name = version >= 13 ? namesById.get(topicKey) : topicKey;
    for (const p of topic.partitionData) {
      let errorCode = 0;
      if (
        name === undefined ||
        PARTITIONS[name] === undefined ||
        p.index < 0 ||
        p.index >= PARTITIONS[name]!
      ) {
        errorCode = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION;
      } else if (request.acks !== 0 && request.acks !== 1 && request.acks !== -1) {
        errorCode = ErrorCode.INVALID_REQUIRED_ACKS;
      } else if (!oneValidBatch(p.records)) {
        errorCode = ErrorCode.CORRUPT_MESSAGE;
      } else if (rng.chance(0.1)) {
        errorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER;
      }
      const baseOffset = errorCode === 0 ? next : -1n;
      if (errorCode === 0) next += BigInt(p.records!.readInt32BE(23)) + 1n;
      byPartition.set(`${topicKey}\u0000${p.index}`, {
        topicKey,
        topic: name,
        partition: p.index,
        errorCode,
        baseOffset,
        records: errorCode === 0 ? p.records : null,
      });
    }
  }
  return [...byPartition.values()];
}

function responseFrame(info: RequestInfo, answers: Answer[]): Buffer {
  const version = info.apiVersion;
  const topics = new Map<string, ProduceTopicResponse>();
  for (const a of answers) {
    let topic = topics.get(a.topicKey);
    if (topic === undefined) {
      topic = { ...(version >= 13 ? { topicId: a.topicKey } : { name: a.topicKey }), partitionResponses: [] };
      topics.set(a.topicKey, topic);
    }
    const partition: ProducePartitionResponse = {
      index: a.partition,
      errorCode: a.errorCode,
      baseOffset: a.baseOffset,
      logAppendTimeMs: -1n,
      logStartOffset: 0n,
      recordErrors: [],
      errorMessage: null,
    };
    topic.partitionResponses.push(partition);
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

/** Runs one case; returns what went wrong, if anything. */
async function runCase(index: number): Promise<string[]> {
  const rng = Rng.forCase(FILE, index);
  const base = rng.pick(fixtures.produce);
  const { bytes: frame, what } = mutateProduceRequest(rng, base.request, TOPIC_CHOICES);
  const name = caseName(FILE, index, `${base.name}, ${what}`);
  const problems: string[] = [];
  const payload = frame.subarray(4);
  // As the pipe does before choosing a filter.
  let info: RequestInfo;
  try {
    info = peekRequestKey(payload);
  } catch {
    return [];
  }
  if (info.apiKey !== ApiKey.Produce || info.apiVersion < 0) return [];
  const { writer, store, filter, pieces } = setup(rng.chance(0.5), rng.chance(0.3));
  const inRange = info.apiVersion >= PRODUCE_WAL_VERSIONS.min && info.apiVersion <= PRODUCE_WAL_VERSIONS.max;
  const decoded = inRange ? decodeProduce(frame) : undefined;
  const sent = Buffer.from(frame);

  let decision: ReturnType<ProduceWalFilter['onRequest']>;
  try {
    decision = filter.onRequest(info, frame);
  } catch (error) {
    // The one request the filter may refuse (the pipe closes the connection): one whose acks
    // cannot be found, which the broker cannot read either.
    let acksFound = true;
    try {
      peekProduceAcks(payload);
    } catch {
      acksFound = false;
    }
    if (!isProtocolError(error) || acksFound)
      problems.push(`${name}: onRequest threw ${(error as Error).stack}`);
    await writer.close();
    return problems;
  }
  if (decision.action !== 'forward') {
    problems.push(`${name}: answered locally`);
  } else {
    if (!decision.frame.equals(sent))
      problems.push(`${name}: the request upstream is not the client's bytes`);
    let acks: number | undefined;
    try {
      acks = peekProduceAcks(payload);
    } catch {}
    if (acks !== undefined && decision.expectResponse !== (acks !== 0)) {
      problems.push(`${name}: expectResponse ${decision.expectResponse} for acks ${acks}`);
    }
  }
  if (decoded === undefined || decoded.request.acks === 0) {
    await writer.close();
    if (decoded === undefined && store.objects.size > 0)
      problems.push(`${name}: stored batches of an unread request`);
    return problems;
  }

  const answers = brokerAnswers(rng, decoded.request, info.apiVersion);
  const response = responseFrame(info, answers);
  try {
    const out = await filter.onResponse(info, response);
    if (!out.equals(response)) problems.push(`${name}: the response downstream is not the broker's bytes`);
  } catch (error) {
    problems.push(`${name}: onResponse threw ${(error as Error).stack}`);
  }
  await writer.close();

  const appended = new Map<string, Answer>();
  for (const a of answers)
    if (a.errorCode === 0 && a.topic !== undefined) appended.set(`${a.topic}\u0000${a.partition}`, a);
  for (const [key, object] of store.objects) {
    for (const entry of parseWalObject(object).entries) {
      const topic = entry.topicName || namesById.get(entry.topicId);
      const stored = object.subarray(entry.position, entry.position + entry.length);
      const answer = appended.get(`${topic}\u0000${entry.partition}`);
      if (answer === undefined || !answer.records!.equals(stored)) {
        problems.push(
          `${name}: ${key} stores a batch of ${topic}-${entry.partition} the broker did not append (answer ${answer?.errorCode ?? 'none'})`,
        );
      }
    }
  }
  const seen = new Set<string>();
  for (const piece of pieces) {
    const answer = appended.get(`${piece.topic}\u0000${piece.partition}`);
    const object = store.objects.get(piece.objectKey);
    const bytes = object?.subarray(piece.position, piece.position + piece.length);
    if (answer === undefined || answer.baseOffset !== piece.baseOffset || !bytes?.equals(answer.records!)) {
      problems.push(
        `${name}: metadata names offset ${piece.baseOffset} of ${piece.topic}-${piece.partition} for a batch the broker did not append there`,
      );
    }
    const id = `${piece.topic}\u0000${piece.partition}\u0000${piece.baseOffset}`;
    if (seen.has(id))
      problems.push(
        `${name}: two metadata pieces for offset ${piece.baseOffset} of ${piece.topic}-${piece.partition}`,
      );
    seen.add(id);
  }
  return problems;
}

describe('ProduceWalFilter, fuzzed with mutations of captured Produce v3–v13 requests', () => {
  it('copies every WAL batch the broker appended, passing the captured requests and responses through unchanged', async () => {
    for (const fixture of fixtures.produce) {
      // Given a captured request and the broker's captured answer
      const { writer, store, filter } = setup(true, false);
      const info = peekRequestKey(fixture.request.subarray(4));
      // When both pass the filter
      const decision = filter.onRequest(info, fixture.request);
      const out = await filter.onResponse(info, fixture.response);
      await writer.close();
      // Then both are the captured bytes
      expect(decision, fixture.name).toEqual({
        action: 'forward',
        frame: fixture.request,
        expectResponse: true,
      });
      expect(out.equals(fixture.response), fixture.name).toBe(true);
      // And the WAL holds the batch of every partition of the WAL topic the broker appended (one
      // client's first Produce was answered NOT_LEADER_OR_FOLLOWER: nothing of it)
      const payload = fixture.response.subarray(4);
      const { headerLength } = decodeResponseHeader(
        payload,
        responseHeaderVersion(ApiKey.Produce, info.apiVersion)!,
      );
      const appended = new Set(
        decodeProduceResponse(payload.subarray(headerLength), info.apiVersion).responses.flatMap((t) =>
          t.partitionResponses
            .filter((p) => p.errorCode === 0)
            .map((p) => `${t.name ?? t.topicId}/${p.index}`),
        ),
      );
      const request = decodeProduce(fixture.request)!.request;
      const walBatches = request.topicData
        .filter((t) => (t.name ?? namesById.get(t.topicId!)) === 'wal-fuzz')
        .flatMap((t) =>
          t.partitionData
            .filter((p) => appended.has(`${t.name ?? t.topicId}/${p.index}`))
            .map((p) => p.records!.toString('hex')),
        );
      const stored = [...store.objects.values()].flatMap((o) =>
        parseWalObject(o).entries.map((e) => o.subarray(e.position, e.position + e.length).toString('hex')),
      );
      expect(stored.sort(), fixture.name).toEqual(walBatches.sort());
    }
  });

  it('forwards every mutated request as sent, answers as the broker does, and stores only what the broker appended', async () => {
    const problems: string[] = [];
    for (const index of fuzzCases(CASES)) problems.push(...(await runCase(index)));
    expect(problems.slice(0, 20)).toEqual([]);
  });
});
