import { FRAME_SIZE_PREFIX_BYTES } from '@walproxy/shared';

/**
 * Splits a TCP byte stream into Kafka frames: a 4-byte big-endian size, then that many bytes.
 *
 * Frames are returned with their size prefix, as zero-copy views of the received chunk whenever a
 * frame lies inside one chunk, so forwarding an untouched frame writes the original bytes. Only a
 * frame that spans chunks is copied, once, when its last byte arrives (chunks are kept in a list
 * until then, never concatenated chunk by chunk).
 */
export class FrameTooLargeError extends Error {
  constructor(
    readonly size: number,
    readonly maxFrameBytes: number,
  ) {
    super(`frame of ${size} bytes exceeds the maximum of ${maxFrameBytes} bytes`);
  }
}

export class InvalidFrameSizeError extends Error {
  constructor(readonly size: number) {
    super(`invalid frame size ${size}`);
  }
}

// Shared's framing (protocol/frame.ts) owns the size prefix; the proxy's frame readers take it from here.
export { FRAME_SIZE_PREFIX_BYTES };

export class FrameDecoder {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Size of the frame being assembled (prefix included), once its prefix has arrived. */
  private expected = -1;

  constructor(
    private readonly maxFrameBytes: number,
    private readonly minFrameBytes = 0,
  ) {}

  /** Bytes held for an incomplete frame: bounded by maxFrameBytes + one chunk. */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }

  /** Feeds one chunk; returns the frames it completed. Throws on an invalid or oversized size. */
  push(chunk: Buffer): Buffer[] {
    const frames: Buffer[] = [];
    let data = chunk;
    if (this.pendingBytes > 0) {
      // Finish the frame in progress first.
      this.pending.push(chunk);
      this.pendingBytes += chunk.length;
      if (this.expected < 0) {
        if (this.pendingBytes < FRAME_SIZE_PREFIX_BYTES) return frames;
        const head = Buffer.concat(this.pending);
        this.pending = [head];
        this.expected = this.checkSize(head.readInt32BE(0));
      }
      if (this.pendingBytes < this.expected) return frames;
      const joined =
        this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
      frames.push(joined.subarray(0, this.expected));
      data = joined.subarray(this.expected);
      this.pending = [];
      this.pendingBytes = 0;
      this.expected = -1;
    }
    let offset = 0;
    while (data.length - offset >= FRAME_SIZE_PREFIX_BYTES) {
      const total = this.checkSize(data.readInt32BE(offset));
      if (data.length - offset < total) {
        this.expected = total;
        break;
      }
      frames.push(data.subarray(offset, offset + total));
      offset += total;
    }
    if (offset < data.length) {
      const rest = data.subarray(offset);
      this.pending = [rest];
      this.pendingBytes = rest.length;
    }
    return frames;
  }

  /** The frame being assembled, once its size is known: its size (prefix included) and the bytes held of it. */
  get partial(): { expected: number; held: number } | undefined {
    return this.expected < 0 ? undefined : { expected: this.expected, held: this.pendingBytes };
  }

  /** The first `n` bytes held for the frame being assembled (fewer if fewer are held). */
  peekHeld(n: number): Buffer {
    const first = this.pending[0];
    if (first && first.length >= n) return first.subarray(0, n);
    return Buffer.concat(this.pending, Math.min(n, this.pendingBytes)).subarray(0, n);
  }

  /**
   * Hands over the bytes held for the frame being assembled and forgets the frame: the caller
   * passes the rest of it on as it arrives (ConnectionPipe streams large responses) and feeds
   * this decoder again from the next frame's first byte.
   */
  takePartial(): Buffer[] {
    const held = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    this.expected = -1;
    return held;
  }

  private checkSize(size: number): number {
    if (size < this.minFrameBytes) throw new InvalidFrameSizeError(size);
    if (size > this.maxFrameBytes) throw new FrameTooLargeError(size, this.maxFrameBytes);
    return size + FRAME_SIZE_PREFIX_BYTES;
  }
}
