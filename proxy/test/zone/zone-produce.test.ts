import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import {
  ApiKey,
  decodeProduceRequest,
  decodeProduceResponse,
  decodeRequestHeader,
  ErrorCode,
  encodeProduceRequest,
  encodeProduceResponse,
  isProduceReference,
  type ProduceResponse,
  parseWalObject,
  type RecordBatch,
  recordBatchAt,
} from '@walproxy/shared';
import { describe, expect, it, onTestFinished } from 'vitest';
import { buildRecordBatch } from '../../../shared/test/helpers/record-batches.js';
import { ProduceWalFilter } from '../../src/filters/produce-wal.js';
import { createLogger } from '../../src/log.js';
import {
  encodeSaslAuthenticateRequest,
  encodeSaslAuthenticateResponse,
  encodeSaslHandshakeRequest,
  encodeSaslHandshakeResponse,
} from '../../src/metadata/sasl-messages.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import type { WalMetadataPublisher, WalPiece } from '../../src/metadata/wal-metadata-publisher.js';
import type { FilterConnection, RequestDecision, RequestInfo } from '../../src/net/frame-filter.js';
import { StoreHealth } from '../../src/store/store-health.js';
import { TopicPolicy, type TopicSettings } from '../../src/topics/topic-policy.js';
import { WalBatchIndex } from '../../src/wal/batch-index.js';
import { WalRangeReader } from '../../src/wal/range-reader.js';
import { SealingPolicy } from '../../src/wal/sealing-policy.js';
import { WalWriter } from '../../src/wal/wal-writer.js';
import { ZONE_PRODUCE_CHANNELS } from '../../src/zone/channels.js';
import { ProduceFillFilter } from '../../src/zone/produce-fill.js';
import { ZoneDirectory } from '../../src/zone/zone-directory.js';
import { ZoneProduce } from '../../src/zone/zone-produce.js';
import { MemoryObjectStore } from '../wal/memory-store.js';
import { requestFrame, responseFrame } from './frames.js';
import { zoneConfig } from './zone-fixtures.js';

// Both sides of zone-local produce, filter to filter: the producer's zone sidecar (S_Z, zone-a)
// making references on its zone egress towards leader 2 (zone-b), and the leader's sidecar (S_L)
// filling them on its zone ingress. Stores are in memory; the e2e suite runs them on real brokers.

const log = createLogger('silent');
const ZONE_A_STORE = 's3://walproxy-zone-a/wal';
const LEADER = 2;
const TOPIC_ID = '0123456789abcdef0123456789abcdef';

const settings = {
  wal: false,
  latencyBudgetMs: 50,
  lingerMs: 10,
  targetBytes: 400_000,
  durableAck: true,
  mode: 'wal' as const,
  maxHoldMs: 200,
  zoneLocal: false,
};

function batch(seed: number): Buffer {
  return buildRecordBatch({
    producerId: 7_000n,
    producerEpoch: 0,
    baseSequence: seed * 10,
    records: Array.from({ length: 5 }, (_, i) => ({
      key: Buffer.from(`k${i}`),
      value: Buffer.from(`value-${seed}-${i}`.padEnd(200, 'v')),
    })),
  });
}

let nextCorrelation = 1;
function info(version: number): RequestInfo {
  return { apiKey: ApiKey.Produce, apiVersion: version, correlationId: nextCorrelation++ };
}

type Topic = { name?: string; topicId?: string };

function produce(i: RequestInfo, topics: Array<{ topic: Topic; batches: Buffer[] }>, acks = -1): Buffer {
  return requestFrame(
    i,
    'producer-1',
    encodeProduceRequest(
      {
        transactionalId: null,
        acks,
        timeoutMs: 30_000,
        topicData: topics.map(({ topic, batches }) => ({
          ...topic,
          partitionData: batches.map((records, index) => ({ index, records })),
        })),
      },
      i.apiVersion,
    ),
  );
}

/** The broker's answer: `errorOf(partition)` for each partition of the request, offsets from 100. */
function answer(i: RequestInfo, request: Buffer, errorOf: (p: number) => number = () => 0): Buffer {
  const payload = request.subarray(4);
  const body = decodeProduceRequest(
    payload.subarray(decodeRequestHeader(payload).headerLength),
    i.apiVersion,
  );
  const response: ProduceResponse = {
    responses: body.topicData.map((t) => ({
      name: t.name,
      topicId: t.topicId,
      partitionResponses: t.partitionData.map((p) => ({
        index: p.index,
        errorCode: errorOf(p.index),
        errorMessage:
          errorOf(p.index) === ErrorCode.INVALID_RECORD
            ? 'Produce requests with version 9 are only allowed to contain record batches with magic version 2'
            : null,
        baseOffset: errorOf(p.index) === 0 ? 100n : -1n,
        logAppendTimeMs: -1n,
        logStartOffset: 0n,
        recordErrors: [],
      })),
    })),
    throttleTimeMs: 0,
  };
  return responseFrame(i, encodeProduceResponse(response, i.apiVersion));
}

function errorsIn(i: RequestInfo, response: Buffer): number[] {
  const payload = response.subarray(4 + (i.apiVersion >= 9 ? 5 : 4));
  return decodeProduceResponse(payload, i.apiVersion).responses.flatMap((t) =>
    t.partitionResponses.map((p) => p.errorCode),
  );
}

