// The inputs of api-versions-answers.test.ts: ApiVersions requests and broker answers as the two
// cappers walproxy had before issue #25 saw them (filters/api-versions.ts on every Kafka listener,
// zone routing's capper on the listeners zone routing filters). Their answers, captured from those
// cappers, are in api-versions-answers.json.
import { API_KEYS, ApiKey, type ApiVersionsResponse, encodeApiVersionsResponse } from '@walproxy/shared';
import type { RequestInfo } from '../../src/net/frame-filter.js';

export interface ResponseCase {
  readonly name: string;
  readonly info: RequestInfo;
  /** The broker's answer, size prefix and header v0 included. */
  readonly frame: Buffer;
}

export interface RequestCase {
  readonly name: string;
  readonly info: RequestInfo;
  readonly frame: Buffer;
}

const info = (apiVersion: number, correlationId: number): RequestInfo => ({
  apiKey: ApiKey.ApiVersions,
  apiVersion,
  correlationId,
});

/** A response frame with header v0 (KIP-511: always v0 for ApiVersions), body written at `bodyVersion`. */
function answer(correlationId: number, body: ApiVersionsResponse, bodyVersion: number): Buffer {
  const encoded = encodeApiVersionsResponse(body, bodyVersion);
  const out = Buffer.alloc(8 + encoded.length);
  out.writeInt32BE(4 + encoded.length, 0);
  out.writeInt32BE(correlationId, 4);
  encoded.copy(out, 8);
  return out;
}

const range = (apiKey: number, minVersion: number, maxVersion: number) => ({
  apiKey,
  minVersion,
  maxVersion,
});

/** Every key of the shared table, each offered one version past what walproxy decodes (or 0-7). */
function everyKey(): ReturnType<typeof range>[] {
  return API_KEYS.map((k) => range(k.apiKey, k.decodes?.min ?? 0, (k.decodes?.max ?? 6) + 1));
}

/** The features a 4.x broker's v3+ answer carries in its tagged fields, plus one tag unknown to walproxy. */
const features = {
  supportedFeatures: [
    { name: 'metadata.version', minVersion: 7, maxVersion: 27 },
    { name: 'transaction.version', minVersion: 0, maxVersion: 2 },
  ],
  finalizedFeaturesEpoch: 42n,
  finalizedFeatures: [{ name: 'metadata.version', maxVersionLevel: 27, minVersionLevel: 27 }],
  zkMigrationReady: false,
  taggedFields: [{ tag: 9, data: Buffer.from('future') }],
};

export function responseCases(): ResponseCase[] {
  const cases: ResponseCase[] = [];
  let id = 100;
  const add = (name: string, version: number, body: ApiVersionsResponse, bodyVersion = version) => {
    id++;
    cases.push({ name, info: info(version, id), frame: answer(id, body, bodyVersion) });
  };
  // The inputs of the two cappers' own unit tests.
  add('api-versions.test: a 4.4 broker offering Fetch 19 and ApiVersions 5', 5, {
    errorCode: 0,
    apiKeys: [range(0, 3, 13), range(1, 4, 19), range(18, 0, 5)],
    throttleTimeMs: 0,
  });
  add('zone-route-filter.test: Metadata 14, FindCoordinator 7, DescribeCluster 2', 3, {
    errorCode: 0,
    apiKeys: [range(0, 3, 13), range(3, 0, 14), range(10, 0, 7), range(60, 0, 2)],
    throttleTimeMs: 0,
  });
  add('sasl-handshake.test: SaslHandshake 0-1 kept', 3, {
    errorCode: 0,
    apiKeys: [range(0, 0, 13), range(17, 0, 1), range(18, 0, 4)],
    throttleTimeMs: 0,
  });
  // Every version of the answer, every key one version too new, 4.x features in the tags.
  for (let v = 0; v <= 5; v++) {
    add(`every key one version too new, v${v}`, v, {
      errorCode: 0,
      apiKeys: everyKey(),
      ...(v >= 1 ? { throttleTimeMs: 7 } : {}),
      ...(v >= 3 ? features : {}),
    });
  }
  add('a minimum above what walproxy decodes keeps the minimum', 4, {
    errorCode: 0,
    apiKeys: [range(0, 3, 13), range(1, 19, 20), range(3, 14, 15), range(18, 0, 4)],
    throttleTimeMs: 0,
  });
  add('nothing above what walproxy decodes', 4, {
    errorCode: 0,
    apiKeys: [range(0, 3, 13), range(1, 4, 18), range(3, 0, 13), range(10, 0, 6), range(18, 0, 4)],
    throttleTimeMs: 0,
  });
  add('only keys no listener caps', 3, {
    errorCode: 0,
    apiKeys: [range(2, 0, 11), range(11, 0, 10), range(75, 0, 1)],
    throttleTimeMs: 0,
  });
  add('no keys at all', 3, { errorCode: 0, apiKeys: [], throttleTimeMs: 0 });
  // KIP-511: a broker that does not know the request's version answers UNSUPPORTED_VERSION with a
  // v0 body listing only its ApiVersions range (ApiVersionsRequest.getErrorResponse).
  add(
    'UNSUPPORTED_VERSION, the v0 body a broker sends to a newer request',
    4,
    {
      errorCode: 35,
      apiKeys: [range(18, 0, 3)],
    },
    0,
  );
  add(
    'UNSUPPORTED_VERSION listing ApiVersions 0-6 (v0 body)',
    4,
    {
      errorCode: 35,
      apiKeys: [range(18, 0, 6)],
    },
    0,
  );
  return cases;
}

/**
 * An error answer listing keys zone routing rewrites, above what walproxy decodes: the one input on
 * which the two cappers differed (zone routing's left error answers alone, the other capped them).
 * No broker sends one (an error answer lists at most ApiVersions), and the single filter caps it.
 */
export function errorWithZoneKeysCase(): ResponseCase {
  const i = info(3, 99);
  return {
    name: 'an error answer listing Metadata 14 and Fetch 19',
    info: i,
    frame: answer(
      99,
      { errorCode: 35, apiKeys: [range(1, 4, 19), range(3, 0, 14), range(18, 0, 6)], throttleTimeMs: 0 },
      3,
    ),
  };
}

export function requestCases(): RequestCase[] {
  return [0, 1, 2, 3, 4, 5, 6, 7, 127].map((v) => {
    const i = info(v, 200 + v);
    // The filter reads only the header's version: the body is not decoded.
    const frame = Buffer.alloc(14);
    frame.writeInt32BE(10, 0);
    frame.writeInt16BE(ApiKey.ApiVersions, 4);
    frame.writeInt16BE(v, 6);
    frame.writeInt32BE(i.correlationId, 8);
    frame.writeInt16BE(-1, 12);
    return { name: `request v${v}`, info: i, frame };
  });
}
