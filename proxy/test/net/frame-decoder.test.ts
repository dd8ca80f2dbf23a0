import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameDecoder, FrameTooLargeError, InvalidFrameSizeError } from '../../src/net/frame-decoder.js';

function frame(payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(4 + payload.length);
  out.writeInt32BE(payload.length, 0);
  out.set(payload, 4);
  return out;
}

/** Cuts `stream` at the given points (any order, duplicates allowed). */
function split(stream: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let start = 0;
  for (const point of [...points, stream.length]) {
    chunks.push(stream.subarray(start, point));
    start = point;
  }
  return chunks;
}

describe('FrameDecoder', () => {
  it('returns the same frames in order however the stream is split', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 40 }),
        (payloads, cuts) => {
          // Given frames written back to back, cut into arbitrary chunks
          const frames = payloads.map(frame);
          const stream = Buffer.concat(frames);
          const decoder = new FrameDecoder(1024);
          // When the chunks are pushed one by one
          const out = split(stream, cuts).flatMap((chunk) => decoder.push(chunk));
          // Then every frame comes out whole, byte for byte, and nothing is left over
          expect(out.map((b) => b.toString('hex'))).toEqual(frames.map((b) => b.toString('hex')));
          expect(decoder.bufferedBytes).toBe(0);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('returns frames lying inside one chunk as views of that chunk, not copies', () => {
    const chunk = Buffer.concat([frame(Buffer.from('abc')), frame(Buffer.from('de'))]);
    const [first, second] = new FrameDecoder(100).push(chunk);
    expect(first!.buffer).toBe(chunk.buffer);
    expect(second!.byteOffset).toBe(chunk.byteOffset + 7);
  });

  it('rejects a frame over the maximum as soon as its size prefix arrives', () => {
    const decoder = new FrameDecoder(1000);
    const prefix = Buffer.alloc(4);
    prefix.writeInt32BE(5000, 0);
    // Only two bytes of the prefix: nothing to decide yet
    expect(decoder.push(prefix.subarray(0, 2))).toEqual([]);
    const error = (() => {
      try {
        decoder.push(prefix.subarray(2));
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(FrameTooLargeError);
    expect((error as FrameTooLargeError).size).toBe(5000);
  });

  it('rejects a negative or too-small size', () => {
    const negative = Buffer.from([0xff, 0xff, 0xff, 0xfe]);
    expect(() => new FrameDecoder(1000).push(negative)).toThrow(InvalidFrameSizeError);
    const tiny = frame(Buffer.from([1, 2]));
    expect(() => new FrameDecoder(1000, 6).push(tiny)).toThrow(InvalidFrameSizeError);
  });

  it('holds no more than one incomplete frame', () => {
    const decoder = new FrameDecoder(1 << 20);
    const big = frame(Buffer.alloc(100_000, 7));
    for (let i = 0; i < big.length - 1; i += 1000)
      decoder.push(big.subarray(i, Math.min(i + 1000, big.length - 1)));
    expect(decoder.bufferedBytes).toBe(big.length - 1);
    const [done] = decoder.push(big.subarray(big.length - 1));
    expect(done!.equals(big)).toBe(true);
    expect(decoder.bufferedBytes).toBe(0);
  });
});
