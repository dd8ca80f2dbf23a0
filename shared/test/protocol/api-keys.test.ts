import { describe, expect, it } from 'vitest';
import {
  API_KEYS,
  ApiKey,
  apiKeyByName,
  apiKeyInfo,
  canDecode,
  isFlexibleVersion,
  requestHeaderVersion,
  responseHeaderVersion,
} from '../../src/protocol/api-keys.js';

describe('API key table', () => {
  it('covers every key 0-92 of Kafka 4.1 once', () => {
    expect(API_KEYS.map((k) => k.apiKey)).toEqual(Array.from({ length: 93 }, (_, i) => i));
    expect(new Set(API_KEYS.map((k) => k.name)).size).toBe(API_KEYS.length);
    expect(apiKeyInfo(93)).toBeUndefined();
    expect(apiKeyInfo(-1)).toBeUndefined();
  });

  it('names keys as the capture files do', () => {
    expect(ApiKey.Produce).toBe(0);
    expect(ApiKey.Fetch).toBe(1);
    expect(ApiKey.Metadata).toBe(3);
    expect(ApiKey.ApiVersions).toBe(18);
    expect(ApiKey.DeleteShareGroupOffsets).toBe(92);
    expect(apiKeyByName('SaslAuthenticate')?.apiKey).toBe(36);
    expect(apiKeyByName('Nope')).toBeUndefined();
  });

  it('knows which versions walproxy decodes', () => {
    expect(apiKeyInfo(ApiKey.Produce)?.decodes).toEqual({ min: 3, max: 13 });
    expect(apiKeyInfo(ApiKey.Fetch)?.decodes).toEqual({ min: 4, max: 18 });
    expect(apiKeyInfo(ApiKey.FindCoordinator)?.decodes).toEqual({ min: 0, max: 6 });
    expect(apiKeyInfo(ApiKey.DescribeCluster)?.decodes).toEqual({ min: 0, max: 2 });
    expect([canDecode(ApiKey.Fetch, 3), canDecode(ApiKey.Fetch, 4), canDecode(ApiKey.Fetch, 18)]).toEqual([
      false,
      true,
      true,
    ]);
    expect(canDecode(ApiKey.Fetch, 19)).toBe(false);
    expect(canDecode(ApiKey.ListOffsets, 1)).toBe(false);
    expect(canDecode(500, 0)).toBe(false);
  });

  it('flags flexible versions from each API first flexible version', () => {
    expect([isFlexibleVersion(ApiKey.Fetch, 11), isFlexibleVersion(ApiKey.Fetch, 12)]).toEqual([false, true]);
    // SaslHandshake never became flexible.
    expect(isFlexibleVersion(ApiKey.SaslHandshake, 1)).toBe(false);
    expect(isFlexibleVersion(1000, 0)).toBeUndefined();
  });
});

describe('header versions', () => {
  it('uses request header v2 and response header v1 for flexible versions', () => {
    expect([requestHeaderVersion(ApiKey.Produce, 8), requestHeaderVersion(ApiKey.Produce, 9)]).toEqual([
      1, 2,
    ]);
    expect([responseHeaderVersion(ApiKey.Produce, 8), responseHeaderVersion(ApiKey.Produce, 9)]).toEqual([
      0, 1,
    ]);
    expect([requestHeaderVersion(ApiKey.Fetch, 11), requestHeaderVersion(ApiKey.Fetch, 12)]).toEqual([1, 2]);
    expect(responseHeaderVersion(ApiKey.Fetch, 18)).toBe(1);
  });

  it('keeps working for versions newer than the table knows', () => {
    expect(requestHeaderVersion(ApiKey.Fetch, 19)).toBe(2);
    expect(responseHeaderVersion(ApiKey.Fetch, 19)).toBe(1);
  });

  it('gives ApiVersions request header v1 for v0-2 and v2 from v3, but response header v0 always (KIP-511)', () => {
    expect([0, 1, 2, 3, 4].map((v) => requestHeaderVersion(ApiKey.ApiVersions, v))).toEqual([1, 1, 1, 2, 2]);
    expect([0, 1, 2, 3, 4, 5].map((v) => responseHeaderVersion(ApiKey.ApiVersions, v))).toEqual([
      0, 0, 0, 0, 0, 0,
    ]);
  });

  it('returns undefined for unknown keys', () => {
    expect(requestHeaderVersion(200, 0)).toBeUndefined();
    expect(responseHeaderVersion(200, 0)).toBeUndefined();
  });

  it('keeps the removed inter-broker keys 4-7 with their 3.9 flexible versions', () => {
    expect(requestHeaderVersion(ApiKey.LeaderAndIsr, 4)).toBe(2);
    expect(requestHeaderVersion(ApiKey.ControlledShutdown, 2)).toBe(1);
    expect(requestHeaderVersion(ApiKey.ControlledShutdown, 3)).toBe(2);
  });
});
