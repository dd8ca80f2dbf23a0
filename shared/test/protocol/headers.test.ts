import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../src/protocol/errors.js';
import {
  decodeRequestHeader,
  decodeResponseHeader,
  encodeRequestHeader,
  encodeResponseHeader,
  peekRequestKey,
} from '../../src/protocol/headers.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('request header', () => {
  it('decodes v1 (classic) with its client id and finds the body', () => {
    // Given a Produce v8 frame: key 0, version 8, correlation 7, client id "ab", then a body byte
    const frame = hex('0000 0008 00000007 0002 6162 ff');
    // When decoded
    const h = decodeRequestHeader(frame);
    // Then
    expect(h).toEqual({
      apiKey: 0,
      apiVersion: 8,
      correlationId: 7,
      clientId: 'ab',
      taggedFields: [],
      headerLength: 12,
    });
    expect(encodeRequestHeader(h)).toEqual(frame.subarray(0, 12));
  });

  it('decodes v2 (flexible) with an int16 client id and a tag buffer', () => {
    // Given a Fetch v17 frame whose client id keeps its int16 length, then one unknown header tag
    const frame = hex('0001 0011 0000002a 0001 78  01 05 01 99  abcd');
    const h = decodeRequestHeader(frame);
    expect(h.clientId).toBe('x');
    expect(h.taggedFields).toEqual([{ tag: 5, data: hex('99') }]);
    expect(h.headerLength).toBe(15);
    expect(encodeRequestHeader(h)).toEqual(frame.subarray(0, 15));
  });

  it('reads a null client id', () => {
    const h = decodeRequestHeader(hex('0012 0000 00000001 ffff'));
    expect(h.clientId).toBeNull();
    expect(h.headerLength).toBe(10);
  });

  it('gives ApiVersions v3 a v2 header but v2 a v1 header', () => {
    expect(decodeRequestHeader(hex('0012 0003 00000001 ffff 00')).headerLength).toBe(11);
    expect(decodeRequestHeader(hex('0012 0002 00000001 ffff')).headerLength).toBe(10);
  });

  it('peeks key, version and correlation id from 8 bytes, for any key', () => {
    expect(peekRequestKey(hex('1234 0063 ffffffff'))).toEqual({
      apiKey: 0x1234,
      apiVersion: 99,
      correlationId: -1,
    });
    expect(() => peekRequestKey(hex('0001 0002 0000'))).toThrow(ProtocolError);
  });

  it('refuses to guess the header of an unknown API key', () => {
    try {
      decodeRequestHeader(hex('0400 0000 00000001 ffff'));
      expect.unreachable();
    } catch (e) {
      expect((e as ProtocolError).code).toBe('WALPROXY_ERR_UNKNOWN_API_KEY');
    }
  });

  it('round-trips any header of a known key', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 92 }),
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: -0x80000000, max: 0x7fffffff }),
        fc.option(fc.string({ unit: 'binary', maxLength: 30 }), { nil: null }),
        (apiKey, apiVersion, correlationId, clientId) => {
          const bytes = encodeRequestHeader({ apiKey, apiVersion, correlationId, clientId });
          const h = decodeRequestHeader(Buffer.concat([bytes, hex('0102')]));
          expect(h).toMatchObject({
            apiKey,
            apiVersion,
            correlationId,
            clientId,
            headerLength: bytes.length,
          });
          expect(encodeRequestHeader(h)).toEqual(bytes);
        },
      ),
    );
  });
});

describe('response header', () => {
  it('has no tag buffer in v0 and one in v1', () => {
    const v0 = decodeResponseHeader(hex('00000009 ff'), 0);
    expect(v0).toEqual({ correlationId: 9, taggedFields: [], headerLength: 4 });
    const v1 = decodeResponseHeader(hex('00000009 01 00 00 ff'), 1);
    expect(v1).toEqual({
      correlationId: 9,
      taggedFields: [{ tag: 0, data: Buffer.alloc(0) }],
      headerLength: 7,
    });
    expect(encodeResponseHeader(v0, 0)).toEqual(hex('00000009'));
    expect(encodeResponseHeader(v1, 1)).toEqual(hex('00000009 01 00 00'));
    expect(encodeResponseHeader({ correlationId: 9 }, 1)).toEqual(hex('00000009 00'));
  });
});