function partitionRecords(i: RequestInfo, frame: Buffer): Array<Buffer | null> {
  const payload = frame.subarray(4);
  const body = decodeProduceRequest(
    payload.subarray(decodeRequestHeader(payload).headerLength),
    i.apiVersion,
  );
  return body.topicData.flatMap((t) => t.partitionData.map((p) => p.records));
}

function forwarded(decision: RequestDecision): Buffer {
  if (decision.action !== 'forward') throw new Error(`expected forward, got ${decision.action}`);
  return decision.frame;
}

/** A sealing policy under which no object pays (break-even at 10 MB): every group stays inline. */
function nothingPays(): SealingPolicy {
  return new SealingPolicy({
    economics: {
      breakEvenObjectBytes: 10_000_000,
      savingUsd: (bytes) => bytes - 10_000_000,
      savingPerByte: (bytes) => (bytes - 10_000_000) / bytes,
      stockUsdPerByte: 1,
    },
  });
}

function setup(
  options: {
    now?: () => number;
    leaderZone?: string;
    readable?: boolean;
    storeTimeoutMs?: number;
    /** Acceptances the producer's zone side remembers (the memory budget's zoneAcceptances). */
    maxAccepted?: number;
    /** Both sidecars' writers (and the leader's WAL filter) under a sealing policy. */
    sealing?: () => SealingPolicy;
    /** More settings of the zl-* topics. */
    zoneLocalTopics?: Partial<TopicSettings>;
  } = {},
) {
  // S_Z: its zone-a store, WAL writer, policy and the zone egress filter towards leader 2
  const zoneStore = new MemoryObjectStore();
  const writer = new WalWriter({
    store: zoneStore,
    brokerId: 1,
    ...(options.sealing ? { policy: options.sealing() } : {}),
  });
  const policy = new TopicPolicy(settings, [
    { pattern: 'zl-*', settings: { wal: true, zoneLocal: true, ...options.zoneLocalTopics } },
    { pattern: 'wal-*', settings: { wal: true } },
  ]);
  const names = new Map([[TOPIC_ID, 'zl-by-id']]);
  const topicNames = {
    nameOf: (id: string) => names.get(id),
    resolve: async (id: string) => names.get(id),
  } as unknown as TopicNames;
  const health = new StoreHealth({ store: ZONE_A_STORE, probe: async () => undefined, log });
  health.markHealthy('test');
  const directory = new ZoneDirectory(zoneConfig);
  directory.learnNodeZone(LEADER, options.leaderZone ?? 'zone-b');
  const zoneProduce = new ZoneProduce({
    writer,
    storeUrl: ZONE_A_STORE,
    policy,
    topicNames,
    health,
    directory,
    log,
    ...(options.now ? { now: options.now } : {}),
    ...(options.storeTimeoutMs ? { storeTimeoutMs: options.storeTimeoutMs } : {}),
    ...(options.maxAccepted ? { maxAccepted: options.maxAccepted } : {}),
  });
  const egress = zoneProduce.filterFor(LEADER);
  const egressConnection: FilterConnection = { log };

  // S_L: reads zone-a's store, fills, and its own WAL filter indexes what it filled
  const leaderStore = new MemoryObjectStore();
  const leaderSealing = options.sealing?.();
  const leaderWriter = new WalWriter({
    store: leaderStore,
    brokerId: 2,
    ...(leaderSealing ? { policy: leaderSealing } : {}),
  });
  const reader = new WalRangeReader({ store: zoneStore });
  const fill = new ProduceFillFilter({
    readerFor: (url) => (options.readable === false || url !== ZONE_A_STORE ? undefined : reader),
    log,
  });
  const index = new WalBatchIndex();
  const published: WalPiece[] = [];
  const walFilter = new ProduceWalFilter({
    writer: leaderWriter,
    index,
    policy,
    topicNames,
    publisher: { publish: (p: WalPiece) => published.push(p) } as unknown as WalMetadataPublisher,
    storedElsewhere: (i, t, p) => fill.storedElsewhere(i, t, p),
    ...(leaderSealing ? { sealing: leaderSealing } : {}),
    log,
  });
  const ingressConnection: FilterConnection = { log };

  /** The client's request through S_Z; what S_Z sends to S_L. */
  const throughZone = async (i: RequestInfo, frame: Buffer, connection = egressConnection) =>
    forwarded(await egress.onRequest!(i, frame, connection));
  /** What S_L hands the broker, or its own answer. */
  const throughLeader = async (i: RequestInfo, frame: Buffer): Promise<RequestDecision> => {
    const filled = await fill.onRequest(i, frame, ingressConnection);
    if (filled.action === 'respond') return filled;
    return walFilter.onRequest(i, filled.frame);
  };
  const back = (i: RequestInfo, response: Buffer) => egress.onResponse!(i, response) as Buffer;
  return {
    zoneStore,
    leaderStore,
    writer,
    leaderWriter,
    zoneProduce,
    egress,
    fill,
    walFilter,
    leaderSealing,
    index,
    published,
    health,
    throughZone,
    throughLeader,
    back,
    egressConnection,
  };
}

/** A first produce of `topic` on the connection, answered without error: the leader accepted it. */
async function accepted(s: ReturnType<typeof setup>, topic: Topic, version = 9): Promise<void> {
  await acceptOn(s, s.egressConnection, topic, version);
}

async function acceptOn(
  s: ReturnType<typeof setup>,
  connection: FilterConnection,
  topic: Topic,
  version = 9,
): Promise<void> {
  const i = info(version);
  const first = produce(i, [{ topic, batches: [batch(0)] }]);
  const out = await s.throughZone(i, first, connection);
  expect(out).toBe(first);
  s.back(i, answer(i, first));
}

