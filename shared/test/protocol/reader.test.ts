import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Reader } from '../../src/protocol/reader.js';
import { Writer } from '../../src/protocol/writer.js';
import { hex, protocolErrorOf } from '../helpers/round-trip.js';

const reader = (s: string, flexible = false): Reader =>
  new Reader(hex(s), { api: 'TestMessage', version: 7, flexible });

describe('Reader fixed-width integers', () => {
  it('reads big-endian int8/16/32/64 and uint32 at their extremes', () => {
    // Given bytes holding each type's minimum and maximum
    const r = reader('80 7f  8000 7fff  80000000 7fffffff  ffffffff  8000000000000000 7fffffffffffffff');
    // Then each read returns the exact value
    expect([r.int8('a'), r.int8('b')]).toEqual([-128, 127]);
    expect([r.int16('a'), r.int16('b')]).toEqual([-32768, 32767]);
    expect([r.int32('a'), r.int32('b')]).toEqual([-2147483648, 2147483647]);
    expect(r.uint32('a')).toBe(4294967295);
    expect([r.int64('a'), r.int64('b')]).toEqual([-(2n ** 63n), 2n ** 63n - 1n]);
    expect(r.remaining()).toBe(0);
  });

  it('reads -1 in every width', () => {
    const r = reader('ff ffff ffffffff ffffffffffffffff');
    expect([r.int8('a'), r.int16('b'), r.int32('c'), r.int64('d')]).toEqual([-1, -1, -1, -1n]);
  });

  it('accepts only 0 and 1 as booleans, so they re-encode to the same byte', () => {
    const r = reader('00 01 02');
    expect([r.bool('a'), r.bool('b')]).toEqual([false, true]);
    expect(protocolErrorOf(() => r.bool('Flag')).code).toBe('WALPROXY_ERR_INVALID_BOOLEAN');
  });

  it('names the API, version, field and byte offset of a truncated read', () => {
    // Given 3 bytes where an int16 then an int32 are expected
    const r = reader('0001 ff');
    r.int16('First');
    // When the int32 runs past the end
    const e = protocolErrorOf(() => r.int32('Second'));
    // Then the error says where
    expect(e.code).toBe('WALPROXY_ERR_TRUNCATED');
    expect(e).toMatchObject({ api: 'TestMessage', version: 7, field: 'Second', offset: 2 });
    expect(e.message).toMatch(/^WALPROXY_ERR_TRUNCATED: TestMessage v7 field Second at byte 2: /);
  });
});

describe('Reader varints', () => {
  it('reads unsigned varints from 1 to 5 bytes, up to 2^32-1', () => {
    const r = reader('00 7f 8001 ffff03 ffffffff0f');
    expect([r.uvarint('a'), r.uvarint('b'), r.uvarint('c'), r.uvarint('d'), r.uvarint('e')]).toEqual([
      0, 127, 128, 65535, 4294967295,
    ]);
  });

  it('rejects unsigned varints beyond 32 bits and overlong encodings', () => {
    expect(protocolErrorOf(() => reader('ffffffff10').uvarint('Len')).code).toBe(
      'WALPROXY_ERR_INVALID_VARINT',
    );
    expect(protocolErrorOf(() => reader('ffffffffff01').uvarint('Len')).code).toBe(
      'WALPROXY_ERR_INVALID_VARINT',
    );
    // 0x80 0x00 is 0 written in two bytes: no encoder does that, and it would not re-encode the same.
    expect(protocolErrorOf(() => reader('8000').uvarint('Len')).code).toBe('WALPROXY_ERR_INVALID_VARINT');
    expect(protocolErrorOf(() => reader('8080').uvarint('Len')).code).toBe('WALPROXY_ERR_TRUNCATED');
  });

  it('reads zigzag varints including negatives and the int32 extremes', () => {
    const r = reader('00 01 02 03 ffffffff0f feffffff0f');
    expect([
      r.varint('a'),
      r.varint('b'),
      r.varint('c'),
      r.varint('d'),
      r.varint('e'),
      r.varint('f'),
    ]).toEqual([0, -1, 1, -2, -2147483648, 2147483647]);
  });

  it('reads zigzag varlongs including the int64 extremes', () => {
    const r = reader('01 02 ffffffffffffffffff01 feffffffffffffffff01');
    expect([r.varlong('a'), r.varlong('b'), r.varlong('c'), r.varlong('d')]).toEqual([
      -1n,
      1n,
      -(2n ** 63n),
      2n ** 63n - 1n,
    ]);
    expect(protocolErrorOf(() => reader('ffffffffffffffffff02').varlong('x')).code).toBe(
      'WALPROXY_ERR_INVALID_VARINT',
    );
    expect(protocolErrorOf(() => reader('ff00').varlong('x')).code).toBe('WALPROXY_ERR_INVALID_VARINT');
  });

  it('round-trips every int32 and int64 through the zigzag encodings', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -0x80000000, max: 0x7fffffff }),
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        (i, l) => {
          const w = new Writer();
          w.varint(i, 'i');
          w.varlong(l, 'l');
          const r = new Reader(w.finish());
          expect(r.varint('i')).toBe(i);
          expect(r.varlong('l')).toBe(l);
          r.done('end');
        },
      ),
    );
  });
});

