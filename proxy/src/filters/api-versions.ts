import {
  ApiKey,
  apiKeyInfo,
  decodeApiVersionsResponse,
  ErrorCode,
  encodeApiVersionsResponse,
  encodeFrame,
  encodeResponseHeader,
} from '@walproxy/shared';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FrameFilter, RequestDecision, RequestInfo } from '../net/frame-filter.js';

/**
 * The APIs every Kafka listener caps: ApiVersions itself (this filter decodes it) and the two the
 * WAL's filters decode (Produce on the client ingress, Fetch on the replication paths). They are
 * capped on every listener, with or without the WAL, as they always were.
 */
export const CAPPED_ON_EVERY_LISTENER = [ApiKey.Produce, ApiKey.Fetch, ApiKey.ApiVersions] as const;

/** The decoded range of `apiKey` in the shared API table (shared/src/protocol/api-keys.ts). */
function decodedRange(apiKey: number): { readonly min: number; readonly max: number } {
  const decodes = apiKeyInfo(apiKey)?.decodes;
  if (decodes === undefined) throw new Error(`API key ${apiKey} has no decoded range to cap to`);
  return decodes;
}

/**
 * ApiVersions: answers each client with the intersection of the broker's ranges and what the
 * sidecar can decode, for the APIs a filter of the listener must decode; a client must not be
 * offered a newer version of those, which walproxy would have to pass through without
 * understanding it. Every other key keeps the broker's range. The newest decoded version of each
 * comes from the shared API table. Only the maximum is capped: 4.x brokers advertise Produce min 0
 * on purpose (KAFKA-18659, librdkafka refuses a non-zero min), so mins stay as the broker wrote
 * them (a min above the cap stays the max too).
 *
 * A request newer than the table's ApiVersions range is answered locally the KIP-511 way — a v0
 * body with UNSUPPORTED_VERSION and the ApiVersions range walproxy speaks — so the client retries
 * at a version it can be answered at and every later response can be capped. The ApiVersions
 * response header is always v0.
 */
export class ApiVersionsFilter implements FrameFilter {
  readonly apiKeys = new Set<number>([ApiKey.ApiVersions]);
  /** Newest version offered, by API key. */
  private readonly maxVersions: ReadonlyMap<number, number>;

  /**
   * `alsoDecoded`: the APIs the listener's other filters decode beyond CAPPED_ON_EVERY_LISTENER
   * (zone routing's rewritten answers, ZONE_ROUTED_APIS).
   */
  constructor(alsoDecoded: readonly number[] = []) {
    this.maxVersions = new Map(
      [...CAPPED_ON_EVERY_LISTENER, ...alsoDecoded].map((key) => [key, decodedRange(key).max]),
    );
  }

  onRequest(info: RequestInfo, frame: Buffer): RequestDecision {
    const ours = decodedRange(ApiKey.ApiVersions);
    if (info.apiVersion <= ours.max) return { action: 'forward', frame, expectResponse: true };
    const body = encodeApiVersionsResponse(
      {
        errorCode: ErrorCode.UNSUPPORTED_VERSION,
        apiKeys: [{ apiKey: ApiKey.ApiVersions, minVersion: ours.min, maxVersion: ours.max }],
      },
      0,
    );
    return {
      action: 'respond',
      response: encodeFrame(encodeResponseHeader({ correlationId: info.correlationId }, 0), body),
    };
  }

  onResponse(info: RequestInfo, frame: Buffer): Buffer {
    const headerBytes = FRAME_SIZE_PREFIX_BYTES + 4;
    const response = decodeApiVersionsResponse(frame.subarray(headerBytes), info.apiVersion);
    let changed = false;
    for (const entry of response.apiKeys) {
      const ourMax = this.maxVersions.get(entry.apiKey);
      if (ourMax !== undefined && entry.maxVersion > ourMax) {
        entry.maxVersion = Math.max(ourMax, entry.minVersion);
        changed = true;
      }
    }
    if (!changed) return frame;
    return encodeFrame(
      frame.subarray(FRAME_SIZE_PREFIX_BYTES, headerBytes),
      encodeApiVersionsResponse(response, info.apiVersion),
    );
  }
}
