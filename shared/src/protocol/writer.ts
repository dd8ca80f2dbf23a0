import { ProtocolError, type ProtocolErrorKind } from './errors.js';
import type { CodecContext, RawTaggedField } from './reader.js';

const NO_CONTEXT: CodecContext = { api: 'Buffer', version: -1, flexible: false };

// Byte fields at least this long are referenced, not copied, until finish(): a Fetch response is
// mostly records, and copying them into a growing scratch buffer first would move every byte
// twice (measured in bench/fetch-walk.bench.ts).
const REFERENCE_THRESHOLD = 512;

const INITIAL_CAPACITY = 256;

const UUID_HEX = /^[0-9a-f]{32}$/;

const NONE: readonly RawTaggedField[] = [];

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * Big-endian writer producing one Buffer. Small fields go into a scratch buffer that doubles when
 * full (full scratch buffers are kept, not copied); large byte fields are kept by reference. finish()
 * copies everything once into a buffer of the exact size.
 */
export class Writer {
  readonly ctx: CodecContext;
  private buf: Buffer;
  private pos = 0;
  /** Start of the part of `buf` not yet moved to `chunks`. */
  private segment = 0;
  private readonly chunks: Buffer[] = [];
  private chunksLength = 0;

  constructor(ctx: CodecContext = NO_CONTEXT, initialCapacity = INITIAL_CAPACITY) {
    this.ctx = ctx;
    this.buf = Buffer.allocUnsafe(initialCapacity);
  }

  /** Bytes written so far. */
  get length(): number {
    return this.chunksLength + this.pos - this.segment;
  }

  fail(kind: ProtocolErrorKind, field: string, detail: string): never {
    throw new ProtocolError(
      kind,
      { api: this.ctx.api, version: this.ctx.version, field, offset: this.length },
      detail,
    );
  }

  private flushSegment(): void {
    if (this.pos > this.segment) {
      this.chunks.push(this.buf.subarray(this.segment, this.pos));
      this.chunksLength += this.pos - this.segment;
    }
    this.segment = this.pos;
  }

  /** Makes room for `n` bytes and returns where they go. */
  private room(n: number): number {
    const p = this.pos;
    if (p + n <= this.buf.length) {
      this.pos = p + n;
      return p;
    }
    this.flushSegment();
    this.buf = Buffer.allocUnsafe(Math.max(n, this.buf.length * 2));
    this.pos = n;
    this.segment = 0;
    return 0;
  }

  /** The written bytes. The writer must not be used afterwards. */
  finish(): Buffer {
    if (this.chunks.length === 0) return this.buf.subarray(this.segment, this.pos);
    this.flushSegment();
    const out = Buffer.allocUnsafe(this.chunksLength);
    let o = 0;
    // Buffer.copy rather than Uint8Array.set: with many source views, set() often took a path 2-3x
    // slower in bench/fetch-walk.bench.ts.
    for (const c of this.chunks) o += c.copy(out, o);
    return out;
  }

  // Callers must take the position from room() before touching this.buf: room() may replace it.
  private byte(v: number): void {
    const p = this.room(1);
    this.buf[p] = v;
  }

  private integer(v: number, min: number, max: number, field: string): void {
    if (!Number.isInteger(v) || v < min || v > max)
      this.fail('INVALID_VALUE', field, `${v} is not in [${min}, ${max}]`);
  }

  int8(v: number, field: string): void {
    this.integer(v, -0x80, 0x7f, field);
    this.byte(v);
  }

  int16(v: number, field: string): void {
    this.integer(v, -0x8000, 0x7fff, field);
    const p = this.room(2);
    this.buf[p] = v >> 8;
    this.buf[p + 1] = v;
  }

  int32(v: number, field: string): void {
    this.integer(v, -0x80000000, 0x7fffffff, field);
    this.rawInt32(v);
  }

  uint32(v: number, field: string): void {
    this.integer(v, 0, 0xffffffff, field);
    this.rawInt32(v);
  }

  private rawInt32(v: number): void {
    const p = this.room(4);
    const b = this.buf;
    b[p] = v >>> 24;
    b[p + 1] = v >>> 16;
    b[p + 2] = v >>> 8;
    b[p + 3] = v;
  }

