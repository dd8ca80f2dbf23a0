// A follower's partition whose new leader has not applied its leader change yet (UNKNOWN_LEADER_EPOCH)
// is asked again every 20 ms with a sessionless replica fetch of the sidecar's own, and delivered
// with the leader's later answer instead of the error (which costs the follower Kafka's 1 s
// backoff); at most for 1 s, and only for what the follower asked, as it asked it.
import {
  ApiKey,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeFetchRequest,
  encodeFetchResponse,
  encodeRequestHeader,
  encodeResponseHeader,
  type FetchRequest,
  type FetchResponse,
  type FetchResponsePartition,
  responseHeaderVersion,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { sampleBatch } from '../../../shared/test/helpers/record-batches.js';
import {
  EPOCH_WAIT_MAX_MS,
  EPOCH_WAIT_RETRY_MS,
  FetchEpochWaitFilter,
  UNKNOWN_LEADER_EPOCH,
} from '../../src/filters/fetch-epoch-wait.js';
import { createLogger } from '../../src/log.js';
import type { FilterConnection, RequestInfo } from '../../src/net/frame-filter.js';

const TOPIC_ID = 'ab'.repeat(16);
const VERSION = 17;
const FENCED_LEADER_EPOCH = 74;

function sized(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

/** An incremental replica fetch of partitions 0 and 1, as broker 3's fetcher sends it. */
function followerFetch(correlationId: number, replicaId = 3): { info: RequestInfo; frame: Buffer } {
  const request: FetchRequest = {
    maxWaitMs: 500,
    minBytes: 1,
    maxBytes: 10 << 20,
    isolationLevel: 0,
    sessionId: 4242,
    sessionEpoch: 17,
    topics: [
      {
        topicId: TOPIC_ID,
        partitions: [
          {
            partition: 0,
            currentLeaderEpoch: 1,
            fetchOffset: 611n,
            lastFetchedEpoch: 0,
            logStartOffset: 0n,
            partitionMaxBytes: 1 << 20,
          },
          {
            partition: 1,
            currentLeaderEpoch: 4,
            fetchOffset: 90n,
            lastFetchedEpoch: 4,
            logStartOffset: 0n,
            partitionMaxBytes: 1 << 20,
          },
        ],
      },
    ],
    forgottenTopicsData: [],
    rackId: 'zone-b',
    replicaState: { replicaId, replicaEpoch: 21n },
  };
  const frame = sized([
    encodeRequestHeader({
      apiKey: ApiKey.Fetch,
      apiVersion: VERSION,
      correlationId,
      clientId: 'broker-3-fetcher-0',
    }),
    encodeFetchRequest(request, VERSION),
  ]);
  return { info: { apiKey: ApiKey.Fetch, apiVersion: VERSION, correlationId }, frame };
}

function partition(index: number, fields: Partial<FetchResponsePartition>): FetchResponsePartition {
  return {
    partitionIndex: index,
    errorCode: 0,
    highWatermark: -1n,
    lastStableOffset: -1n,
    logStartOffset: -1n,
    abortedTransactions: null,
    preferredReadReplica: -1,
    records: Buffer.alloc(0),
    ...fields,
  };
}

function responseFrame(
  correlationId: number,
  partitions: FetchResponsePartition[],
  sessionId = 4242,
): Buffer {
  const body: FetchResponse = {
    throttleTimeMs: 0,
    errorCode: 0,
    sessionId,
    responses: [{ topicId: TOPIC_ID, partitions }],
  };
  return sized([
    encodeResponseHeader({ correlationId }, responseHeaderVersion(ApiKey.Fetch, VERSION)!),
    encodeFetchResponse(body, VERSION),
  ]);
}

function decoded(frame: Buffer): FetchResponse {
  const payload = frame.subarray(4);
  const header = decodeResponseHeader(payload, responseHeaderVersion(ApiKey.Fetch, VERSION)!);
  return decodeFetchResponse(payload.subarray(header.headerLength), VERSION);
}

const records = sampleBatch(611n, 3, 20);

/** A connection whose upstream answers the sidecar's re-asks from `answers`, in turn. */
function harness(answers: Array<(correlationId: number) => Buffer>) {
  let now = 1_000;
  const slept: number[] = [];
  const reasks: Array<{ header: ReturnType<typeof decodeRequestHeader>; request: FetchRequest }> = [];
  const connection: FilterConnection = {
    log: createLogger('silent'),
    sendUpstream: async (frame, correlationId) => {
      const payload = frame.subarray(4);
      const header = decodeRequestHeader(payload);
      expect(header.correlationId).toBe(correlationId);
      reasks.push({ header, request: decodeFetchRequest(payload.subarray(header.headerLength), VERSION) });
      const answer = answers.shift();
      if (answer === undefined) throw new Error('connection closed');
      return answer(correlationId);
    },
  };
  const filter = new FetchEpochWaitFilter({
    log: createLogger('silent'),
    now: () => now,
    sleep: async (ms) => {
      slept.push(ms);
      now += ms;
    },
  });
  return { filter, connection, slept, reasks };
}

describe('FetchEpochWaitFilter', () => {
  it("holds a partition the new leader does not yet lead and delivers the leader's later answer in its place", async () => {
    // Given a leader that answers partition 0 UNKNOWN_LEADER_EPOCH twice more, then with records
    const unknown = (id: number) => responseFrame(id, [partition(0, { errorCode: UNKNOWN_LEADER_EPOCH })], 0);
    const h = harness([
      unknown,
      unknown,
      (id) =>
        responseFrame(
          id,
          [partition(0, { highWatermark: 612n, lastStableOffset: 612n, logStartOffset: 0n, records })],
          0,
        ),
    ]);
    const { info, frame } = followerFetch(7);
    const decision = h.filter.onRequest(info, frame, h.connection);
    // The follower's request goes on untouched
    expect(decision).toEqual({ action: 'forward', frame, expectResponse: true });

    // When the broker answers partition 0 UNKNOWN_LEADER_EPOCH beside partition 1's records
    const first = responseFrame(7, [
      partition(0, { errorCode: UNKNOWN_LEADER_EPOCH, currentLeader: { leaderId: 2, leaderEpoch: 0 } }),
      partition(1, { highWatermark: 95n, lastStableOffset: 95n, logStartOffset: 0n, records }),
    ]);
    const out = decoded(await h.filter.onResponse(info, first));

    // Then partition 0 carries the leader's later answer, exactly
    const [p0, p1] = out.responses[0]!.partitions;
    expect(p0).toMatchObject({
      partitionIndex: 0,
      errorCode: 0,
      highWatermark: 612n,
      lastStableOffset: 612n,
    });
    expect(Buffer.compare(p0!.records!, records)).toBe(0);
    // And partition 1 and the session are as the broker wrote them
    expect(p1).toMatchObject({ errorCode: 0, highWatermark: 95n });
    expect(Buffer.compare(p1!.records!, records)).toBe(0);
    expect(out.sessionId).toBe(4242);
    // And it was asked three times, EPOCH_WAIT_RETRY_MS apart, each a sessionless replica fetch of
    // that partition alone, as the follower asked it, answered at once
    expect(h.slept).toEqual([EPOCH_WAIT_RETRY_MS, EPOCH_WAIT_RETRY_MS, EPOCH_WAIT_RETRY_MS]);
    expect(h.reasks).toHaveLength(3);
    const { header, request } = h.reasks[0]!;
    expect(header.correlationId).toBeLessThan(0);
    expect(header.clientId).toBe('broker-3-fetcher-0');
    expect(request).toMatchObject({
      maxWaitMs: 0,
      sessionId: 0,
      sessionEpoch: -1,
      forgottenTopicsData: [],
      rackId: 'zone-b',
      replicaState: { replicaId: 3, replicaEpoch: 21n },
    });
    expect(request.topics).toEqual([
      {
        topicId: TOPIC_ID,
        partitions: [
          expect.objectContaining({
            partition: 0,
            currentLeaderEpoch: 1,
            fetchOffset: 611n,
            lastFetchedEpoch: 0,
          }),
        ],
      },
    ]);
    expect(new Set(h.reasks.map((r) => r.header.correlationId)).size).toBe(3);
    expect(h.filter.stats).toMatchObject({ partitionsAnsweredLater: 1, reasks: 3 });
  });

  it('finds a partition in whichever entry of its topic it came: a broker splits a topic when the session order changes topic', async () => {
    // Given a response whose topic comes twice, partition 1 first, the waiting partition 0 in the
    // second entry (a session's partitions move to its end as they change), and a re-ask answer
    // split the same way
    const split = (
      correlationId: number,
      first: FetchResponsePartition[],
      second: FetchResponsePartition[],
    ) => {
      const body: FetchResponse = {
        throttleTimeMs: 0,
        errorCode: 0,
        sessionId: 4242,
        responses: [
          { topicId: TOPIC_ID, partitions: first },
          { topicId: 'ef'.repeat(16), partitions: [partition(3, { highWatermark: 7n })] },
          { topicId: TOPIC_ID, partitions: second },
        ],
      };
      return sized([
        encodeResponseHeader({ correlationId }, responseHeaderVersion(ApiKey.Fetch, VERSION)!),
        encodeFetchResponse(body, VERSION),
      ]);
    };
    const h = harness([
      (id) =>
        split(
          id,
          [],
          [partition(0, { highWatermark: 612n, lastStableOffset: 612n, logStartOffset: 0n, records })],
        ),
    ]);
    const { info, frame } = followerFetch(14);
    h.filter.onRequest(info, frame, h.connection);
    const first = split(
      14,
      [partition(1, { highWatermark: 95n, records })],
      [partition(0, { errorCode: UNKNOWN_LEADER_EPOCH })],
    );

    // When it passes the filter
    const out = decoded(await h.filter.onResponse(info, first));

    // Then partition 0, in the third entry, carries the leader's later answer; the rest is as sent
    expect(out.responses.map((t) => t.partitions.map((p) => [p.partitionIndex, p.errorCode]))).toEqual([
      [[1, 0]],
      [[3, 0]],
      [[0, 0]],
    ]);
    expect(out.responses[2]!.partitions[0]!.highWatermark).toBe(612n);
    expect(h.reasks).toHaveLength(1);
    expect(h.reasks[0]!.request.topics).toHaveLength(1);
  });

  it('passes the error as the broker wrote it once EPOCH_WAIT_MAX_MS has gone by', async () => {
    const h = harness(
      Array.from(
        { length: 100 },
        () => (id: number) => responseFrame(id, [partition(0, { errorCode: UNKNOWN_LEADER_EPOCH })], 0),
      ),
    );
    const { info, frame } = followerFetch(8);
    h.filter.onRequest(info, frame, h.connection);
    const first = responseFrame(8, [partition(0, { errorCode: UNKNOWN_LEADER_EPOCH })]);
    expect(await h.filter.onResponse(info, first)).toBe(first);
    expect(h.slept.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(EPOCH_WAIT_MAX_MS);
    expect(h.reasks.length).toBe(Math.floor(EPOCH_WAIT_MAX_MS / EPOCH_WAIT_RETRY_MS));
    expect(h.filter.stats.passed.waitedLongEnough).toBe(1);
  });

  it('passes the broker’s answer on when a re-ask fails, and keeps what earlier re-asks answered', async () => {
    // Partition 0 answered by the first re-ask; partition 1 still waiting when the connection closes
    const h = harness([
      (id) =>
        responseFrame(
          id,
          [partition(0, { highWatermark: 612n, records }), partition(1, { errorCode: UNKNOWN_LEADER_EPOCH })],
          0,
        ),
    ]);
    const { info, frame } = followerFetch(9);
    h.filter.onRequest(info, frame, h.connection);
    const first = responseFrame(9, [
      partition(0, { errorCode: UNKNOWN_LEADER_EPOCH }),
      partition(1, { errorCode: UNKNOWN_LEADER_EPOCH }),
    ]);
    const [p0, p1] = decoded(await h.filter.onResponse(info, first)).responses[0]!.partitions;
    expect(p0).toMatchObject({ errorCode: 0, highWatermark: 612n });
    expect(p1!.errorCode).toBe(UNKNOWN_LEADER_EPOCH);
    expect(h.filter.stats.passed.reaskFailed).toBe(1);
  });

  it('does not ask again for a partition the request did not carry (an unchanged partition of an incremental fetch)', async () => {
    const h = harness([]);
    const { info, frame } = followerFetch(10);
    h.filter.onRequest(info, frame, h.connection);
    const first = responseFrame(10, [partition(5, { errorCode: UNKNOWN_LEADER_EPOCH })]);
    expect(await h.filter.onResponse(info, first)).toBe(first);
    expect(h.reasks).toEqual([]);
    expect(h.filter.stats.passed.notAsked).toBe(1);
  });

  it('leaves every other error, consumers’ fetches and answers it cannot read exactly as they came', async () => {
    const h = harness([]);
    const { info, frame } = followerFetch(11);
    h.filter.onRequest(info, frame, h.connection);
    const fenced = responseFrame(11, [partition(0, { errorCode: FENCED_LEADER_EPOCH })]);
    expect(await h.filter.onResponse(info, fenced)).toBe(fenced);

    // A consumer's fetch (replica id -1) is not followed
    const consumer = followerFetch(12, -1);
    h.filter.onRequest(consumer.info, consumer.frame, h.connection);
    const answer = responseFrame(12, [partition(0, { errorCode: UNKNOWN_LEADER_EPOCH })]);
    expect(await h.filter.onResponse(consumer.info, answer)).toBe(answer);

    const garbageInfo = followerFetch(13);
    h.filter.onRequest(garbageInfo.info, garbageInfo.frame, h.connection);
    const garbage = Buffer.from([0, 0, 0, 6, 0, 0, 0, 13, 0xff, 0xff]);
    expect(await h.filter.onResponse(garbageInfo.info, garbage)).toBe(garbage);
    expect(h.reasks).toEqual([]);
  });
});
