import { describe, expect, it } from 'vitest';
import { assertValidKey, assertValidPrefix } from '../../src/store/index.js';
import { assertValidRange } from '../../src/store/object-store.js';

describe('assertValidKey', () => {
  it.each(['a', 'wal/2026-01-01T00/0001-broker-1.obj', 'x.y-z_0', 'ü/日本'])('accepts %s', (key) => {
    // Given a portable key, When checked, Then it passes
    expect(() => assertValidKey(key)).not.toThrow();
  });

  it.each([
    ['', 'empty'],
    ['/a', 'empty path segment'],
    ['a/', 'empty path segment'],
    ['a//b', 'empty path segment'],
    ['a/./b', '"." path segment'],
    ['../a', '".." path segment'],
    ['a\0b', 'NUL'],
    ['a\\b', 'backslash'],
    ['k'.repeat(1025), 'longer than 1024 bytes'],
  ])('refuses %j: %s', (key, why) => {
    // Given a key a filesystem would read differently from S3, When checked, Then it fails saying why
    expect(() => assertValidKey(key)).toThrow(why);
    expect(() => assertValidKey(key)).toThrow(
      expect.objectContaining({ code: 'WALPROXY_ERR_STORE_INVALID_ARGUMENT' }),
    );
  });
});

describe('assertValidPrefix', () => {
  it.each(['', 'a', 'a/', 'a/b', 'a/b/'])('accepts %j', (prefix) => {
    expect(() => assertValidPrefix(prefix)).not.toThrow();
  });

  it.each(['/', '../', 'a//', 'a/../'])('refuses %j', (prefix) => {
    expect(() => assertValidPrefix(prefix)).toThrow(
      expect.objectContaining({ code: 'WALPROXY_ERR_STORE_INVALID_ARGUMENT' }),
    );
  });
});

describe('assertValidRange', () => {
  it('accepts a range of at least one byte at a non-negative offset and refuses others', () => {
    // Given ranges, When checked, Then only well-formed ones pass
    expect(() => assertValidRange('k', { offset: 0, length: 1 })).not.toThrow();
    for (const range of [
      { offset: 0, length: 0 },
      { offset: -1, length: 5 },
      { offset: 0.5, length: 5 },
    ]) {
      expect(() => assertValidRange('k', range)).toThrow(
        expect.objectContaining({ code: 'WALPROXY_ERR_STORE_INVALID_RANGE' }),
      );
    }
  });
});