  int64(v: bigint, field: string): void {
    if (typeof v === 'bigint') {
      // Buffer.writeBigInt64BE does several BigInt operations per call; most int64 fields
      // (offsets, timestamps, -1 defaults) fit in a double and take two int32 writes instead.
      const n = Number(v);
      if (Number.isSafeInteger(n)) {
        const hi = Math.floor(n / 4294967296);
        this.rawInt32(hi);
        this.rawInt32(n - hi * 4294967296);
        return;
      }
      if (v >= INT64_MIN && v <= INT64_MAX) {
        const p = this.room(8);
        this.buf.writeBigInt64BE(v, p);
        return;
      }
    }
    this.fail('INVALID_VALUE', field, `${String(v)} is not an int64 bigint`);
  }

  bool(v: boolean, field: string): void {
    if (typeof v !== 'boolean') this.fail('INVALID_VALUE', field, `${String(v)} is not a boolean`);
    this.byte(v ? 1 : 0);
  }

  uvarint(v: number, field: string): void {
    if (v < 0x80 && v >= 0 && Number.isInteger(v)) {
      this.byte(v);
      return;
    }
    this.integer(v, 0, 0xffffffff, field);
    let n = v;
    while (n >= 0x80) {
      this.byte((n & 0x7f) | 0x80);
      n = Math.floor(n / 128);
    }
    this.byte(n);
  }

  varint(v: number, field: string): void {
    this.integer(v, -0x80000000, 0x7fffffff, field);
    this.uvarint(((v << 1) ^ (v >> 31)) >>> 0, field);
  }

  varlong(v: bigint, field: string): void {
    if (typeof v !== 'bigint' || v < INT64_MIN || v > INT64_MAX) {
      this.fail('INVALID_VALUE', field, `${String(v)} is not an int64 bigint`);
    }
    let n = BigInt.asUintN(64, (v << 1n) ^ (v >> 63n));
    while (n >= 0x80n) {
      this.byte(Number(n & 0x7fn) | 0x80);
      n >>= 7n;
    }
    this.byte(Number(n));
  }

  /** A UUID as 32 lowercase hex digits, the form Reader.uuid returns. */
  uuid(v: string, field: string): void {
    if (typeof v !== 'string' || !UUID_HEX.test(v))
      this.fail('INVALID_VALUE', field, 'uuid must be 32 lowercase hex digits');
    const p = this.room(16);
    this.buf.write(v, p, 16, 'hex');
  }

  /** Raw bytes with no length prefix. */
  raw(data: Buffer): void {
    const n = data.length;
    if (n >= REFERENCE_THRESHOLD) {
      this.flushSegment();
      this.chunks.push(data);
      this.chunksLength += n;
      return;
    }
    const p = this.room(n);
    this.buf.set(data, p);
  }

  private utf8Length(v: string, field: string, max: number): number {
    if (typeof v !== 'string') this.fail('INVALID_VALUE', field, `${String(v)} is not a string`);
    const n = Buffer.byteLength(v, 'utf8');
    if (n > max) this.fail('INVALID_VALUE', field, `string of ${n} bytes exceeds ${max}`);
    return n;
  }

  private utf8(v: string, n: number): void {
    if (n === 0) return;
    const p = this.room(n);
    this.buf.write(v, p, n, 'utf8');
  }

  // Classic encodings: int16 length for strings, int32 length for bytes and arrays, -1 for null.

  string(v: string, field: string): void {
    const n = this.utf8Length(v, field, 0x7fff);
    this.int16(n, field);
    this.utf8(v, n);
  }

  nullableString(v: string | null, field: string): void {
    if (v === null) this.int16(-1, field);
    else this.string(v, field);
  }

  bytes(v: Buffer, field: string): void {
    if (!Buffer.isBuffer(v)) this.fail('INVALID_VALUE', field, 'bytes must be a Buffer');
    this.int32(v.length, field);
    this.raw(v);
  }

  nullableBytes(v: Buffer | null, field: string): void {
    if (v === null) this.int32(-1, field);
    else this.bytes(v, field);
  }

  array<T>(items: readonly T[], field: string, write: (w: Writer, item: T) => void): void {
    if (!Array.isArray(items)) this.fail('INVALID_VALUE', field, 'array expected');
    this.int32(items.length, field);
    for (const item of items) write(this, item);
  }

  nullableArray<T>(items: readonly T[] | null, field: string, write: (w: Writer, item: T) => void): void {
    if (items === null) this.int32(-1, field);
    else this.array(items, field, write);
  }

  // Compact encodings (flexible versions): unsigned varint of length + 1, 0 for null.