/** Sends a SASL request on `connection` through the zone egress filter, unanswered; returns its info. */
async function saslSend(
  s: ReturnType<typeof setup>,
  connection: FilterConnection,
  request: { mechanism: string } | { authBytes: Buffer },
): Promise<RequestInfo> {
  if ('mechanism' in request) {
    const i: RequestInfo = { apiKey: 17, apiVersion: 1, correlationId: nextCorrelation++ };
    await s.egress.onRequest!(
      i,
      requestFrame(i, 'p', encodeSaslHandshakeRequest(request.mechanism, 1)),
      connection,
    );
    return i;
  }
  const i: RequestInfo = { apiKey: 36, apiVersion: 2, correlationId: nextCorrelation++ };
  await s.egress.onRequest!(
    i,
    requestFrame(i, 'p', encodeSaslAuthenticateRequest(request.authBytes, 2)),
    connection,
  );
  return i;
}

/** The broker's answer to a SASL request: accepted, or refused with `errorCode`. */
function saslAnswer(s: ReturnType<typeof setup>, i: RequestInfo, errorCode = 0): void {
  const body =
    i.apiKey === 17
      ? encodeSaslHandshakeResponse({ errorCode, mechanisms: ['PLAIN', 'SCRAM-SHA-512'] }, 1)
      : encodeSaslAuthenticateResponse(
          {
            errorCode,
            errorMessage:
              errorCode === 0
                ? null
                : 'Authentication failed during authentication due to invalid credentials',
            authBytes: Buffer.alloc(0),
            sessionLifetimeMs: 0n,
          },
          2,
        );
  s.egress.onResponse!(i, responseFrame(i, body));
}

/** SCRAM's second client message (RFC 5802 client-final-message); the proof is whatever the client sends. */
const SCRAM_FINAL = Buffer.from('c=biws,r=abc123server456,p=cHJvb2Y=');

/**
 * A new connection on which the client logged in with `mechanism`, its first message `authBytes`,
 * every step answered without error (SCRAM: client-first, then client-final).
 */
async function login(
  s: ReturnType<typeof setup>,
  mechanism: string,
  authBytes: Buffer,
): Promise<FilterConnection> {
  const connection: FilterConnection = { log };
  saslAnswer(s, await saslSend(s, connection, { mechanism }));
  saslAnswer(s, await saslSend(s, connection, { authBytes }));
  if (mechanism.startsWith('SCRAM-'))
    saslAnswer(s, await saslSend(s, connection, { authBytes: SCRAM_FINAL }));
  return connection;
}

