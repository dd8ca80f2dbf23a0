import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFetchRequest,
  decodeFetchResponse,
  encodeFetchRequest,
  encodeFetchResponse,
  type FetchRequest,
  type FetchResponse,
  fetchReplicaId,
  recordBatches,
} from '../../src/index.js';
import { fetchRequest, fetchResponse } from '../helpers/arbitraries.js';
import { sampleBatch } from '../helpers/record-batches.js';
import { expectExactRoundTrip, hex, protocolErrorOf } from '../helpers/round-trip.js';

const VERSIONS = Array.from({ length: 15 }, (_, i) => i + 4);
const TOPIC_ID = '6f1e2d3c4b5a69788796a5b4c3d2e1f0';
const DIR_ID = '0123456789abcdef0123456789abcdef';
const CAPABILITY = { tag: 10_000, data: Buffer.from('walproxy') };

/** A follower-style request using every field the version has. */
function sampleRequest(v: number): FetchRequest {
  const ref = v >= 13 ? { topicId: TOPIC_ID } : { topic: 'orders' };
  return {
    replicaId: v <= 14 ? 2 : undefined,
    maxWaitMs: 500,
    minBytes: 1,
    maxBytes: 10_485_760,
    isolationLevel: 0,
    sessionId: v >= 7 ? 123_456 : undefined,
    sessionEpoch: v >= 7 ? 7 : undefined,
    topics: [
      {
        ...ref,
        partitions: [
          {
            partition: 0,
            currentLeaderEpoch: v >= 9 ? 5 : undefined,
            fetchOffset: 1000n,
            lastFetchedEpoch: v >= 12 ? 4 : undefined,
            logStartOffset: v >= 5 ? 0n : undefined,
            partitionMaxBytes: 1_048_576,
            replicaDirectoryId: v >= 17 ? DIR_ID : undefined,
            highWatermark: v >= 18 ? 990n : undefined,
          },
        ],
      },
    ],
    forgottenTopicsData: v >= 7 ? [{ ...ref, partitions: [3, 4] }] : undefined,
    rackId: v >= 11 ? 'use1-az1' : undefined,
    clusterId: v >= 12 ? 'Xy3kLm' : undefined,
    replicaState: v >= 15 ? { replicaId: 2, replicaEpoch: 77n } : undefined,
    taggedFields: v >= 12 ? [CAPABILITY] : undefined,
  };
}

/** A response with two real batches and a partial trailing one, as a broker slices the log. */
function sampleResponse(v: number): FetchResponse {
  const ref = v >= 13 ? { topicId: TOPIC_ID } : { topic: 'orders' };
  const first = sampleBatch(1000n, 3, 50);
  const second = sampleBatch(1003n, 2, 80, 2);
  const records = Buffer.concat([first, second, sampleBatch(1005n, 4, 10, 3).subarray(0, 40)]);
  const flex = v >= 12;
  return {
    throttleTimeMs: 0,
    errorCode: v >= 7 ? 0 : undefined,
    sessionId: v >= 7 ? 123_456 : undefined,
    responses: [
      {
        ...ref,
        partitions: [
          {
            partitionIndex: 0,
            errorCode: 0,
            highWatermark: 1009n,
            lastStableOffset: 1009n,
            logStartOffset: v >= 5 ? 0n : undefined,
            abortedTransactions: [{ producerId: 9n, firstOffset: 900n }],
            preferredReadReplica: v >= 11 ? -1 : undefined,
            records,
          },
          {
            partitionIndex: 1,
            errorCode: 6,
            highWatermark: -1n,
            lastStableOffset: -1n,
            logStartOffset: v >= 5 ? -1n : undefined,
            abortedTransactions: null,
            preferredReadReplica: v >= 11 ? -1 : undefined,
            records: Buffer.alloc(0),
            divergingEpoch: flex ? { epoch: 3, endOffset: 950n } : undefined,
            currentLeader: flex ? { leaderId: 3, leaderEpoch: 6 } : undefined,
            snapshotId: flex ? { endOffset: 800n, epoch: 2 } : undefined,
          },
        ],
      },
    ],
    nodeEndpoints:
      v >= 16 ? [{ nodeId: 3, host: 'kafka-3.kafka-headless', port: 9192, rack: 'use1-az3' }] : undefined,
  };
}

