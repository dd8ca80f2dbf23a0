import {
  ApiKey,
  decodeApiVersionsResponse,
  decodeResponseHeader,
  encodeApiVersionsResponse,
  encodeResponseHeader,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { ApiVersionsFilter } from '../../src/filters/api-versions.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import { ZONE_ROUTED_APIS } from '../../src/zone/zone-route-filter.js';

const info = (apiVersion: number): RequestInfo => ({ apiKey: 18, apiVersion, correlationId: 7 });

function framed(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

describe('ApiVersionsFilter', () => {
  it('forwards ApiVersions v5 (Kafka 4.4) and caps the answer like v4', () => {
    // Given a v5 request, and a 4.4 broker's answer offering Produce 13, Fetch 19 and ApiVersions 5
    const filter = new ApiVersionsFilter();
    const request = framed([Buffer.from('request')]);
    expect(filter.onRequest(info(5), request)).toEqual({
      action: 'forward',
      frame: request,
      expectResponse: true,
    });
    const answer = framed([
      encodeResponseHeader({ correlationId: 7 }, 0),
      encodeApiVersionsResponse(
        {
          errorCode: 0,
          apiKeys: [
            { apiKey: 0, minVersion: 3, maxVersion: 13 },
            { apiKey: 1, minVersion: 4, maxVersion: 19 },
            { apiKey: 18, minVersion: 0, maxVersion: 5 },
          ],
          throttleTimeMs: 0,
        },
        5,
      ),
    ]);

    // When it goes back through the filter
    const out = filter.onResponse(info(5), answer);

    // Then Fetch is capped at 18, and ApiVersions 5 stays offered
    const body = decodeApiVersionsResponse(out.subarray(4 + 4), 5);
    expect(body.apiKeys.map((k) => [k.apiKey, k.maxVersion])).toEqual([
      [0, 13],
      [1, 18],
      [18, 5],
    ]);
  });

  it('answers ApiVersions v6 itself, the KIP-511 way, offering 0-5', () => {
    const filter = new ApiVersionsFilter();
    const decision = filter.onRequest(info(6), framed([Buffer.from('request')]));
    expect(decision.action).toBe('respond');
    const response = (decision as { response: Buffer }).response.subarray(4);
    const { headerLength, correlationId } = decodeResponseHeader(response, 0);
    expect(correlationId).toBe(7);
    const body = decodeApiVersionsResponse(response.subarray(headerLength), 0);
    expect(body.errorCode).toBe(35);
    expect(body.apiKeys).toEqual([expect.objectContaining({ apiKey: 18, minVersion: 0, maxVersion: 5 })]);
  });

  // Moved from zone-route-filter.test.ts with the capping it tested: zone routing's listeners now
  // cap what it rewrites in their one ApiVersions filter.
  it('caps Metadata, FindCoordinator and DescribeCluster to the versions it decodes on the listeners zone routing filters', () => {
    const filter = new ApiVersionsFilter(ZONE_ROUTED_APIS);
    const i = info(3);
    const original = framed([
      encodeResponseHeader({ correlationId: i.correlationId }, 0),
      encodeApiVersionsResponse(
        {
          errorCode: 0,
          apiKeys: [
            { apiKey: ApiKey.Produce, minVersion: 3, maxVersion: 13 },
            { apiKey: ApiKey.Metadata, minVersion: 0, maxVersion: 14 },
            { apiKey: ApiKey.FindCoordinator, minVersion: 0, maxVersion: 7 },
            { apiKey: ApiKey.DescribeCluster, minVersion: 0, maxVersion: 2 },
          ],
          throttleTimeMs: 0,
        },
        3,
      ),
    ]);
    expect(filter.onRequest(i, framed([Buffer.from('request')]))).toMatchObject({ action: 'forward' });
    const out = filter.onResponse(i, original);
    expect(
      decodeApiVersionsResponse(out.subarray(8), 3).apiKeys.map((k) => [k.apiKey, k.maxVersion]),
    ).toEqual([
      [ApiKey.Produce, 13],
      [ApiKey.Metadata, 13],
      [ApiKey.FindCoordinator, 6],
      [ApiKey.DescribeCluster, 2],
    ]);
  });
});
