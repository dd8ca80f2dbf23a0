import { decodeApiVersionsResponse, encodeApiVersionsResponse, encodeResponseHeader } from '@walproxy/shared';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';

const API_VERSIONS = 18;
const UNSUPPORTED_VERSION = 35;

/**
 * The newest version of each API that the sidecar must decode. A client must not be offered a
 * newer one: walproxy would have to pass it through without understanding it. Keys not listed
 * here are forwarded opaque and keep the broker's range.
 */
export const DECODED_API_MAX_VERSIONS: ReadonlyMap<number, number> = new Map([
  [0, 13], // Produce: topic ids from v13 (KIP-516)
  [1, 18], // Fetch: v18 is the 4.1+ replica fetch version
  [API_VERSIONS, 5], // v5: Kafka 4.4 (KIP-1242), response laid out as v4
]);

/**
 * ApiVersions: answers each client with the intersection of the broker's ranges and what the
 * sidecar can decode. Only the maximum is capped: 4.x brokers advertise Produce min 0 on purpose
 * (KAFKA-18659, librdkafka refuses a non-zero min), so mins stay as the broker wrote them.
 *
 * A request newer than v4 is answered locally the KIP-511 way — a v0 body with
 * UNSUPPORTED_VERSION and the ApiVersions range walproxy speaks — so the client retries at v4
 * and every later response can be capped. The ApiVersions response header is always v0.
 */
export class ApiVersionsFilter implements FrameFilter {
  readonly apiKeys = new Set([API_VERSIONS]);

  onRequest(info: RequestInfo, frame: Buffer): RequestDecision {
    const ourMax = DECODED_API_MAX_VERSIONS.get(API_VERSIONS)!;
    if (info.apiVersion <= ourMax) return { action: 'forward', frame, expectResponse: true };
    const body = encodeApiVersionsResponse(
      {
        errorCode: UNSUPPORTED_VERSION,
        apiKeys: [{ apiKey: API_VERSIONS, minVersion: 0, maxVersion: ourMax }],
      },
      0,
    );
    return {
      action: 'respond',
      response: withSizePrefix([encodeResponseHeader({ correlationId: info.correlationId }, 0), body]),
    };
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer {
    const headerBytes = FRAME_SIZE_PREFIX_BYTES + 4;
    const response = decodeApiVersionsResponse(frame.subarray(headerBytes), info.apiVersion);
    let changed = false;
    for (const entry of response.apiKeys) {
      const ourMax = DECODED_API_MAX_VERSIONS.get(entry.apiKey);
      if (ourMax !== undefined && entry.maxVersion > ourMax) {
        entry.maxVersion = Math.max(ourMax, entry.minVersion);
        changed = true;
      }
    }
    if (!changed) return frame;
    return withSizePrefix([
      frame.subarray(FRAME_SIZE_PREFIX_BYTES, headerBytes),
      encodeApiVersionsResponse(response, info.apiVersion),
    ]);
  }
}

function withSizePrefix(parts: Buffer[]): Buffer {
  const size = parts.reduce((n, p) => n + p.length, 0);
  const prefix = Buffer.allocUnsafe(FRAME_SIZE_PREFIX_BYTES);
  prefix.writeInt32BE(size, 0);
  return Buffer.concat([prefix, ...parts], size + FRAME_SIZE_PREFIX_BYTES);
}
