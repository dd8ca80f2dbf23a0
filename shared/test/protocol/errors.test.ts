import { describe, expect, it } from 'vitest';
import { PROTOCOL_ERROR_CODES, PROTOCOL_ERROR_PREFIX, ProtocolError } from '../../src/protocol/errors.js';

describe('ProtocolError', () => {
  it('has one stable, prefixed code per kind', () => {
    const codes = Object.values(PROTOCOL_ERROR_CODES);
    expect(new Set(codes).size).toBe(codes.length);
    for (const [kind, code] of Object.entries(PROTOCOL_ERROR_CODES))
      expect(code).toBe(`${PROTOCOL_ERROR_PREFIX}${kind}`);
  });

  it('says which API, version, field and byte offset failed', () => {
    // Given a decode failure in a Fetch v17 response
    const e = new ProtocolError(
      'TRUNCATED',
      { api: 'FetchResponse', version: 17, field: 'Records', offset: 1234 },
      'needs 100 bytes, 20 left',
    );
    // Then code, fields and message carry all of it
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('ProtocolError');
    expect(e.code).toBe('WALPROXY_ERR_TRUNCATED');
    expect(e).toMatchObject({ api: 'FetchResponse', version: 17, field: 'Records', offset: 1234 });
    expect(e.message).toBe(
      'WALPROXY_ERR_TRUNCATED: FetchResponse v17 field Records at byte 1234: needs 100 bytes, 20 left',
    );
  });

  it('leaves the version out where versions do not apply', () => {
    const e = new ProtocolError(
      'CORRUPT_RECORD_BATCH',
      { api: 'Buffer', version: -1, field: 'Magic', offset: 16 },
      'x',
    );
    expect(e.message).toBe('WALPROXY_ERR_CORRUPT_RECORD_BATCH: Buffer field Magic at byte 16: x');
  });
});