  compactString(v: string, field: string): void {
    const n = this.utf8Length(v, field, 0xfffffffe);
    this.uvarint(n + 1, field);
    this.utf8(v, n);
  }

  compactNullableString(v: string | null, field: string): void {
    if (v === null) this.uvarint(0, field);
    else this.compactString(v, field);
  }

  compactBytes(v: Buffer, field: string): void {
    if (!Buffer.isBuffer(v)) this.fail('INVALID_VALUE', field, 'bytes must be a Buffer');
    this.uvarint(v.length + 1, field);
    this.raw(v);
  }

  compactNullableBytes(v: Buffer | null, field: string): void {
    if (v === null) this.uvarint(0, field);
    else this.compactBytes(v, field);
  }

  compactArray<T>(items: readonly T[], field: string, write: (w: Writer, item: T) => void): void {
    if (!Array.isArray(items)) this.fail('INVALID_VALUE', field, 'array expected');
    this.uvarint(items.length + 1, field);
    for (const item of items) write(this, item);
  }

  compactNullableArray<T>(
    items: readonly T[] | null,
    field: string,
    write: (w: Writer, item: T) => void,
  ): void {
    if (items === null) this.uvarint(0, field);
    else this.compactArray(items, field, write);
  }

  // Version-following encodings: compact in flexible versions, classic otherwise.

  str(v: string, field: string): void {
    if (this.ctx.flexible) this.compactString(v, field);
    else this.string(v, field);
  }

  nullableStr(v: string | null, field: string): void {
    if (this.ctx.flexible) this.compactNullableString(v, field);
    else this.nullableString(v, field);
  }

  arr<T>(items: readonly T[], field: string, write: (w: Writer, item: T) => void): void {
    if (this.ctx.flexible) this.compactArray(items, field, write);
    else this.array(items, field, write);
  }

  nullableArr<T>(items: readonly T[] | null, field: string, write: (w: Writer, item: T) => void): void {
    if (this.ctx.flexible) this.compactNullableArray(items, field, write);
    else this.nullableArray(items, field, write);
  }

  /** Kafka `records`: nullable bytes. */
  records(v: Buffer | null, field: string, compact = this.ctx.flexible): void {
    if (compact) this.compactNullableBytes(v, field);
    else this.nullableBytes(v, field);
  }

  /** Encodes one known tagged field's value with this writer's context. */
  tagged(tag: number, write: (w: Writer) => void): RawTaggedField {
    const w = new Writer(this.ctx, 64);
    write(w);
    return { tag, data: w.finish() };
  }

  /**
   * Writes a tagged-field section: the known fields (built with `tagged`, ascending) merged with
   * the raw ones kept from decoding, in ascending tag order as KIP-482 requires.
   */
  taggedFields(
    field: string,
    raw: readonly RawTaggedField[] | undefined,
    known?: readonly RawTaggedField[],
  ): void {
    const a = known ?? NONE;
    const b = raw ?? NONE;
    if (a.length === 0 && b.length === 0) {
      this.byte(0);
      return;
    }
    this.uvarint(a.length + b.length, field);
    let i = 0;
    let j = 0;
    let previous = -1;
    while (i < a.length || j < b.length) {
      const ka = a[i];
      const kb = b[j];
      let next: RawTaggedField;
      if (kb === undefined || (ka !== undefined && ka.tag < kb.tag)) {
        next = ka!;
        i++;
      } else {
        next = kb;
        j++;
      }
      if (!Number.isInteger(next.tag) || next.tag <= previous) {
        this.fail('INVALID_VALUE', field, `tag ${next.tag} is duplicated or out of order`);
      }
      if (!Buffer.isBuffer(next.data))
        this.fail('INVALID_VALUE', field, `tag ${next.tag} data must be a Buffer`);
      previous = next.tag;
      this.uvarint(next.tag, field);
      this.uvarint(next.data.length, field);
      this.raw(next.data);
    }
  }

  /** The struct-ending tag section in flexible versions; classic versions have none to write. */
  tags(field: string, raw: readonly RawTaggedField[] | undefined, known?: readonly RawTaggedField[]): void {
    if (this.ctx.flexible) this.taggedFields(field, raw, known);
    else if ((raw !== undefined && raw.length > 0) || (known !== undefined && known.length > 0)) {
      // Dropping them silently could lose a tag the proxy added on purpose.
      this.fail('INVALID_VALUE', field, 'tagged fields need a flexible version');
    }
  }
}