describe('zone-local produce: references between sidecars', () => {
  it('sends the first produce of a topic as bytes, then references, which the leader fills back to the exact bytes', async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    // Given a connection whose first produce of the topic went as bytes and was accepted
    await accepted(s, topic);
    expect(s.zoneStore.objects.size).toBe(0);
    // When the next produce, two partitions, passes the producer's zone sidecar
    const i = info(9);
    const request = produce(i, [{ topic, batches: [batch(1), batch(2)] }]);
    const sent = await s.throughZone(i, request);
    // Then both batches are in one object of zone-a's store, and what crosses the zone is references
    expect(s.zoneStore.objects.size).toBe(1);
    const [object] = [...s.zoneStore.objects.values()];
    expect(parseWalObject(object!).entries.map((e) => e.partition)).toEqual([0, 1]);
    expect(partitionRecords(i, sent).every(isProduceReference)).toBe(true);
    expect(sent.length).toBeLessThan(request.length / 3);
    // And the leader's sidecar hands the broker the very bytes the producer sent
    const toBroker = forwarded(await s.throughLeader(i, sent));
    expect(toBroker.equals(request)).toBe(true);
    expect(s.zoneProduce.stats).toMatchObject({ requestsReferenced: 1, batchesReferenced: 2 });
    expect(s.fill.stats).toMatchObject({ requestsFilled: 1, batchesFilled: 2, requestsRefused: 0 });
  });

  it('publishes the store write and the fill of a referenced request on its diagnostics channels', async () => {
    // Given subscribers to zone/'s channels, as the telemetry subscribes
    const events: Array<[string, unknown]> = [];
    const listen = (name: string) => {
      const handler = (message: unknown) => events.push([name, message]);
      subscribe(name, handler);
      onTestFinished(() => unsubscribe(name, handler));
    };
    listen(ZONE_PRODUCE_CHANNELS.store);
    listen(ZONE_PRODUCE_CHANNELS.fill);
    const s = setup();
    const topic = { name: 'zl-orders' };
    await accepted(s, topic);
    // When a produce of two batches goes by reference and the leader fills it
    const i = info(9);
    const request = produce(i, [{ topic, batches: [batch(1), batch(2)] }]);
    forwarded(await s.throughLeader(i, await s.throughZone(i, request)));
    // Then one store event and one fill event tell the batches, their bytes and the outcome
    const bytes = batch(1).length + batch(2).length;
    expect(events).toEqual([
      [ZONE_PRODUCE_CHANNELS.store, { batches: 2, bytes, durationMs: expect.any(Number), outcome: 'stored' }],
      [ZONE_PRODUCE_CHANNELS.fill, { batches: 2, bytes, durationMs: expect.any(Number), outcome: 'filled' }],
    ]);
  });

  it('remembers at most maxAccepted acceptances, forgetting the oldest, which its next produce learns again as bytes', async () => {
    // Given a producer's zone side that remembers two acceptances (its share of the memory budget)
    const s = setup({ maxAccepted: 2 });
    const [a, b, c] = [{ name: 'zl-a' }, { name: 'zl-b' }, { name: 'zl-c' }];
    // When the leader accepts three topics, one after the other
    await accepted(s, a);
    await accepted(s, b);
    await accepted(s, c);
    // Then the two latest still go by reference
    for (const topic of [b, c]) {
      const i = info(9);
      const sent = await s.throughZone(i, produce(i, [{ topic, batches: [batch(1)] }]));
      expect(partitionRecords(i, sent).every(isProduceReference)).toBe(true);
    }
    // And the first one was forgotten: its next produce asks the leader again, as bytes
    const i = info(9);
    const request = produce(i, [{ topic: a, batches: [batch(1)] }]);
    expect(await s.throughZone(i, request)).toBe(request);
    expect(s.zoneProduce.stats.batchesAsBytes.notAcceptedYet).toBe(4);
  });

  it("holds a pipelining producer's requests behind its first one until the leader answered it, then references them", async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    // Given a first produce on the connection, not answered yet, and two more behind it
    const i = info(9);
    const first = produce(i, [{ topic, batches: [batch(0)] }]);
    expect(await s.throughZone(i, first)).toBe(first);
    const j = info(9);
    const k = info(9);
    const second = s.egress.onRequest!(j, produce(j, [{ topic, batches: [batch(1)] }]), s.egressConnection);
    const third = s.egress.onRequest!(k, produce(k, [{ topic, batches: [batch(2)] }]), s.egressConnection);
    expect(second).toBeInstanceOf(Promise);
    await new Promise((r) => setTimeout(r, 20));
    expect(s.zoneStore.objects.size).toBe(0);
    // When the leader accepts the first
    s.back(i, answer(i, first));
    // Then the held ones go by reference
    expect(partitionRecords(j, forwarded(await second)).every(isProduceReference)).toBe(true);
    expect(partitionRecords(k, forwarded(await third)).every(isProduceReference)).toBe(true);
    expect(s.zoneProduce.stats.batchesAsBytes.notAcceptedYet).toBe(1);
  });

  it('fills byte-exactly at every Produce version, by name and by topic id', async () => {
    for (const version of [3, 7, 8, 9, 11, 12, 13]) {
      const s = setup();
      const topic = version >= 13 ? { topicId: TOPIC_ID } : { name: 'zl-orders' };
      await accepted(s, topic, version);
      const i = info(version);
      const request = produce(i, [{ topic, batches: [batch(1), batch(2), batch(3)] }]);
      const sent = await s.throughZone(i, request);
      expect(partitionRecords(i, sent).every(isProduceReference), `v${version}`).toBe(true);
      expect(forwarded(await s.throughLeader(i, sent)).equals(request), `v${version}`).toBe(true);
    }
  });

  it('indexes and publishes filled batches where they are, in zone-a, and uploads nothing again', async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    await accepted(s, topic);
    const i = info(9);
    const sent = await s.throughZone(i, produce(i, [{ topic, batches: [batch(1)] }]));
    const toBroker = forwarded(await s.throughLeader(i, sent));
    // When the broker appends it and answers
    await s.walFilter.onResponse(i, answer(i, toBroker));
    await new Promise((r) => setTimeout(r, 30));
    // Then the leader's metadata names zone-a's object, and the leader's own store got nothing
    const [key] = [...s.zoneStore.objects.keys()];
    expect(s.published).toMatchObject([
      { store: ZONE_A_STORE, objectKey: key, topic: 'zl-orders', baseOffset: 100n },
    ]);
    expect(s.leaderStore.objects.size).toBe(0);
    expect(s.walFilter.stats).toMatchObject({ batchesStoredElsewhere: 1, batchesCopied: 0 });
    // And a follower fetch finds the batch (as the leader appended it) at its place in zone-a's bucket
    const logBatch = Buffer.from(batch(1));
    logBatch.writeBigInt64BE(100n, 0);
    logBatch.writeInt32BE(4, 12);
    const found = s.index.lookup('zl-orders', 0, recordBatchAt(logBatch, 0) as RecordBatch);
    expect(found.found?.location).toMatchObject({ store: ZONE_A_STORE, objectKey: key });
  });

  it('stores zone-local objects whatever the sealing policy says of their size, and the leader indexes them whatever its group’s mode', async () => {
    // Given both sidecars under a sealing policy no object pays under, and a mode=auto topic
    // without durable ack (its leader-side group replicates inline)
    const s = setup({ sealing: nothingPays, zoneLocalTopics: { mode: 'auto', durableAck: false } });
    const topic = { name: 'zl-orders' };
    await accepted(s, topic);
    // When a produce of one small batch passes the producer's zone sidecar
    const i = info(9);
    const request = produce(i, [{ topic, batches: [batch(1)] }]);
    const sent = await s.throughZone(i, request);
    // Then its object is stored in zone-a (what it saves is the produce's hop, which the policy
    // does not price) and a reference crosses the zone
    expect(s.zoneStore.objects.size).toBe(1);
    expect(s.writer.stats.objectsAbandoned).toBe(0);
    expect(partitionRecords(i, sent).every(isProduceReference)).toBe(true);
    // And the leader fills it and indexes it where it is, without showing it to its policy
    const toBroker = forwarded(await s.throughLeader(i, sent));
    expect(toBroker.equals(request)).toBe(true);
    await s.walFilter.onResponse(i, answer(i, toBroker));
    expect(s.walFilter.stats).toMatchObject({ batchesStoredElsewhere: 1, batchesNotCopiedInlineMode: 0 });
    expect(s.leaderSealing!.stats(Date.now())).toEqual([]);
    const logBatch = Buffer.from(batch(1));
    logBatch.writeBigInt64BE(100n, 0);
    logBatch.writeInt32BE(4, 12);
    const found = s.index.lookup('zl-orders', 0, recordBatchAt(logBatch, 0) as RecordBatch);
    expect(found.found?.location).toMatchObject({ store: ZONE_A_STORE });
  });

  it('keeps bytes for topics not zone-local, acks=0, a degraded store, and a leader in its own zone', async () => {
    const s = setup();
    await accepted(s, { name: 'zl-orders' });
    await accepted(s, { name: 'wal-plain' });
    const cases: Array<[string, () => Promise<void> | void, Topic, number]> = [
      ['not zone-local', () => undefined, { name: 'wal-plain' }, -1],
      ['acks=0', () => undefined, { name: 'zl-orders' }, 0],
      ['store degraded', () => s.health.markDegraded('test'), { name: 'zl-orders' }, -1],
    ];
    for (const [name, given, topic, acks] of cases) {
      await given();
      const i = info(9);
      const request = produce(i, [{ topic, batches: [batch(1)] }], acks);
      expect(await s.throughZone(i, request), name).toBe(request);
    }
    expect(s.zoneStore.objects.size).toBe(0);
    const same = setup({ leaderZone: 'zone-a' });
    await accepted(same, { name: 'zl-orders' });
    const i = info(9);
    const request = produce(i, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]);
    expect(await same.throughZone(i, request)).toBe(request);
    expect(same.zoneStore.objects.size).toBe(0);
    expect(same.zoneProduce.stats.batchesAsBytes.sameZone).toBeGreaterThan(0);
  });

  it('sends bytes when the store write fails, and marks the store degraded', async () => {
    // Given a store that fails every put (the writer retries until its deadline; the zone side
    // waits at most its own store timeout)
    const s = setup({ storeTimeoutMs: 50 });
    await accepted(s, { name: 'zl-orders' });
    s.zoneStore.onPut = async () => {
      throw new Error('store down');
    };
    const i = info(9);
    const request = produce(i, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]);
    // Then the request goes on as the client's bytes
    expect(await s.throughZone(i, request)).toBe(request);
    expect(s.zoneProduce.stats.batchesAsBytes.storeFailed).toBe(1);
    expect(s.health.usable).toBe(false);
  });

  it('never stores a batch of a producer the leader refused: denied topics stay bytes', async () => {
    const s = setup();
    const topic = { name: 'zl-secret' };
    // Given a first produce the broker refuses (no write ACL)
    const i = info(9);
    const first = produce(i, [{ topic, batches: [batch(0)] }]);
    expect(await s.throughZone(i, first)).toBe(first);
    s.back(
      i,
      answer(i, first, () => ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    );
    // When the producer retries
    const j = info(9);
    const retry = produce(j, [{ topic, batches: [batch(0)] }]);
    // Then it goes as bytes again, and nothing was ever stored
    expect(await s.throughZone(j, retry)).toBe(retry);
    s.back(
      j,
      answer(j, retry, () => ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    );
    expect(s.writer.stats.batchesUploaded + s.zoneStore.objects.size).toBe(0);
    // And an ACL revoked after acceptance sends the topic back to bytes
    await accepted(s, { name: 'zl-orders' });
    const k = info(9);
    const sent = await s.throughZone(k, produce(k, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]));
    expect(partitionRecords(k, sent).every(isProduceReference)).toBe(true);
    s.back(
      k,
      answer(k, sent, () => ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    );
    const l = info(9);
    const after = produce(l, [{ topic: { name: 'zl-orders' }, batches: [batch(2)] }]);
    expect(await s.throughZone(l, after)).toBe(after);
  });

  it("shares a leader's acceptance among one producer's connections: anonymous ones, one SASL user's, not another's", async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    const referenced = async (connection: FilterConnection) => {
      const i = info(9);
      const out = await s.throughZone(i, produce(i, [{ topic, batches: [batch(1)] }]), connection);
      return partitionRecords(i, out).every(isProduceReference);
    };
    // Given a leader that accepted the topic from a connection without SASL (User:ANONYMOUS)
    await accepted(s, topic);
    // Then another connection without SASL goes by reference at once
    expect(await referenced({ log })).toBe(true);
    // And a connection logged in as alice asks first, then goes by reference, as does her next one
    const alice = await login(s, 'SCRAM-SHA-512', Buffer.from('n,,n=alice,r=abc123'));
    expect(await referenced(alice)).toBe(false);
    await acceptOn(s, alice, topic);
    expect(await referenced(alice)).toBe(true);
    expect(await referenced(await login(s, 'PLAIN', Buffer.from('\u0000alice\u0000secret')))).toBe(true);
    // But bob, and a login whose user the sidecar cannot read, ask for themselves
    expect(await referenced(await login(s, 'PLAIN', Buffer.from('\u0000bob\u0000secret')))).toBe(false);
    expect(
      await referenced(await login(s, 'OAUTHBEARER', Buffer.from('n,,\u0001auth=Bearer x\u0001\u0001'))),
    ).toBe(false);
  });

  it('answers NOT_ENOUGH_REPLICAS for every partition and forwards nothing when a reference cannot be filled', async () => {
    for (const [name, broken] of [
      ['store not readable', setup({ readable: false })],
      ['object gone', setup()],
      ['bytes changed', setup()],
    ] as const) {
      await accepted(broken, { name: 'zl-orders' });
      const i = info(9);
      const request = produce(i, [
        { topic: { name: 'zl-orders' }, batches: [batch(1)] },
        { topic: { name: 'wal-plain' }, batches: [batch(2)] },
      ]);
      const sent = await broken.throughZone(i, request);
      if (name === 'object gone') broken.zoneStore.objects.clear();
      if (name === 'bytes changed') {
        const [object] = [...broken.zoneStore.objects.values()];
        const [entry] = parseWalObject(object!).entries;
        object![entry!.position + entry!.length - 3]! ^= 0xff;
      }
      const decision = await broken.throughLeader(i, sent);
      // Then the broker gets nothing, and every partition (the inline one too) is told to retry
      expect(decision.action, name).toBe('respond');
      const response = (decision as { response: Buffer }).response;
      expect(response.readInt32BE(4), name).toBe(i.correlationId);
      expect(errorsIn(i, response), name).toEqual([
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS,
      ]);
      expect(broken.fill.stats.requestsRefused, name).toBe(1);
    }
  });

  it('gives up a fill that takes longer than its timeout, forwarding nothing', async () => {
    const s = setup();
    await accepted(s, { name: 'zl-orders' });
    const i = info(9);
    const sent = await s.throughZone(i, produce(i, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]));
    // Given a leader side whose store never answers
    const frozen = { read: () => new Promise(() => undefined) } as unknown as WalRangeReader;
    const fill = new ProduceFillFilter({ readerFor: () => frozen, timeoutMs: 30, log });
    const decision = await fill.onRequest(i, sent, { log });
    expect(decision.action).toBe('respond');
    expect(fill.stats.failures.timedOut).toBe(1);
  });

  it('sends a leader that could not fill bytes for 30 s, then references again', async () => {
    let now = 1_000_000;
    const s = setup({ now: () => now });
    await accepted(s, { name: 'zl-orders' });
    const i = info(9);
    const sent = await s.throughZone(i, produce(i, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]));
    // When the leader's answer is NOT_ENOUGH_REPLICAS for the referenced partition
    s.back(
      i,
      answer(i, sent, () => ErrorCode.NOT_ENOUGH_REPLICAS),
    );
    // Then the next requests to it go as bytes
    const j = info(9);
    const retry = produce(j, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]);
    expect(await s.throughZone(j, retry)).toBe(retry);
    expect(s.zoneProduce.stats).toMatchObject({ fallbacksStarted: 1, batchesAsBytes: { leaderFallback: 1 } });
    // And after 30 s, references again
    now += 30_001;
    const k = info(9);
    const later = await s.throughZone(k, produce(k, [{ topic: { name: 'zl-orders' }, batches: [batch(2)] }]));
    expect(partitionRecords(k, later).every(isProduceReference)).toBe(true);
  });

  it('turns a broker refusing an unfilled reference into a retriable answer, and falls back to bytes', async () => {
    const s = setup();
    await accepted(s, { name: 'zl-orders' });
    const i = info(9);
    const sent = await s.throughZone(i, produce(i, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]));
    // Given a leader side that gave the reference to the broker unfilled (no zone-local produce there)
    const out = s.back(
      i,
      answer(i, sent, () => ErrorCode.INVALID_RECORD),
    );
    // Then the producer is told to retry, nothing having been appended, and the retry goes as bytes
    expect(errorsIn(i, out)).toEqual([ErrorCode.NOT_ENOUGH_REPLICAS]);
    expect(s.zoneProduce.stats.refusalsRewritten).toBe(1);
    expect(s.zoneProduce.inFallback(LEADER)).toBe(true);
  });

  it('changes a client-sent reference so that no leader fills it', async () => {
    const s = setup();
    await accepted(s, { name: 'zl-orders' });
    // Given a client that forges a reference to some object it wants copied into its topic
    const forged = (await (async () => {
      const helper = setup();
      await accepted(helper, { name: 'zl-orders' });
      const h = info(9);
      return partitionRecords(
        h,
        await helper.throughZone(h, produce(h, [{ topic: { name: 'zl-orders' }, batches: [batch(9)] }])),
      )[0]!;
    })()) as Buffer;
    const i = info(9);
    const request = produce(i, [{ topic: { name: 'zl-orders' }, batches: [forged] }]);
    const sent = await s.throughZone(i, request);
    // Then what leaves for the leader is no reference any more (the broker refuses it as it would)
    expect(partitionRecords(i, sent).some(isProduceReference)).toBe(false);
    expect(sent.length).toBe(request.length);
    expect(s.zoneProduce.stats.clientReferencesNeutralized).toBe(1);
    const decision = await s.fill.onRequest(i, sent, { log });
    expect(forwarded(decision)).toBe(sent);
  });
});

