import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeProduceRequest,
  decodeProduceResponse,
  encodeProduceRequest,
  encodeProduceResponse,
  encodeRequestHeader,
  type ProduceRequest,
  type ProduceResponse,
  peekProduceAcks,
} from '../../src/index.js';
import { produceRequest, produceResponse } from '../helpers/arbitraries.js';
import { sampleBatch } from '../helpers/record-batches.js';
import { expectExactRoundTrip, hex, protocolErrorOf } from '../helpers/round-trip.js';

const VERSIONS = Array.from({ length: 11 }, (_, i) => i + 3);
const TOPIC_ID = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';

function sampleRequest(v: number, acks = -1): ProduceRequest {
  const ref = v >= 13 ? { topicId: TOPIC_ID } : { name: 'orders' };
  return {
    transactionalId: null,
    acks,
    timeoutMs: 30_000,
    topicData: [
      {
        ...ref,
        partitionData: [
          { index: 0, records: sampleBatch(0n, 5, 100) },
          { index: 1, records: sampleBatch(0n, 1, 3000, 2) },
        ],
      },
    ],
  };
}

function sampleResponse(v: number): ProduceResponse {
  const ref = v >= 13 ? { topicId: TOPIC_ID } : { name: 'orders' };
  return {
    responses: [
      {
        ...ref,
        partitionResponses: [
          {
            index: 0,
            errorCode: 0,
            baseOffset: 1234n,
            logAppendTimeMs: -1n,
            logStartOffset: v >= 5 ? 0n : undefined,
            recordErrors: v >= 8 ? [] : undefined,
            errorMessage: v >= 8 ? null : undefined,
          },
          {
            index: 1,
            errorCode: 6,
            baseOffset: -1n,
            logAppendTimeMs: -1n,
            logStartOffset: v >= 5 ? -1n : undefined,
            recordErrors: v >= 8 ? [{ batchIndex: 0, batchIndexErrorMessage: 'bad' }] : undefined,
            errorMessage: v >= 8 ? 'not leader' : undefined,
            currentLeader: v >= 10 ? { leaderId: 2, leaderEpoch: 8 } : undefined,
          },
        ],
      },
    ],
    throttleTimeMs: 0,
    nodeEndpoints: v >= 10 ? [{ nodeId: 2, host: 'kafka-2', port: 9192, rack: null }] : undefined,
  };
}

describe('Produce request', () => {
  it.each(VERSIONS)('v%i round-trips a constructed message byte-exactly', (v) => {
    expectExactRoundTrip(encodeProduceRequest, decodeProduceRequest, sampleRequest(v), v);
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(produceRequest(v), (m) => {
        expectExactRoundTrip(encodeProduceRequest, decodeProduceRequest, m, v);
      }),
      { numRuns: 80 },
    );
  });

  it('returns records as views of the body', () => {
    const body = encodeProduceRequest(sampleRequest(11), 11);
    const records = decodeProduceRequest(body, 11).topicData[0]?.partitionData[1]?.records;
    expect(records?.buffer).toBe(body.buffer);
    expect(records).toEqual(sampleBatch(0n, 1, 3000, 2));
  });

  it('names the topic up to v12 and gives its id from v13 (KIP-516)', () => {
    const msg = (v: number): ProduceRequest => ({
      ...sampleRequest(v),
      topicData: [{ ...sampleRequest(v).topicData[0]!, partitionData: [] }],
    });
    // null transactional id, acks -1, timeout 30000, one topic...
    expect(encodeProduceRequest(msg(12), 12)).toEqual(hex('00 ffff 00007530 02 07 6f7264657273 01 00 00'));
    expect(encodeProduceRequest(msg(13), 13)).toEqual(hex(`00 ffff 00007530 02 ${TOPIC_ID} 01 00 00`));
    expect(protocolErrorOf(() => encodeProduceRequest(msg(12), 13)).field).toBe('TopicId');
    // A v12 body read as v13 takes the name bytes as part of an id and fails further on.
    expect(() => decodeProduceRequest(encodeProduceRequest(msg(12), 12), 13)).toThrow(/WALPROXY_ERR_/);
  });

  it('switches to compact strings and arrays at v9', () => {
    const m: ProduceRequest = { transactionalId: 'tx', acks: 1, timeoutMs: 1, topicData: [] };
    expect(encodeProduceRequest(m, 8)).toEqual(hex('0002 7478 0001 00000001 00000000'));
    expect(encodeProduceRequest(m, 9)).toEqual(hex('03 7478 0001 00000001 01 00'));
  });
});

