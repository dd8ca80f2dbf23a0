import { isUtf8 } from 'node:buffer';
import { int16At, int32At, int64At } from './bytes.js';
import { ProtocolError, type ProtocolErrorKind } from './errors.js';

/** A tagged field kept as raw bytes (KIP-482): a tag this codec does not decode, re-emitted as is. */
export interface RawTaggedField {
  readonly tag: number;
  readonly data: Buffer;
}

/** What is being decoded, for error messages and for the classic/compact choice. */
export interface CodecContext {
  /** Kafka message name, e.g. `FetchResponse`. */
  readonly api: string;
  readonly version: number;
  /**
   * Flexible versions (KIP-482) use compact strings, bytes and arrays and end every struct with a
   * tagged-field section. The `str`/`arr`/`records`/`tags`… methods follow this flag; the
   * explicitly named ones (`string`, `compactString`…) ignore it.
   */
  readonly flexible: boolean;
}

const NO_CONTEXT: CodecContext = { api: 'Buffer', version: -1, flexible: false };

/**
 * Bounds-checked big-endian reader over one buffer. Every length and count is checked against the
 * bytes that remain before anything is allocated, so a hostile length costs a ProtocolError, not
 * memory. Byte fields come back as zero-copy subarrays of the input.
 */
export class Reader {
  readonly buf: Buffer;
  readonly ctx: CodecContext;
  offset: number;
  readonly end: number;

  constructor(buf: Buffer, ctx: CodecContext = NO_CONTEXT, offset = 0, end = buf.length) {
    this.buf = buf;
    this.ctx = ctx;
    this.offset = offset;
    this.end = end;
  }

  remaining(): number {
    return this.end - this.offset;
  }

  fail(kind: ProtocolErrorKind, field: string, detail: string, at = this.offset): never {
    throw new ProtocolError(
      kind,
      { api: this.ctx.api, version: this.ctx.version, field, offset: at },
      detail,
    );
  }

  /** Throws unless every byte was consumed: leftovers could not be re-encoded byte-exact. */
  done(field: string): void {
    if (this.offset !== this.end)
      this.fail('TRAILING_BYTES', field, `${this.end - this.offset} bytes left over`);
  }

  /** Advances past `n` bytes and returns where they start. */
  private take(n: number, field: string): number {
    const o = this.offset;
    if (n > this.end - o) this.fail('TRUNCATED', field, `needs ${n} bytes, ${this.end - o} left`);
    this.offset = o + n;
    return o;
  }

  skip(n: number, field: string): void {
    this.take(n, field);
  }

  int8(field: string): number {
    const o = this.take(1, field);
    return (this.buf[o]! << 24) >> 24;
  }

  int16(field: string): number {
    return int16At(this.buf, this.take(2, field));
  }

  int32(field: string): number {
    return int32At(this.buf, this.take(4, field));
  }

  uint32(field: string): number {
    return this.int32(field) >>> 0;
  }

  int64(field: string): bigint {
    return int64At(this.buf, this.take(8, field));
  }

  /** Kafka `bool`: one byte. Only 0 and 1 are accepted, so re-encoding gives the same byte. */
  bool(field: string): boolean {
    const o = this.take(1, field);
    const v = this.buf[o]!;
    if (v > 1) this.fail('INVALID_BOOLEAN', field, `byte ${v} is not 0 or 1`, o);
    return v === 1;
  }

  /**
   * Unsigned varint of at most 32 bits. Overlong encodings (a final zero group) are rejected: no
   * Kafka encoder writes them and they would not re-encode to the same bytes.
   */
  uvarint(field: string): number {
    const b = this.buf;
    const start = this.offset;
    let o = start;
    let value = 0;
    // Groups 1-4 carry bits 0-27 and fit int32 bit operations; group 5 carries bits 28-31.
    for (let shift = 0; shift < 28; shift += 7) {
      if (o === this.end) this.fail('TRUNCATED', field, 'varint runs past the end', start);
      const byte = b[o++]!;
      value |= (byte & 0x7f) << shift;
      if (byte < 0x80) {
        if (byte === 0 && shift > 0) this.fail('INVALID_VARINT', field, 'overlong varint', start);
        this.offset = o;
        return value;
      }
    }
    if (o === this.end) this.fail('TRUNCATED', field, 'varint runs past the end', start);
    const last = b[o++]!;
    if (last > 0x0f) this.fail('INVALID_VARINT', field, 'unsigned varint exceeds 32 bits', start);
    if (last === 0) this.fail('INVALID_VARINT', field, 'overlong varint', start);
    this.offset = o;
    return (value | (last << 28)) >>> 0;
  }