describe('zone-local produce: only for a login the broker accepted (issue #24, item 2)', () => {
  /** Objects in zone-a's bucket, batches its writer uploaded and batches referenced, so far. */
  const storedSoFar = (s: ReturnType<typeof setup>) =>
    s.zoneStore.objects.size + s.writer.stats.batchesUploaded + s.zoneProduce.stats.batchesReferenced;
  const baseline = new WeakMap<ReturnType<typeof setup>, number>();
  /** Whether anything was stored (or referenced) since alice's acceptance was set up. */
  const storedAnything = (s: ReturnType<typeof setup>) => storedSoFar(s) > (baseline.get(s) ?? 0);

  async function aliceAccepted(s: ReturnType<typeof setup>, topic: Topic): Promise<void> {
    const alice = await login(s, 'SCRAM-SHA-512', Buffer.from('n,,n=alice,r=abc123'));
    await acceptOn(s, alice, topic);
    // (her next produce would go by reference)
    const i = info(9);
    const sent = await s.throughZone(i, produce(i, [{ topic, batches: [batch(1)] }]), alice);
    expect(partitionRecords(i, sent).every(isProduceReference)).toBe(true);
    baseline.set(s, storedSoFar(s));
  }

  it('holds a Produce pipelined behind a SCRAM login until the broker answers it, and stores nothing when it refuses the password', async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    // Given a leader that accepted alice's produce of the topic
    await aliceAccepted(s, topic);
    // When someone who knows her name logs in as alice with a wrong password, and pipelines a
    // Produce behind the client-final message
    const attacker: FilterConnection = { log };
    saslAnswer(s, await saslSend(s, attacker, { mechanism: 'SCRAM-SHA-512' }));
    saslAnswer(s, await saslSend(s, attacker, { authBytes: Buffer.from('n,,n=alice,r=evil') }));
    const final = await saslSend(s, attacker, { authBytes: SCRAM_FINAL });
    const i = info(9);
    const request = produce(i, [{ topic, batches: [batch(2)] }]);
    const decision = s.egress.onRequest!(i, request, attacker);
    // Then the Produce waits for the broker's word on the login, storing nothing meanwhile
    expect(decision).toBeInstanceOf(Promise);
    await new Promise((r) => setTimeout(r, 20));
    expect(storedAnything(s)).toBe(false);
    // And once the broker refuses the password, it goes as the client's bytes (the broker, which
    // closes the connection, never reads it), and nothing of it was stored
    saslAnswer(s, final, ErrorCode.SASL_AUTHENTICATION_FAILED);
    expect(forwarded(await decision)).toBe(request);
    expect(storedAnything(s)).toBe(false);
    expect(s.zoneProduce.stats.batchesAsBytes.notAuthenticated).toBe(1);
    // And later requests of that connection are never stored either
    const j = info(9);
    const later = produce(j, [{ topic, batches: [batch(3)] }]);
    expect(await s.throughZone(j, later, attacker)).toBe(later);
    expect(storedAnything(s)).toBe(false);
  });

  it('does not take the first SCRAM answer for a login: a Produce behind client-first goes as bytes', async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    await aliceAccepted(s, topic);
    // Given a connection that sent only SCRAM's client-first message, naming alice, and a Produce behind it
    const attacker: FilterConnection = { log };
    saslAnswer(s, await saslSend(s, attacker, { mechanism: 'SCRAM-SHA-512' }));
    const first = await saslSend(s, attacker, { authBytes: Buffer.from('n,,n=alice,r=evil') });
    const i = info(9);
    const request = produce(i, [{ topic, batches: [batch(2)] }]);
    const decision = s.egress.onRequest!(i, request, attacker);
    // When the broker answers client-first without error (server-first: nothing is proven yet)
    saslAnswer(s, first);
    // Then the Produce goes as bytes, nothing stored
    expect(forwarded(await decision)).toBe(request);
    expect(storedAnything(s)).toBe(false);
  });

  it('stores nothing for a PLAIN login refused, nor for a handshake refused', async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    const alice = await login(s, 'PLAIN', Buffer.from('\u0000alice\u0000secret'));
    await acceptOn(s, alice, topic);
    for (const refuse of ['handshake', 'authenticate'] as const) {
      // Given a login as alice, the handshake, SaslAuthenticate and a Produce pipelined
      const attacker: FilterConnection = { log };
      const handshake = await saslSend(s, attacker, { mechanism: 'PLAIN' });
      const auth = await saslSend(s, attacker, { authBytes: Buffer.from('\u0000alice\u0000wrong') });
      const i = info(9);
      const request = produce(i, [{ topic, batches: [batch(2)] }]);
      const decision = s.egress.onRequest!(i, request, attacker);
      // When the broker refuses one of them
      saslAnswer(s, handshake, refuse === 'handshake' ? 33 : 0);
      saslAnswer(s, auth, refuse === 'authenticate' ? ErrorCode.SASL_AUTHENTICATION_FAILED : 0);
      // Then nothing is stored
      expect(forwarded(await decision), refuse).toBe(request);
      expect(storedAnything(s), refuse).toBe(false);
    }
  });

  it('references a Produce pipelined behind a login the broker accepts, once it accepted it', async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    await aliceAccepted(s, topic);
    // Given alice's own login, with a Produce pipelined behind her client-final message
    const connection: FilterConnection = { log };
    saslAnswer(s, await saslSend(s, connection, { mechanism: 'SCRAM-SHA-512' }));
    saslAnswer(s, await saslSend(s, connection, { authBytes: Buffer.from('n,,n=alice,r=abc') }));
    const final = await saslSend(s, connection, { authBytes: SCRAM_FINAL });
    const i = info(9);
    const decision = s.egress.onRequest!(i, produce(i, [{ topic, batches: [batch(2)] }]), connection);
    await new Promise((r) => setTimeout(r, 20));
    expect(storedAnything(s)).toBe(false);
    // When the broker accepts the login
    saslAnswer(s, final);
    // Then the Produce goes by reference, as her acceptance allows
    expect(partitionRecords(i, forwarded(await decision)).every(isProduceReference)).toBe(true);
    expect(s.zoneProduce.stats.requestsHeldForLogin).toBe(1);
  });
});