describe('Fetch request', () => {
  it.each(VERSIONS)('v%i round-trips a constructed message byte-exactly', (v) => {
    expectExactRoundTrip(encodeFetchRequest, decodeFetchRequest, sampleRequest(v), v);
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(fetchRequest(v), (m) => {
        expectExactRoundTrip(encodeFetchRequest, decodeFetchRequest, m, v);
      }),
      { numRuns: 60 },
    );
  });

  it('v14 carries ReplicaId as the first body field and v15 moves it to tag 1 (KIP-903)', () => {
    // Given the same empty follower fetch at v14 and v15
    const base: FetchRequest = {
      maxWaitMs: 500,
      minBytes: 1,
      maxBytes: 0x3200000,
      isolationLevel: 0,
      sessionId: 0,
      sessionEpoch: -1,
      topics: [],
      forgottenTopicsData: [],
      rackId: '',
    };
    const common = '000001f4 00000001 03200000 00 00000000 ffffffff 01 01 01';
    // Then v14 starts with ReplicaId and ends with an empty tag buffer
    expect(encodeFetchRequest({ ...base, replicaId: 2 }, 14)).toEqual(hex(`00000002 ${common} 00`));
    // And v15 has no ReplicaId in the body, and ReplicaState{2, epoch 77} as tag 1 of 13 bytes
    const v15 = hex(`${common} 01 01 0d 00000002 000000000000004d 00`);
    expect(encodeFetchRequest({ ...base, replicaState: { replicaId: 2, replicaEpoch: 77n } }, 15)).toEqual(
      v15,
    );
    expect(decodeFetchRequest(v15, 15).replicaState).toEqual({ replicaId: 2, replicaEpoch: 77n });
    expect(decodeFetchRequest(v15, 15).replicaId).toBeUndefined();
  });

  it('tells a follower from a consumer on both sides of v15', () => {
    // A follower: ReplicaId in the body up to v14, in ReplicaState from v15.
    expect(fetchReplicaId(decodeFetchRequest(encodeFetchRequest(sampleRequest(14), 14), 14))).toBe(2);
    expect(fetchReplicaId(decodeFetchRequest(encodeFetchRequest(sampleRequest(15), 15), 15))).toBe(2);
    // A consumer: -1 in the body up to v14, no ReplicaState tag from v15.
    const consumer = (v: number): FetchRequest => ({
      ...sampleRequest(v),
      replicaId: v <= 14 ? -1 : undefined,
      replicaState: undefined,
    });
    expect(fetchReplicaId(decodeFetchRequest(encodeFetchRequest(consumer(14), 14), 14))).toBe(-1);
    const v15 = decodeFetchRequest(encodeFetchRequest(consumer(15), 15), 15);
    expect(v15.replicaState).toBeUndefined();
    expect(fetchReplicaId(v15)).toBe(-1);
  });

  it('keeps tag 1 raw below v15, where it is not ReplicaState', () => {
    const body = hex('00000002 000001f4 00000001 03200000 00 00000000 ffffffff 01 01 01 01 01 02 abcd');
    const m = decodeFetchRequest(body, 14);
    expect(m.replicaState).toBeUndefined();
    expect(m.taggedFields).toEqual([{ tag: 1, data: hex('abcd') }]);
    expect(encodeFetchRequest(m, 14)).toEqual(body);
  });

  it('names topics up to v12 and identifies them by id from v13 (KIP-516)', () => {
    const v12 = encodeFetchRequest(sampleRequest(12), 12);
    const v13 = encodeFetchRequest(sampleRequest(13), 13);
    // The first topic follows ReplicaId, the six fixed fields up to SessionEpoch and the count.
    const topicsAt = 4 + 4 + 4 + 4 + 1 + 4 + 4 + 1;
    expect(v12.subarray(topicsAt, topicsAt + 7)).toEqual(hex('07 6f7264657273'));
    expect(v13.subarray(topicsAt, topicsAt + 16).toString('hex')).toBe(TOPIC_ID);
    // A message with only a name cannot be written at v13, nor one with only an id at v12.
    expect(protocolErrorOf(() => encodeFetchRequest(sampleRequest(12), 13))).toMatchObject({
      code: 'WALPROXY_ERR_INVALID_VALUE',
      field: 'TopicId',
    });
    expect(protocolErrorOf(() => encodeFetchRequest(sampleRequest(13), 12)).field).toBe('Topic');
  });

  it('names forgotten topics up to v12 and identifies them by id from v13', () => {
    const forgotten = (v: number): Buffer => {
      const m = decodeFetchRequest(encodeFetchRequest(sampleRequest(v), v), v);
      expect(m.forgottenTopicsData).toHaveLength(1);
      return encodeFetchRequest(
        { ...m, topics: [], rackId: '', clusterId: undefined, taggedFields: undefined },
        v,
      );
    };
    // After ReplicaId, the fixed fields and an empty Topics array: the one forgotten topic, then [3, 4].
    expect(forgotten(12).subarray(26)).toEqual(hex('02 07 6f7264657273 03 00000003 00000004 00 01 00'));
    expect(forgotten(13).subarray(26)).toEqual(hex(`02 ${TOPIC_ID} 03 00000003 00000004 00 01 00`));
  });

  it('decodes ReplicaDirectoryId (tag 0) from v17 and HighWatermark (tag 1) from v18 only', () => {
    const m18 = sampleRequest(18);
    const bytes18 = encodeFetchRequest(m18, 18);
    expect(decodeFetchRequest(bytes18, 18).topics[0]?.partitions[0]).toMatchObject({
      replicaDirectoryId: DIR_ID,
      highWatermark: 990n,
    });
    // The same partition bytes read as v17 keep tag 1 raw: its meaning arrived in v18.
    const m17 = decodeFetchRequest(bytes18, 17);
    const p17 = m17.topics[0]?.partitions[0];
    expect(p17?.replicaDirectoryId).toBe(DIR_ID);
    expect(p17?.highWatermark).toBeUndefined();
    expect(p17?.taggedFields).toEqual([{ tag: 1, data: hex('00000000000003de') }]);
    expect(encodeFetchRequest(m17, 17)).toEqual(bytes18);
  });

  it('keeps an unknown top-level tag (the capability mark) after the known ones', () => {
    const bytes = encodeFetchRequest(sampleRequest(17), 17);
    const m = decodeFetchRequest(bytes, 17);
    expect(m.taggedFields).toEqual([CAPABILITY]);
    expect(m.clusterId).toBe('Xy3kLm');
    // Tag section: count 3, tag 0 ClusterId, tag 1 ReplicaState, tag 10000 "walproxy".
    expect(bytes.subarray(bytes.length - 11)).toEqual(hex('904e 08 77616c70726f7879'));
  });

  it('rejects a known tag whose declared size does not match its content', () => {
    // ReplicaState declared as 14 bytes but its content takes 13.
    const body = hex(
      '000001f4 00000001 03200000 00 00000000 ffffffff 01 01 01 01 01 0e 00000002 000000000000004d 00 ff',
    );
    expect(protocolErrorOf(() => decodeFetchRequest(body, 15))).toMatchObject({
      code: 'WALPROXY_ERR_TAG_SIZE',
      api: 'FetchRequest',
      version: 15,
    });
  });

  it('refuses versions outside 4-18', () => {
    expect(protocolErrorOf(() => decodeFetchRequest(Buffer.alloc(64), 3)).code).toBe(
      'WALPROXY_ERR_UNSUPPORTED_VERSION',
    );
    expect(protocolErrorOf(() => encodeFetchRequest(sampleRequest(18), 19)).code).toBe(
      'WALPROXY_ERR_UNSUPPORTED_VERSION',
    );
  });
});

