// A Kafka frame on the wire: an int32 size of what follows, then the request or response header
// and the body (the protocol guide's "Common Request and Response Structure":
// `RequestOrResponse => Size (RequestMessage | ResponseMessage)`). headers.ts reads a frame after
// its prefix; this builds one with it, the one way walproxy does (issue #25: it was built six ways).

/** Bytes of a frame's size prefix. */
export const FRAME_SIZE_PREFIX_BYTES = 4;

/** The size-prefixed frame of `parts` (header, body…), in one new buffer. */
export function encodeFrame(...parts: readonly Buffer[]): Buffer {
  let size = 0;
  for (const part of parts) size += part.length;
  const out = Buffer.allocUnsafe(FRAME_SIZE_PREFIX_BYTES + size);
  out.writeInt32BE(size, 0);
  let at = FRAME_SIZE_PREFIX_BYTES;
  for (const part of parts) at += part.copy(out, at);
  return out;
}