describe('Reader strings and bytes', () => {
  it('tells null from empty in classic strings', () => {
    const r = reader('ffff 0000 0002 6869');
    expect(r.nullableString('a')).toBeNull();
    expect(r.nullableString('b')).toBe('');
    expect(r.string('c')).toBe('hi');
  });

  it('tells null from empty in compact strings (length + 1)', () => {
    const r = reader('00 01 03 6869');
    expect(r.compactNullableString('a')).toBeNull();
    expect(r.compactNullableString('b')).toBe('');
    expect(r.compactString('c')).toBe('hi');
  });

  it('rejects null where the field is not nullable, and negative lengths other than -1', () => {
    expect(protocolErrorOf(() => reader('ffff').string('Name')).code).toBe('WALPROXY_ERR_INVALID_LENGTH');
    expect(protocolErrorOf(() => reader('fffe').nullableString('Name')).code).toBe(
      'WALPROXY_ERR_INVALID_LENGTH',
    );
    expect(protocolErrorOf(() => reader('00').compactString('Name')).code).toBe(
      'WALPROXY_ERR_INVALID_LENGTH',
    );
    expect(protocolErrorOf(() => reader('fffffffe').nullableBytes('Records')).code).toBe(
      'WALPROXY_ERR_INVALID_LENGTH',
    );
    expect(protocolErrorOf(() => reader('00').compactBytes('B')).code).toBe('WALPROXY_ERR_INVALID_LENGTH');
  });

  it('rejects invalid UTF-8, which would not re-encode to the same bytes', () => {
    // A 4-byte sequence cut after 3 bytes decodes to one U+FFFD of the same length.
    expect(protocolErrorOf(() => reader('0003 f09080').string('Name')).code).toBe(
      'WALPROXY_ERR_INVALID_UTF8',
    );
    expect(protocolErrorOf(() => reader('02 ff').compactString('Name')).code).toBe(
      'WALPROXY_ERR_INVALID_UTF8',
    );
    // A genuine U+FFFD is fine.
    expect(reader('0003 efbfbd').string('Name')).toBe('\uFFFD');
  });

  it('returns byte fields as zero-copy views of the input', () => {
    const input = hex('00000003 616263 04 646566 ffffffff 00');
    const r = new Reader(input);
    const a = r.bytes('a');
    const b = r.compactBytes('b');
    expect(r.nullableBytes('c')).toBeNull();
    expect(r.compactNullableBytes('d')).toBeNull();
    expect(a.toString()).toBe('abc');
    expect(b.toString()).toBe('def');
    // Same memory: writing through the input shows in the view.
    input[4] = 0x7a;
    expect(a.toString()).toBe('zbc');
    expect(a.buffer).toBe(input.buffer);
  });

  it('reads records fields classic or compact, following the flexible flag', () => {
    expect(reader('00000002 0102').records('Records')).toEqual(hex('0102'));
    expect(reader('ffffffff').records('Records')).toBeNull();
    expect(reader('03 0102', true).records('Records')).toEqual(hex('0102'));
    expect(reader('00', true).records('Records')).toBeNull();
  });

  it('reads UUIDs as 32 lowercase hex digits', () => {
    expect(reader('00112233445566778899aabbccddeeff').uuid('TopicId')).toBe(
      '00112233445566778899aabbccddeeff',
    );
  });
});