describe('Fetch response', () => {
  it.each(VERSIONS)('v%i round-trips a constructed message byte-exactly', (v) => {
    expectExactRoundTrip(encodeFetchResponse, decodeFetchResponse, sampleResponse(v), v);
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(fetchResponse(v), (m) => {
        expectExactRoundTrip(encodeFetchResponse, decodeFetchResponse, m, v);
      }),
      { numRuns: 60 },
    );
  });

  it('returns records as views of the body, walkable batch by batch', () => {
    // Given an encoded v17 response
    const body = encodeFetchResponse(sampleResponse(17), 17);
    // When decoded
    const records = decodeFetchResponse(body, 17).responses[0]?.partitions[0]?.records;
    // Then the records share the body's memory
    expect(records?.buffer).toBe(body.buffer);
    const batches = [...recordBatches(records!)];
    expect(batches.map((b) => (b.partial ? 'partial' : b.baseOffset))).toEqual([1000n, 1003n, 'partial']);
    expect(batches.every((b) => b.partial || b.isCrcValid())).toBe(true);
  });

  it('names response topics up to v12 and identifies them by id from v13', () => {
    const head = (v: number): Buffer => {
      const m = sampleResponse(v);
      return encodeFetchResponse({ ...m, responses: [{ ...m.responses[0]!, partitions: [] }] }, v);
    };
    // ThrottleTimeMs, ErrorCode, SessionId, one topic with no partitions, no tags.
    expect(head(12)).toEqual(hex('00000000 0000 0001e240 02 07 6f7264657273 01 00 00'));
    expect(head(13)).toEqual(hex(`00000000 0000 0001e240 02 ${TOPIC_ID} 01 00 00`));
    // Read at the wrong side of the boundary, the bytes do not parse.
    expect(() => decodeFetchResponse(head(12), 13)).toThrow(/WALPROXY_ERR_/);
    expect(() => decodeFetchResponse(head(13), 12)).toThrow(/WALPROXY_ERR_/);
  });

  it('decodes partition tags 0-2 in every flexible version and NodeEndpoints only from v16', () => {
    const m12 = decodeFetchResponse(encodeFetchResponse(sampleResponse(12), 12), 12);
    expect(m12.responses[0]?.partitions[1]).toMatchObject({
      divergingEpoch: { epoch: 3, endOffset: 950n },
      currentLeader: { leaderId: 3, leaderEpoch: 6 },
      snapshotId: { endOffset: 800n, epoch: 2 },
    });
    // A v16 body read as v15 keeps NodeEndpoints as an unknown tag 0, and re-encodes the same.
    const bytes16 = encodeFetchResponse(sampleResponse(16), 16);
    const asV15 = decodeFetchResponse(bytes16, 15);
    expect(asV15.nodeEndpoints).toBeUndefined();
    expect(asV15.taggedFields?.map((t) => t.tag)).toEqual([0]);
    expect(encodeFetchResponse(asV15, 15)).toEqual(bytes16);
    expect(decodeFetchResponse(bytes16, 16).nodeEndpoints?.[0]?.host).toBe('kafka-3.kafka-headless');
  });

  it('lays out a v12 partition as the wire grammar says', () => {
    // Given one partition with empty records and CurrentLeader set
    const m: FetchResponse = {
      throttleTimeMs: 0,
      errorCode: 0,
      sessionId: 1,
      responses: [
        {
          topic: 't',
          partitions: [
            {
              partitionIndex: 2,
              errorCode: 0,
              highWatermark: 5n,
              lastStableOffset: 5n,
              logStartOffset: 0n,
              abortedTransactions: null,
              preferredReadReplica: -1,
              records: Buffer.alloc(0),
              currentLeader: { leaderId: 1, leaderEpoch: 9 },
              taggedFields: [{ tag: 20_000, data: hex('01') }],
            },
          ],
        },
      ],
    };
    // Then the bytes are exactly the grammar's, ending with tag 1 and the unknown tag in order
    expect(encodeFetchResponse(m, 12)).toEqual(
      hex(
        '00000000 0000 00000001 02 02 74 02' +
          ' 00000002 0000 0000000000000005 0000000000000005 0000000000000000 00 ffffffff 01' +
          ' 02 01 09 00000001 00000009 00  a09c01 01 01' +
          ' 00 00',
      ),
    );
  });

  it('writes null records as null and empty records as empty (4.x brokers send empty)', () => {
    const m = sampleResponse(17);
    const p = m.responses[0]!.partitions[1]!;
    p.records = null;
    expect(
      decodeFetchResponse(encodeFetchResponse(m, 17), 17).responses[0]?.partitions[1]?.records,
    ).toBeNull();
    p.records = Buffer.alloc(0);
    expect(decodeFetchResponse(encodeFetchResponse(m, 17), 17).responses[0]?.partitions[1]?.records).toEqual(
      Buffer.alloc(0),
    );
  });

  it('says where a truncated response ends', () => {
    const body = encodeFetchResponse(sampleResponse(17), 17);
    const e = protocolErrorOf(() => decodeFetchResponse(body.subarray(0, 60), 17));
    expect(e.code).toBe('WALPROXY_ERR_TRUNCATED');
    expect(e.message).toMatch(/^WALPROXY_ERR_TRUNCATED: FetchResponse v17 field \w+ at byte \d+/);
  });
});
