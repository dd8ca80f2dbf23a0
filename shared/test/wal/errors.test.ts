import { describe, expect, it } from 'vitest';
import { WAL_ERROR_CODES, WAL_ERROR_PREFIX, WalFormatError } from '../../src/wal/index.js';

describe('WalFormatError', () => {
  it('carries a stable prefixed code, its kind and the byte offset in the message', () => {
    // Given an error found at a known offset
    const err = new WalFormatError('FOOTER_CRC_MISMATCH', 'footer is corrupt', 1234);

    // Then code, kind and offset are set and the message says where
    expect(err).toMatchObject({
      kind: 'FOOTER_CRC_MISMATCH',
      code: 'WALPROXY_ERR_WAL_FOOTER_CRC_MISMATCH',
      offset: 1234,
    });
    expect(err.message).toBe('footer is corrupt (at byte 1234)');
    expect(Object.values(WAL_ERROR_CODES).every((code) => code.startsWith(WAL_ERROR_PREFIX))).toBe(true);
  });
});
