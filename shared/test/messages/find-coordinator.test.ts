import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFindCoordinatorRequest,
  decodeFindCoordinatorResponse,
  encodeFindCoordinatorRequest,
  encodeFindCoordinatorResponse,
  type FindCoordinatorRequest,
  type FindCoordinatorResponse,
} from '../../src/index.js';
import { findCoordinatorRequest, findCoordinatorResponse } from '../helpers/arbitraries.js';
import { expectExactRoundTrip, hex } from '../helpers/round-trip.js';

const VERSIONS = [0, 1, 2, 3, 4, 5, 6];

// Bytes written by kafka-clients 4.4.0 itself (FindCoordinator{Request,Response}Data.write) for the
// messages below, so the layout is checked against Kafka's generated code, not against ourselves.
const KAFKA_REQUEST: Record<number, string> = {
  0: '0003677270',
  1: '000367727001',
  2: '000367727001',
  3: '046772700100',
  4: '01030467727003747800',
};
const KAFKA_RESPONSE: Record<number, string> = {
  0: '00000000000200026832000023e8',
  1: '000000070000ffff0000000200026832000023e8',
  2: '000000070000ffff0000000200026832000023e8',
  3: '0000000700000000000002036832000023e800',
  4: '00000007030467727000000002036832000023e800000000037478ffffffff01ffffffff000f046e2f610000',
};

function sampleRequest(v: number): FindCoordinatorRequest {
  return {
    key: v <= 3 ? 'grp' : undefined,
    keyType: v >= 1 ? 1 : undefined,
    coordinatorKeys: v >= 4 ? ['grp', 'tx'] : undefined,
  };
}

function sampleResponse(v: number): FindCoordinatorResponse {
  if (v <= 3) {
    return {
      throttleTimeMs: v >= 1 ? 7 : undefined,
      errorCode: 0,
      errorMessage: v >= 1 ? null : undefined,
      nodeId: 2,
      host: 'h2',
      port: 9192,
    };
  }
  return {
    throttleTimeMs: 7,
    coordinators: [
      { key: 'grp', nodeId: 2, host: 'h2', port: 9192, errorCode: 0, errorMessage: null },
      { key: 'tx', nodeId: -1, host: '', port: -1, errorCode: 15, errorMessage: 'n/a' },
    ],
  };
}

/** v5 and v6 only add error codes (KIP-890, KIP-932): their bytes are v4's. */
const kafkaBytes = (table: Record<number, string>, v: number) => hex(table[Math.min(v, 4)]!);

describe('FindCoordinator request', () => {
  it.each(VERSIONS)('v%i matches the bytes Kafka writes, both ways', (v) => {
    expect(encodeFindCoordinatorRequest(sampleRequest(v), v)).toEqual(kafkaBytes(KAFKA_REQUEST, v));
    expect(decodeFindCoordinatorRequest(kafkaBytes(KAFKA_REQUEST, v), v)).toEqual(sampleRequest(v));
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(findCoordinatorRequest(v), (m) => {
        expectExactRoundTrip(encodeFindCoordinatorRequest, decodeFindCoordinatorRequest, m, v);
      }),
      { numRuns: 40 },
    );
  });
});

describe('FindCoordinator response', () => {
  it.each(VERSIONS)('v%i matches the bytes Kafka writes, both ways', (v) => {
    expect(encodeFindCoordinatorResponse(sampleResponse(v), v)).toEqual(kafkaBytes(KAFKA_RESPONSE, v));
    expect(decodeFindCoordinatorResponse(kafkaBytes(KAFKA_RESPONSE, v), v)).toEqual(sampleResponse(v));
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(findCoordinatorResponse(v), (m) => {
        expectExactRoundTrip(encodeFindCoordinatorResponse, decodeFindCoordinatorResponse, m, v);
      }),
      { numRuns: 40 },
    );
  });
});
