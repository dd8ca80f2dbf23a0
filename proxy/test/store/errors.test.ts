import { describe, expect, it } from 'vitest';
import { isObjectStoreError, OBJECT_STORE_ERROR_CODES, ObjectStoreError } from '../../src/store/index.js';

describe('ObjectStoreError', () => {
  it('takes its retriable flag from the code table unless the store says otherwise', () => {
    // Given errors with and without an explicit flag
    const unreachable = new ObjectStoreError('WALPROXY_ERR_STORE_UNREACHABLE', 'down');
    const slowDown = new ObjectStoreError('WALPROXY_ERR_STORE_OTHER', 'SlowDown', {
      retriable: true,
      key: 'k',
    });

    // Then the table's default applies to the first and the override to the second
    expect(unreachable).toMatchObject({ retriable: true, key: undefined, name: 'ObjectStoreError' });
    expect(slowDown).toMatchObject({ retriable: true, key: 'k' });
    expect(OBJECT_STORE_ERROR_CODES.WALPROXY_ERR_STORE_OTHER.retriable).toBe(false);
  });

  it('is recognised by code', () => {
    // Given a store error and a plain error
    const missing = new ObjectStoreError('WALPROXY_ERR_STORE_NOT_FOUND', 'gone', {
      cause: new Error('ENOENT'),
    });

    // Then the guard tells them apart, with or without a code to match
    expect(isObjectStoreError(missing)).toBe(true);
    expect(isObjectStoreError(missing, 'WALPROXY_ERR_STORE_NOT_FOUND')).toBe(true);
    expect(isObjectStoreError(missing, 'WALPROXY_ERR_STORE_ALREADY_EXISTS')).toBe(false);
    expect(isObjectStoreError(new Error('plain'))).toBe(false);
    expect(missing.cause).toBeInstanceOf(Error);
  });
});