describe('peekProduceAcks', () => {
  function frame(
    v: number,
    acks: number,
    opts: { clientId?: string | null; txn?: string | null } = {},
  ): Buffer {
    const header = encodeRequestHeader({
      apiKey: 0,
      apiVersion: v,
      correlationId: 42,
      clientId: opts.clientId === undefined ? 'producer-1' : opts.clientId,
      taggedFields: v >= 9 ? [{ tag: 3, data: hex('0102') }] : undefined,
    });
    return Buffer.concat([
      header,
      encodeProduceRequest({ ...sampleRequest(v, acks), transactionalId: opts.txn ?? null }, v),
    ]);
  }

  it.each(VERSIONS)('v%i reads acks past the header and transactional id', (v) => {
    for (const acks of [0, 1, -1]) {
      expect(peekProduceAcks(frame(v, acks))).toBe(acks);
      expect(peekProduceAcks(frame(v, acks, { clientId: null, txn: 'my-transaction' }))).toBe(acks);
      expect(peekProduceAcks(frame(v, acks, { clientId: '', txn: '' }))).toBe(acks);
    }
  });

  it('reads acks as the first body field of v0-2, which have no transactional id', () => {
    // Given a v2 frame: header, then acks 0 and the rest of the body
    const f = hex('0000 0002 00000001 ffff  0000 00007530 00000000');
    expect(peekProduceAcks(f)).toBe(0);
  });

  it('needs only the bytes up to acks', () => {
    const f = frame(11, 0);
    // Header v2: key, version, correlation id, client id, then tag 3 with 2 bytes (count, tag, size, data).
    const header = 2 + 2 + 4 + 2 + 'producer-1'.length + 5;
    expect(peekProduceAcks(f.subarray(0, header + 1 + 2))).toBe(0);
    expect(protocolErrorOf(() => peekProduceAcks(f.subarray(0, header + 2))).code).toBe(
      'WALPROXY_ERR_TRUNCATED',
    );
  });

  it('reads a negative string length as null, as Kafka does', () => {
    // Given v8 and v9 frames whose client id and transactional id lengths are -2 and -32768
    for (const v of [8, 9]) {
      const f = frame(v, 0, { clientId: null, txn: null });
      f.writeInt16BE(-2, 8);
      if (v === 8) f.writeInt16BE(-32768, 10);
      // Then acks is found past them
      expect(peekProduceAcks(f)).toBe(0);
    }
    // And a compact length past 2^31, negative as Kafka reads it, is null too
    const f = frame(9, 1, { clientId: null, txn: null });
    const txnAt = 10 + 5; // client id length, then the header's tag section (tag 3, 2 bytes)
    expect(f[txnAt]).toBe(0);
    const huge = Buffer.concat([f.subarray(0, txnAt), hex('80 80 80 80 08'), f.subarray(txnAt + 1)]);
    expect(peekProduceAcks(huge)).toBe(1);
  });

  it('refuses frames of other APIs', () => {
    expect(protocolErrorOf(() => peekProduceAcks(hex('0001 000c 00000001 ffff 00'))).code).toBe(
      'WALPROXY_ERR_UNKNOWN_API_KEY',
    );
  });
});

describe('Produce response', () => {
  it.each(VERSIONS)('v%i round-trips a constructed message byte-exactly', (v) => {
    expectExactRoundTrip(encodeProduceResponse, decodeProduceResponse, sampleResponse(v), v);
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(produceResponse(v), (m) => {
        expectExactRoundTrip(encodeProduceResponse, decodeProduceResponse, m, v);
      }),
      { numRuns: 80 },
    );
  });

  it('puts ThrottleTimeMs after the responses, and NodeEndpoints in tag 0 from v10', () => {
    const m: ProduceResponse = {
      responses: [],
      throttleTimeMs: 5,
      nodeEndpoints: [{ nodeId: 1, host: 'h', port: 9, rack: null }],
    };
    expect(encodeProduceResponse(m, 9)).toEqual(hex('01 00000005 00'));
    expect(encodeProduceResponse(m, 10)).toEqual(hex('01 00000005 01 00 0d 02 00000001 0268 00000009 00 00'));
  });

  it('keeps CurrentLeader raw below v10, where tag 0 had no meaning', () => {
    const bytes = encodeProduceResponse(sampleResponse(10), 10);
    const asV9 = decodeProduceResponse(bytes, 9);
    const p = asV9.responses[0]?.partitionResponses[1];
    expect(p?.currentLeader).toBeUndefined();
    expect(p?.taggedFields?.map((t) => t.tag)).toEqual([0]);
    expect(encodeProduceResponse(asV9, 9)).toEqual(bytes);
  });
});
