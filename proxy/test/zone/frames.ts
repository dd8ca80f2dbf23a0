import { encodeRequestHeader, encodeResponseHeader, responseHeaderVersion } from '@walproxy/shared';
import type { RequestInfo } from '../../src/net/frame-filter.js';

/** A whole frame, size prefix included. */
export function frame(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

export function requestFrame(info: RequestInfo, clientId: string | null, body: Buffer): Buffer {
  return frame([encodeRequestHeader({ ...info, clientId }), body]);
}

export function responseFrame(info: RequestInfo, body: Buffer): Buffer {
  return frame([
    encodeResponseHeader(
      { correlationId: info.correlationId },
      responseHeaderVersion(info.apiKey, info.apiVersion)!,
    ),
    body,
  ]);
}

/** The body of a response frame built by responseFrame. */
export function responseBody(info: RequestInfo, out: Buffer): Buffer {
  return out.subarray(4 + (responseHeaderVersion(info.apiKey, info.apiVersion) === 1 ? 5 : 4));
}
