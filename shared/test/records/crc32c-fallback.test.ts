import { describe, expect, it, vi } from 'vitest';

// Simulates a platform without a prebuilt @node-rs/crc32 binary.
vi.mock('@node-rs/crc32', () => {
  throw new Error('Cannot find native binding');
});

describe('crc32c without the native module', () => {
  it('falls back to the pure implementation, with the same results', async () => {
    const m = await import('../../src/records/crc32c.js');
    expect(m.CRC32C_IMPLEMENTATION).toBe('pure');
    expect(m.crc32cNative).toBeUndefined();
    expect(m.crc32c).toBe(m.crc32cPure);
    expect(m.crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
  });
});
