import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeMetadataRequest,
  decodeMetadataResponse,
  encodeMetadataRequest,
  encodeMetadataResponse,
  type MetadataRequest,
  type MetadataResponse,
  topicNamesById,
  ZERO_UUID,
} from '../../src/index.js';
import { metadataRequest, metadataResponse } from '../helpers/arbitraries.js';
import { expectExactRoundTrip, hex, protocolErrorOf } from '../helpers/round-trip.js';

const VERSIONS = Array.from({ length: 14 }, (_, i) => i);
const ORDERS_ID = '0a1b2c3d4e5f60718293a4b5c6d7e8f9';

function sampleRequest(v: number): MetadataRequest {
  return {
    topics: [{ topicId: v >= 10 ? ZERO_UUID : undefined, name: 'orders' }],
    allowAutoTopicCreation: v >= 4 ? false : undefined,
    includeClusterAuthorizedOperations: v >= 8 && v <= 10 ? false : undefined,
    includeTopicAuthorizedOperations: v >= 8 ? true : undefined,
  };
}

function sampleResponse(v: number): MetadataResponse {
  return {
    throttleTimeMs: v >= 3 ? 0 : undefined,
    brokers: [
      { nodeId: 1, host: 'kafka-1.kafka-headless', port: 9192, rack: v >= 1 ? 'use1-az1' : undefined },
      { nodeId: 2, host: 'kafka-2.kafka-headless', port: 9192, rack: v >= 1 ? null : undefined },
    ],
    clusterId: v >= 2 ? 'MkU3OEVBNTcwNTJENDM2Qk' : undefined,
    controllerId: v >= 1 ? 1 : undefined,
    topics: [
      {
        errorCode: 0,
        name: 'orders',
        topicId: v >= 10 ? ORDERS_ID : undefined,
        isInternal: v >= 1 ? false : undefined,
        partitions: [
          {
            errorCode: 0,
            partitionIndex: 0,
            leaderId: 1,
            leaderEpoch: v >= 7 ? 4 : undefined,
            replicaNodes: [1, 2, 3],
            isrNodes: [1, 2],
            offlineReplicas: v >= 5 ? [3] : undefined,
          },
        ],
        topicAuthorizedOperations: v >= 8 ? 0x0df8 : undefined,
      },
      {
        errorCode: 3,
        name: v >= 12 ? null : 'missing',
        topicId: v >= 10 ? '11111111111111111111111111111111' : undefined,
        isInternal: v >= 1 ? false : undefined,
        partitions: [],
        topicAuthorizedOperations: v >= 8 ? -2147483648 : undefined,
      },
    ],
    clusterAuthorizedOperations: v >= 8 && v <= 10 ? -2147483648 : undefined,
    errorCode: v >= 13 ? 0 : undefined,
  };
}

describe('Metadata request', () => {
  it.each(VERSIONS)('v%i round-trips a constructed message byte-exactly', (v) => {
    expectExactRoundTrip(encodeMetadataRequest, decodeMetadataRequest, sampleRequest(v), v);
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(metadataRequest(v), (m) => {
        expectExactRoundTrip(encodeMetadataRequest, decodeMetadataRequest, m, v);
      }),
      { numRuns: 40 },
    );
  });

  it('asks for all topics with a null array from v1, which v0 cannot say', () => {
    expect(encodeMetadataRequest({ topics: null }, 1)).toEqual(hex('ffffffff'));
    expect(decodeMetadataRequest(hex('ffffffff'), 1).topics).toBeNull();
    expect(protocolErrorOf(() => encodeMetadataRequest({ topics: null }, 0)).code).toBe(
      'WALPROXY_ERR_INVALID_VALUE',
    );
    expect(protocolErrorOf(() => decodeMetadataRequest(hex('ffffffff'), 0)).code).toBe(
      'WALPROXY_ERR_INVALID_LENGTH',
    );
  });

  it('accepts a topic by id with a null name from v10', () => {
    const m: MetadataRequest = {
      topics: [{ topicId: ORDERS_ID, name: null }],
      allowAutoTopicCreation: false,
      includeClusterAuthorizedOperations: false,
      includeTopicAuthorizedOperations: false,
    };
    expectExactRoundTrip(encodeMetadataRequest, decodeMetadataRequest, m, 10);
    expect(protocolErrorOf(() => encodeMetadataRequest(m, 9)).field).toBe('Name');
  });
});

describe('Metadata response', () => {
  it.each(VERSIONS)('v%i round-trips a constructed message byte-exactly', (v) => {
    expectExactRoundTrip(encodeMetadataResponse, decodeMetadataResponse, sampleResponse(v), v);
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(metadataResponse(v), (m) => {
        expectExactRoundTrip(encodeMetadataResponse, decodeMetadataResponse, m, v);
      }),
      { numRuns: 40 },
    );
  });

  it('maps topic ids to names, leaving out topics without id or name', () => {
    const m = decodeMetadataResponse(encodeMetadataResponse(sampleResponse(12), 12), 12);
    expect(topicNamesById(m)).toEqual(new Map([[ORDERS_ID, 'orders']]));
    const noIds = decodeMetadataResponse(encodeMetadataResponse(sampleResponse(9), 9), 9);
    expect(topicNamesById(noIds).size).toBe(0);
    const zero = sampleResponse(10);
    zero.topics[0]!.topicId = ZERO_UUID;
    expect(topicNamesById(zero)).toEqual(new Map([['11111111111111111111111111111111', 'missing']]));
  });

  it('rejects a boolean byte other than 0 or 1', () => {
    // v1 response: no brokers, controller 1, one topic "t" with IsInternal = 2.
    const body = hex('00000000 00000001 00000001 0000 0001 74 02 00000000');
    expect(protocolErrorOf(() => decodeMetadataResponse(body, 1))).toMatchObject({
      code: 'WALPROXY_ERR_INVALID_BOOLEAN',
      field: 'IsInternal',
    });
  });
});