  /** Signed zigzag varint (int32), as in record headers. */
  varint(field: string): number {
    const u = this.uvarint(field);
    return (u >>> 1) ^ -(u & 1);
  }

  /** Signed zigzag varlong (int64), at most 10 bytes. */
  varlong(field: string): bigint {
    const b = this.buf;
    const start = this.offset;
    let o = start;
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (o === this.end) this.fail('TRUNCATED', field, 'varlong runs past the end', start);
      const byte = b[o++]!;
      if (shift === 63n && byte > 0x01) this.fail('INVALID_VARINT', field, 'varlong exceeds 64 bits', start);
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) {
        if (byte === 0 && shift > 0n) this.fail('INVALID_VARINT', field, 'overlong varlong', start);
        break;
      }
    }
    this.offset = o;
    return (value >> 1n) ^ -(value & 1n);
  }

  uuid(field: string): string {
    const o = this.take(16, field);
    return this.buf.toString('hex', o, o + 16);
  }

  private utf8(n: number, field: string): string {
    const o = this.take(n, field);
    const s = this.buf.toString('utf8', o, o + n);
    // The decoder replaces invalid sequences with U+FFFD, which would not re-encode to the same
    // bytes; only then is the full validation worth its cost.
    if (s.includes('\uFFFD') && !isUtf8(this.buf.subarray(o, o + n))) {
      this.fail('INVALID_UTF8', field, 'string is not valid UTF-8', o);
    }
    return s;
  }

  private slice(n: number, field: string): Buffer {
    const o = this.take(n, field);
    return this.buf.subarray(o, o + n);
  }

  // Classic encodings: int16 length for strings, int32 length for bytes and arrays, -1 for null.

  string(field: string): string {
    const at = this.offset;
    const n = this.int16(field);
    if (n < 0) this.fail('INVALID_LENGTH', field, `string length ${n}`, at);
    return this.utf8(n, field);
  }

  nullableString(field: string): string | null {
    const at = this.offset;
    const n = this.int16(field);
    if (n === -1) return null;
    if (n < 0) this.fail('INVALID_LENGTH', field, `string length ${n}`, at);
    return this.utf8(n, field);
  }

  bytes(field: string): Buffer {
    const at = this.offset;
    const n = this.int32(field);
    if (n < 0) this.fail('INVALID_LENGTH', field, `bytes length ${n}`, at);
    return this.slice(n, field);
  }

  nullableBytes(field: string): Buffer | null {
    const at = this.offset;
    const n = this.int32(field);
    if (n === -1) return null;
    if (n < 0) this.fail('INVALID_LENGTH', field, `bytes length ${n}`, at);
    return this.slice(n, field);
  }

  array<T>(field: string, read: (r: Reader) => T): T[] {
    const at = this.offset;
    const n = this.int32(field);
    if (n < 0) this.fail('INVALID_LENGTH', field, `array length ${n}`, at);
    return this.elements(n, field, read);
  }

  nullableArray<T>(field: string, read: (r: Reader) => T): T[] | null {
    const at = this.offset;
    const n = this.int32(field);
    if (n === -1) return null;
    if (n < 0) this.fail('INVALID_LENGTH', field, `array length ${n}`, at);
    return this.elements(n, field, read);
  }

  // Compact encodings (flexible versions): unsigned varint of length + 1, 0 for null.

  compactString(field: string): string {
    const at = this.offset;
    const n = this.uvarint(field) - 1;
    if (n < 0) this.fail('INVALID_LENGTH', field, 'null string where null is not allowed', at);
    return this.utf8(n, field);
  }

  compactNullableString(field: string): string | null {
    const n = this.uvarint(field) - 1;
    return n < 0 ? null : this.utf8(n, field);
  }

  compactBytes(field: string): Buffer {
    const at = this.offset;
    const n = this.uvarint(field) - 1;
    if (n < 0) this.fail('INVALID_LENGTH', field, 'null bytes where null is not allowed', at);
    return this.slice(n, field);
  }

  compactNullableBytes(field: string): Buffer | null {
    const n = this.uvarint(field) - 1;
    return n < 0 ? null : this.slice(n, field);
  }

  compactArray<T>(field: string, read: (r: Reader) => T): T[] {
    const at = this.offset;
    const n = this.uvarint(field) - 1;
    if (n < 0) this.fail('INVALID_LENGTH', field, 'null array where null is not allowed', at);
    return this.elements(n, field, read);
  }

  compactNullableArray<T>(field: string, read: (r: Reader) => T): T[] | null {
    const n = this.uvarint(field) - 1;
    return n < 0 ? null : this.elements(n, field, read);
  }

  private elements<T>(n: number, field: string, read: (r: Reader) => T): T[] {
    // Every element takes at least one byte, so a count above the bytes left is a lie that must
    // not turn into a loop or an allocation.
    if (n > this.end - this.offset)
      this.fail('TRUNCATED', field, `${n} elements, ${this.end - this.offset} bytes left`);
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(read(this));
    return out;
  }

  // Version-following encodings: compact in flexible versions, classic otherwise.

  str(field: string): string {
    return this.ctx.flexible ? this.compactString(field) : this.string(field);
  }

  nullableStr(field: string): string | null {
    return this.ctx.flexible ? this.compactNullableString(field) : this.nullableString(field);
  }

  arr<T>(field: string, read: (r: Reader) => T): T[] {
    return this.ctx.flexible ? this.compactArray(field, read) : this.array(field, read);
  }

  nullableArr<T>(field: string, read: (r: Reader) => T): T[] | null {
    return this.ctx.flexible ? this.compactNullableArray(field, read) : this.nullableArray(field, read);
  }

  /** Kafka `records`: nullable bytes, zero-copy. */
  records(field: string, compact = this.ctx.flexible): Buffer | null {
    return compact ? this.compactNullableBytes(field) : this.nullableBytes(field);
  }

  /**
   * Reads a tagged-field section. `known` is offered each tag with a reader bounded to that
   * field's bytes; it returns true if it decoded the tag (which must then use all of its bytes)
   * or false to keep the tag raw. Returns the raw tags, or undefined if there are none.
   */
  taggedFields<T>(
    field: string,
    target?: T,
    known?: (target: T, tag: number, r: Reader) => boolean,
  ): RawTaggedField[] | undefined {
    const count = this.uvarint(field);
    if (count === 0) return undefined;
    if (count > this.end - this.offset) {
      this.fail('TRUNCATED', field, `${count} tagged fields, ${this.end - this.offset} bytes left`);
    }
    let raw: RawTaggedField[] | undefined;
    let previous = -1;
    for (let i = 0; i < count; i++) {
      const at = this.offset;
      const tag = this.uvarint(field);
      if (tag <= previous) this.fail('TAG_ORDER', field, `tag ${tag} after tag ${previous}`, at);
      previous = tag;
      const size = this.uvarint(field);
      const start = this.take(size, field);
      if (known !== undefined) {
        const sub = new Reader(this.buf, this.ctx, start, start + size);
        if (known(target as T, tag, sub)) {
          if (sub.offset !== sub.end) {
            this.fail('TAG_SIZE', field, `tag ${tag} declares ${size} bytes, uses ${sub.offset - start}`, at);
          }
          continue;
        }
      }
      raw ??= [];
      raw.push({ tag, data: this.buf.subarray(start, start + size) });
    }
    return raw;
  }

  /** The struct-ending tag section in flexible versions; nothing in classic versions. */
  tags<T>(
    field: string,
    target?: T,
    known?: (target: T, tag: number, r: Reader) => boolean,
  ): RawTaggedField[] | undefined {
    return this.ctx.flexible ? this.taggedFields(field, target, known) : undefined;
  }
}
