import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Reader } from '../../src/protocol/reader.js';
import { Writer } from '../../src/protocol/writer.js';
import { protocolErrorOf } from '../helpers/round-trip.js';

const hex = (b: Buffer): string => b.toString('hex');

function written(fn: (w: Writer) => void, flexible = false): string {
  const w = new Writer({ api: 'TestMessage', version: 3, flexible });
  fn(w);
  return hex(w.finish());
}

describe('Writer integers', () => {
  it('writes big-endian extremes of every width', () => {
    expect(
      written((w) => {
        w.int8(-128, 'a');
        w.int16(32767, 'b');
        w.int32(-2147483648, 'c');
        w.uint32(4294967295, 'd');
        w.int64(2n ** 63n - 1n, 'e');
        w.int64(-1n, 'f');
        w.bool(true, 'g');
      }),
    ).toBe('80' + '7fff' + '80000000' + 'ffffffff' + '7fffffffffffffff' + 'ffffffffffffffff' + '01');
  });

  it('refuses values outside the type instead of wrapping them', () => {
    const w = new Writer({ api: 'TestMessage', version: 3, flexible: false });
    expect(protocolErrorOf(() => w.int16(40000, 'Acks')).code).toBe('WALPROXY_ERR_INVALID_VALUE');
    expect(protocolErrorOf(() => w.int32(1.5, 'Port')).code).toBe('WALPROXY_ERR_INVALID_VALUE');
    expect(protocolErrorOf(() => w.int64(2n ** 63n, 'Offset')).code).toBe('WALPROXY_ERR_INVALID_VALUE');
    expect(protocolErrorOf(() => w.uvarint(-1, 'Len')).code).toBe('WALPROXY_ERR_INVALID_VALUE');
    const e = protocolErrorOf(() => w.uuid('not-a-uuid', 'TopicId'));
    expect(e).toMatchObject({ api: 'TestMessage', version: 3, field: 'TopicId' });
  });

  it('writes the shortest varints', () => {
    expect(
      written((w) => {
        w.uvarint(0, 'a');
        w.uvarint(127, 'b');
        w.uvarint(128, 'c');
        w.uvarint(4294967295, 'd');
        w.varint(-1, 'e');
        w.varint(-2147483648, 'f');
        w.varlong(-(2n ** 63n), 'g');
      }),
    ).toBe('00' + '7f' + '8001' + 'ffffffff0f' + '01' + 'ffffffff0f' + 'ffffffffffffffffff01');
  });
});

describe('Writer strings, bytes and arrays', () => {
  it('writes null and empty differently, classic and compact', () => {
    expect(
      written((w) => {
        w.nullableString(null, 'a');
        w.nullableString('', 'b');
        w.compactNullableString(null, 'c');
        w.compactNullableString('', 'd');
        w.compactString('hi', 'e');
      }),
    ).toBe('ffff' + '0000' + '00' + '01' + '036869');
  });

  it('measures strings in UTF-8 bytes, not UTF-16 units', () => {
    expect(written((w) => w.string('é😀', 'Name'))).toBe('0006c3a9f09f9880');
  });

  it('refuses classic strings longer than an int16 length can say', () => {
    const w = new Writer();
    expect(protocolErrorOf(() => w.string('x'.repeat(0x8000), 'ClientId')).code).toBe(
      'WALPROXY_ERR_INVALID_VALUE',
    );
  });

  it('writes bytes, records and arrays with the version-following helpers', () => {
    const item = (w: Writer, v: number): void => w.int8(v, 'e');
    expect(
      written((w) => {
        w.records(Buffer.from([1, 2]), 'Records');
        w.records(null, 'Records');
        w.arr([5], 'A', item);
        w.nullableArr(null, 'B', item);
        w.str('x', 'S');
      }),
    ).toBe('00000002' + '0102' + 'ffffffff' + '00000001' + '05' + 'ffffffff' + '000178');
    expect(
      written((w) => {
        w.records(Buffer.from([1, 2]), 'Records');
        w.records(null, 'Records');
        w.arr([5], 'A', item);
        w.nullableArr(null, 'B', item);
        w.str('x', 'S');
      }, true),
    ).toBe('03' + '0102' + '00' + '02' + '05' + '00' + '0278');
  });

  it('copies large byte fields once, and later changes to the source do not leak in', () => {
    // Given a field above the by-reference threshold between small fields
    const big = Buffer.alloc(100_000, 0xab);
    const w = new Writer();
    w.int32(7, 'before');
    w.bytes(big, 'Records');
    w.int16(9, 'after');
    const out = w.finish();
    // When the source changes after encoding
    big.fill(0);
    // Then the output still holds the original bytes
    expect(out.length).toBe(4 + 4 + 100_000 + 2);
    expect(out.readInt32BE(0)).toBe(7);
    expect(out.subarray(8, 100_008).every((b) => b === 0xab)).toBe(true);
    expect(out.readInt16BE(100_008)).toBe(9);
  });

  it('grows past its initial capacity without losing bytes', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 1500 }), { maxLength: 40 }), (chunks) => {
        const w = new Writer(undefined, 8);
        for (const c of chunks) w.compactBytes(Buffer.from(c), 'b');
        const length = w.length;
        const out = w.finish();
        expect(out.length).toBe(length);
        const r = new Reader(out);
        for (const c of chunks) expect(r.compactBytes('b')).toEqual(Buffer.from(c));
        r.done('end');
      }),
    );
  });
});

describe('Writer tagged fields', () => {
  it('merges known and raw tags in ascending order', () => {
    const w = new Writer({ api: 'T', version: 1, flexible: true });
    const known = [w.tagged(1, (s) => s.int8(7, 'v'))];
    w.tags(
      'S',
      [
        { tag: 0, data: Buffer.from([0xaa]) },
        { tag: 10000, data: Buffer.alloc(0) },
      ],
      known,
    );
    expect(hex(w.finish())).toBe('03' + '0001aa' + '010107' + '904e00');
  });

  it('refuses a raw tag that repeats a known one', () => {
    const w = new Writer({ api: 'T', version: 1, flexible: true });
    const known = [w.tagged(1, (s) => s.int8(7, 'v'))];
    expect(protocolErrorOf(() => w.tags('S', [{ tag: 1, data: Buffer.alloc(0) }], known)).code).toBe(
      'WALPROXY_ERR_INVALID_VALUE',
    );
  });

  it('refuses tags in a classic version rather than dropping them', () => {
    const w = new Writer({ api: 'T', version: 1, flexible: false });
    expect(protocolErrorOf(() => w.tags('S', [{ tag: 10000, data: Buffer.alloc(0) }])).code).toBe(
      'WALPROXY_ERR_INVALID_VALUE',
    );
    w.tags('S', undefined);
    expect(w.length).toBe(0);
  });
});