describe('zone-local produce: bad input as stock answers it (issue #24, item 5)', () => {
  it('hands a Produce the codec refuses to the leader as the client sent it, on both sides', async () => {
    const s = setup();
    await accepted(s, { name: 'zl-orders' });
    // Given a request with bytes after its body (Kafka ignores them; the codec refuses them)
    const i = info(9);
    const request = produce(i, [{ topic: { name: 'zl-orders' }, batches: [batch(1)] }]);
    const trailing = Buffer.concat([request, Buffer.from([1, 2, 3])]);
    trailing.writeInt32BE(trailing.length - 4, 0);
    // Then the producer's zone sidecar forwards it unchanged, storing nothing
    expect(await s.throughZone(i, trailing)).toBe(trailing);
    expect(s.zoneStore.objects.size).toBe(0);
    expect(s.zoneProduce.stats.requestsNotDecoded).toBe(1);
    // And so does the leader's sidecar, for the broker to answer
    expect(forwarded(await s.fill.onRequest(i, trailing, { log }))).toBe(trailing);
    expect(s.fill.stats.requestsNotDecoded).toBe(1);
  });

  it('answers a refusal of its own referenced batch, at Produce v7, only on that connection: other producers keep going by reference', async () => {
    let now = 1_000_000;
    const s = setup({ now: () => now });
    const topic = { name: 'zl-orders' };
    await accepted(s, topic, 7);
    // Given a producer whose (CRC-valid) batch the broker refuses, INVALID_RECORD without a message (v7)
    const bad: FilterConnection = { log };
    const i = info(7);
    const request = produce(i, [{ topic, batches: [batch(1)] }]);
    const sent = await s.throughZone(i, request, bad);
    expect(partitionRecords(i, sent).every(isProduceReference)).toBe(true);
    const out = s.back(
      i,
      answer(i, request, () => ErrorCode.INVALID_RECORD),
    );
    // Then that producer is told to retry (the leader side may not have filled it), and its
    // retry goes as bytes, for the broker to judge as stock
    expect(errorsIn(i, out)).toEqual([ErrorCode.NOT_ENOUGH_REPLICAS]);
    const j = info(7);
    const retry = produce(j, [{ topic, batches: [batch(1)] }]);
    expect(await s.throughZone(j, retry, bad)).toBe(retry);
    const stock = answer(j, retry, () => ErrorCode.INVALID_RECORD);
    expect(s.back(j, stock)).toBe(stock);
    // And every other producer of that leader still goes by reference
    expect(s.zoneProduce.inFallback(LEADER)).toBe(false);
    const k = info(7);
    const other = await s.throughZone(k, produce(k, [{ topic, batches: [batch(2)] }]), { log });
    expect(partitionRecords(k, other).every(isProduceReference)).toBe(true);
    expect(s.zoneProduce.stats).toMatchObject({
      fallbacksStarted: 0,
      connectionFallbacksStarted: 1,
      batchesAsBytes: { connectionFallback: 1 },
    });
    // And after fallbackMs the producer's connection goes by reference again
    now += 30_001;
    const l = info(7);
    const again = await s.throughZone(l, produce(l, [{ topic, batches: [batch(3)] }]), bad);
    expect(partitionRecords(l, again).every(isProduceReference)).toBe(true);
  });

  it("passes the broker's refusal of a batch through unchanged once the connection's leader side is known to fill", async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    await accepted(s, topic, 7);
    const connection: FilterConnection = { log };
    // Given a connection whose referenced batch the leader appended (its leader side fills)
    const i = info(7);
    const request = produce(i, [{ topic, batches: [batch(1)] }]);
    await s.throughZone(i, request, connection);
    s.back(i, answer(i, request));
    // When a later batch of it is refused CORRUPT_MESSAGE (v7: no message)
    const j = info(7);
    const next = produce(j, [{ topic, batches: [batch(2)] }]);
    expect(partitionRecords(j, await s.throughZone(j, next, connection)).every(isProduceReference)).toBe(
      true,
    );
    const refused = answer(j, next, () => ErrorCode.CORRUPT_MESSAGE);
    // Then the producer gets the broker's answer as it came, and nothing falls back
    expect(s.back(j, refused)).toBe(refused);
    expect(s.zoneProduce.stats).toMatchObject({ refusalsRewritten: 0, connectionFallbacksStarted: 0 });
    expect(s.zoneProduce.inFallback(LEADER)).toBe(false);
  });

  it('sends a batch with a wrong CRC as bytes, for the broker to refuse, and stores nothing of it', async () => {
    const s = setup();
    const topic = { name: 'zl-orders' };
    await accepted(s, topic);
    const corrupt = Buffer.from(batch(1));
    corrupt[corrupt.length - 1]! ^= 0xff;
    const i = info(9);
    const request = produce(i, [{ topic, batches: [corrupt] }]);
    expect(await s.throughZone(i, request)).toBe(request);
    expect(s.zoneStore.objects.size).toBe(0);
    expect(s.zoneProduce.stats.batchesAsBytes.notOneBatch).toBe(1);
  });
});
