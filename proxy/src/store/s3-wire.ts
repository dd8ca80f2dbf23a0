// The parts of an S3 HTTP exchange the data path (s3-data-path.ts) reads and writes below the
// request itself: a body read into one Buffer, the CRC32 header of an upload, the fields of an
// error document, names for answers without one.
import type { IncomingMessage } from 'node:http';
import { crc32 } from 'node:zlib';

export type Finish<T> = (err: unknown, value?: T) => void;

/** Copies the body into one Buffer of exactly `expected` bytes. */
export function readInto(res: IncomingMessage, expected: number, finish: Finish<Buffer>): void {
  const out = Buffer.allocUnsafe(expected);
  let filled = 0;
  res.on('data', (chunk: Buffer) => {
    // HTTP framing stops at Content-Length, so only a server that lies about it gets here.
    if (filled + chunk.length > expected) {
      return finish(new Error(`the body is longer than its Content-Length ${expected}`));
    }
    chunk.copy(out, filled);
    filled += chunk.length;
  });
  res.on('end', () =>
    filled === expected
      ? finish(undefined, out)
      : finish(
          Object.assign(new Error(`the body ended after ${filled} of ${expected} bytes`), {
            code: 'ECONNRESET',
          }),
        ),
  );
}

/** The CRC32 S3 checks an upload against, base64 of its four big-endian bytes. */
export function crc32Base64(chunks: readonly Buffer[]): string {
  let crc = 0;
  for (const chunk of chunks) crc = crc32(chunk, crc);
  const out = Buffer.allocUnsafe(4);
  out.writeUInt32BE(crc >>> 0);
  return out.toString('base64');
}

export function xmlText(xml: string, tag: string): string | undefined {
  const match = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  if (match === null) return undefined;
  return match[1]!
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
}

/** Names for answers without an error document (HEAD has no body), as the SDK names them. */
export function statusName(status: number): string {
  switch (status) {
    case 403:
      return 'Forbidden';
    case 404:
      return 'NotFound';
    case 412:
      return 'PreconditionFailed';
    case 416:
      return 'InvalidRange';
    case 503:
      return 'ServiceUnavailable';
    default:
      return status >= 500 ? 'InternalError' : `HTTP${status}`;
  }
}

export function timeoutError(message: string): Error {
  return Object.assign(new Error(message), { name: 'TimeoutError' });
}