describe('Reader arrays', () => {
  const int16 = (r: Reader): number => r.int16('e');

  it('reads classic, compact and nullable arrays', () => {
    const r = reader('00000002 0001 0002  ffffffff  03 0003 0004  00  01');
    expect(r.array('a', int16)).toEqual([1, 2]);
    expect(r.nullableArray('b', int16)).toBeNull();
    expect(r.compactArray('c', int16)).toEqual([3, 4]);
    expect(r.compactNullableArray('d', int16)).toBeNull();
    expect(r.compactArray('e', int16)).toEqual([]);
  });

  it('rejects a count larger than the bytes left before reading any element', () => {
    // Given a count of 2^31-1 elements in a 6-byte input
    const e = protocolErrorOf(() => reader('7fffffff 0001').array('Topics', int16));
    // Then it is a truncation error at the count, not an attempt to read or allocate
    expect(e.code).toBe('WALPROXY_ERR_TRUNCATED');
    expect(e.field).toBe('Topics');
    expect(protocolErrorOf(() => reader('ffffffff0f').compactArray('Topics', int16)).code).toBe(
      'WALPROXY_ERR_TRUNCATED',
    );
    expect(protocolErrorOf(() => reader('ffffffff').array('Topics', int16)).code).toBe(
      'WALPROXY_ERR_INVALID_LENGTH',
    );
  });
});

describe('Reader tagged fields', () => {
  it('keeps unknown tags raw and in order, as views of the input', () => {
    const r = reader('02  00 02 abcd  9027 01 ee', true);
    const tags = r.taggedFields('Struct');
    expect(tags).toEqual([
      { tag: 0, data: hex('abcd') },
      { tag: 5008, data: hex('ee') },
    ]);
    r.done('end');
  });

  it('returns undefined for an empty section and nothing at all in classic versions', () => {
    expect(reader('00', true).taggedFields('S')).toBeUndefined();
    const classic = reader('00');
    expect(classic.tags('S')).toBeUndefined();
    expect(classic.remaining()).toBe(1);
  });

  it('hands known tags to the decoder with a reader bounded to their bytes', () => {
    const target: { value?: number } = {};
    const r = reader('02 01 04 0000002a 03 01 ff', true);
    const raw = r.taggedFields('S', target, (t, tag, sub) => {
      if (tag !== 1) return false;
      t.value = sub.int32('Value');
      return true;
    });
    expect(target.value).toBe(42);
    expect(raw).toEqual([{ tag: 3, data: hex('ff') }]);
  });

  it('rejects a known tag whose content is shorter or longer than declared', () => {
    const readInt16 = (_: unknown, tag: number, sub: Reader): boolean => {
      sub.int16('Value');
      return tag === 1;
    };
    expect(protocolErrorOf(() => reader('01 01 03 000000', true).taggedFields('S', {}, readInt16)).code).toBe(
      'WALPROXY_ERR_TAG_SIZE',
    );
    expect(protocolErrorOf(() => reader('01 01 01 00', true).taggedFields('S', {}, readInt16)).code).toBe(
      'WALPROXY_ERR_TRUNCATED',
    );
  });

  it('rejects tags out of order or repeated (KIP-482 requires ascending order)', () => {
    expect(protocolErrorOf(() => reader('02 05 00 03 00', true).taggedFields('S')).code).toBe(
      'WALPROXY_ERR_TAG_ORDER',
    );
    expect(protocolErrorOf(() => reader('02 05 00 05 00', true).taggedFields('S')).code).toBe(
      'WALPROXY_ERR_TAG_ORDER',
    );
  });

  it('rejects a huge tag count or size in a tiny input without allocating', () => {
    expect(protocolErrorOf(() => reader('ffffffff0f 00', true).taggedFields('S')).code).toBe(
      'WALPROXY_ERR_TRUNCATED',
    );
    expect(protocolErrorOf(() => reader('01 00 ffffffff0f', true).taggedFields('S')).code).toBe(
      'WALPROXY_ERR_TRUNCATED',
    );
  });
});

describe('Reader.done', () => {
  it('rejects bytes left over', () => {
    const r = reader('0001 02');
    r.int16('a');
    const e = protocolErrorOf(() => r.done('TestMessage'));
    expect(e.code).toBe('WALPROXY_ERR_TRAILING_BYTES');
    expect(e.offset).toBe(2);
  });
});
