import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type ApiVersionsResponse,
  decodeApiVersionsRequest,
  decodeApiVersionsResponse,
  ErrorCode,
  encodeApiVersionsRequest,
  encodeApiVersionsResponse,
} from '../../src/index.js';
import { apiVersionsRequest, apiVersionsResponse } from '../helpers/arbitraries.js';
import { expectExactRoundTrip, hex, protocolErrorOf } from '../helpers/round-trip.js';

const VERSIONS = [0, 1, 2, 3, 4, 5];

function sampleResponse(v: number): ApiVersionsResponse {
  const flex = v >= 3;
  return {
    errorCode: 0,
    apiKeys: [
      { apiKey: 0, minVersion: 0, maxVersion: 13 },
      { apiKey: 1, minVersion: 4, maxVersion: 18 },
      { apiKey: 18, minVersion: 0, maxVersion: 4 },
    ],
    throttleTimeMs: v >= 1 ? 0 : undefined,
    supportedFeatures: flex ? [{ name: 'metadata.version', minVersion: 7, maxVersion: 27 }] : undefined,
    finalizedFeaturesEpoch: flex ? 42n : undefined,
    finalizedFeatures: flex
      ? [{ name: 'metadata.version', maxVersionLevel: 27, minVersionLevel: 27 }]
      : undefined,
    zkMigrationReady: flex ? false : undefined,
  };
}

describe('ApiVersions request', () => {
  it('is empty in v0-2', () => {
    for (const v of [0, 1, 2]) {
      expect(encodeApiVersionsRequest({}, v)).toEqual(Buffer.alloc(0));
      expect(decodeApiVersionsRequest(Buffer.alloc(0), v)).toEqual({});
      expect(protocolErrorOf(() => decodeApiVersionsRequest(hex('00'), v)).code).toBe(
        'WALPROXY_ERR_TRAILING_BYTES',
      );
    }
  });

  it('carries the client software name and version from v3', () => {
    const m = { clientSoftwareName: 'apache-kafka-java', clientSoftwareVersion: '4.1.0' };
    const bytes = expectExactRoundTrip(encodeApiVersionsRequest, decodeApiVersionsRequest, m, 3);
    expect(bytes.subarray(0, 2)).toEqual(hex('12 61'));
    expect(bytes.at(-1)).toBe(0);
  });

  it('names the cluster and node the client means to reach from v5 (Kafka 4.4, KIP-1242)', () => {
    const m = {
      clientSoftwareName: 'apache-kafka-java',
      clientSoftwareVersion: '4.4.0',
      clusterId: 'abc',
      nodeId: 2,
    };
    const bytes = expectExactRoundTrip(encodeApiVersionsRequest, decodeApiVersionsRequest, m, 5);
    // ... ClientSoftwareVersion, then ClusterId (compact: length + 1), NodeId, empty tags
    expect(bytes.subarray(-9)).toEqual(hex('04 616263 00000002 00'));
    const unnamed = { clientSoftwareName: 'a', clientSoftwareVersion: 'b', clusterId: null, nodeId: -1 };
    expect(encodeApiVersionsRequest(unnamed, 5).subarray(-6)).toEqual(hex('00 ffffffff 00'));
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(apiVersionsRequest(v), (m) => {
        expectExactRoundTrip(encodeApiVersionsRequest, decodeApiVersionsRequest, m, v);
      }),
      { numRuns: 40 },
    );
  });
});

describe('ApiVersions response', () => {
  it.each(VERSIONS)('v%i round-trips a constructed message byte-exactly', (v) => {
    expectExactRoundTrip(encodeApiVersionsResponse, decodeApiVersionsResponse, sampleResponse(v), v);
  });

  it.each(VERSIONS)('v%i round-trips arbitrary valid messages', (v) => {
    fc.assert(
      fc.property(apiVersionsResponse(v), (m) => {
        expectExactRoundTrip(encodeApiVersionsResponse, decodeApiVersionsResponse, m, v);
      }),
      { numRuns: 40 },
    );
  });

  it('writes the features as tags 0-3 in order', () => {
    const bytes = encodeApiVersionsResponse({ ...sampleResponse(3), apiKeys: [] }, 3);
    // ErrorCode, empty ApiKeys, ThrottleTimeMs, then 4 tags
    expect(bytes.subarray(0, 8)).toEqual(hex('0000 01 00000000 04'));
    const m = decodeApiVersionsResponse(bytes, 3);
    expect(m.finalizedFeaturesEpoch).toBe(42n);
    expect(m.zkMigrationReady).toBe(false);
  });

  it('reads the v0 body a broker sends for an unsupported request version (KIP-511)', () => {
    // Given a v0 body: UNSUPPORTED_VERSION and the broker's ApiVersions range 0-3
    const body = hex('0023 00000001 0012 0000 0003');
    for (const requested of [3, 4, 5, 9]) {
      // When read as the answer to a newer request
      const m = decodeApiVersionsResponse(body, requested);
      // Then it is the v0 body, flagged, and re-encodes to the same bytes
      expect(m).toMatchObject({ errorCode: ErrorCode.UNSUPPORTED_VERSION, v0Fallback: true });
      expect(m.apiKeys).toEqual([{ apiKey: 18, minVersion: 0, maxVersion: 3, taggedFields: undefined }]);
      expect(encodeApiVersionsResponse(m, requested)).toEqual(body);
    }
  });

  it('reports the error at the requested version when the body is not a v0 body either', () => {
    const e = protocolErrorOf(() => decodeApiVersionsResponse(hex('0000 05'), 3));
    expect(e.version).toBe(3);
    expect(protocolErrorOf(() => decodeApiVersionsResponse(hex('00'), 0)).version).toBe(0);
  });
});
