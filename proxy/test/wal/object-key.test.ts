import { describe, expect, it, vi } from 'vitest';
import { newWalObjectKey, parseWalObjectKey, walHourPrefix } from '../../src/wal/object-key.js';

const T0 = Date.UTC(2026, 0, 2, 3, 59, 59, 990);

describe('WAL object keys', () => {
  it('follows the layout <prefix><yyyy>/<mm>/<dd>/<hh>/<brokerId>/<ms>-<seq>-<random>.wal in UTC', () => {
    // Given a prefix, a broker id and a time
    // When a key is made
    const key = newWalObjectKey('wal/', 12, T0);

    // Then it is in T0's UTC hour bucket and its id starts with the zero-padded timestamp
    expect(key).toMatch(/^wal\/2026\/01\/02\/03\/12\/1767326399990-[0-9a-f]{8}-[0-9a-f]{12}\.wal$/);
    expect(key.startsWith(walHourPrefix('wal/', T0))).toBe(true);
    expect(parseWalObjectKey(key)).toMatchObject({ prefix: 'wal/', brokerId: 12, createdAtMs: T0 });
    // And early times are padded, so lexical order stays numeric order
    expect(newWalObjectKey('', 0, 5)).toMatch(/^1970\/01\/01\/00\/0\/0000000000005-/);
  });

  it('makes 10,000 unique keys that sort in creation order, across an hour boundary', () => {
    // Given a clock that moves 1 ms every 7 keys, starting 10 ms before an hour ends
    const keys: string[] = [];

    // When 10,000 keys are made
    for (let i = 0; i < 10_000; i++) keys.push(newWalObjectKey('wal/', 3, T0 + Math.floor(i / 7)));

    // Then none repeats, sorting them gives back the creation order, and each names its own hour
    expect(new Set(keys).size).toBe(10_000);
    expect([...keys].sort()).toEqual(keys);
    expect(keys[0]!.startsWith('wal/2026/01/02/03/3/')).toBe(true);
    expect(keys.at(-1)!.startsWith('wal/2026/01/02/04/3/')).toBe(true);
    for (const [i, key] of keys.entries()) {
      expect(parseWalObjectKey(key)?.createdAtMs).toBe(T0 + Math.floor(i / 7));
    }
  });

  it('gives two processes with the same broker id different keys in the same millisecond', async () => {
    // Given the module loaded twice, as two sidecar processes (a restart) would: both sequences at 0
    vi.resetModules();
    const a = await import('../../src/wal/object-key.js');
    vi.resetModules();
    const b = await import('../../src/wal/object-key.js');

    // When both make their first key for the same broker in the same millisecond
    const [keyA, keyB] = [a.newWalObjectKey('wal/', 1, T0), b.newWalObjectKey('wal/', 1, T0)];

    // Then timestamp and sequence are equal and the random suffix tells them apart
    expect(a.parseWalObjectKey(keyA)).toMatchObject({ sequence: 0, createdAtMs: T0 });
    expect(b.parseWalObjectKey(keyB)).toMatchObject({ sequence: 0, createdAtMs: T0 });
    expect(keyA).not.toBe(keyB);
  });

  it('parses only keys it made, with a bucket that matches the timestamp', () => {
    // Given keys of other shapes
    const good = newWalObjectKey('a/b/', 5, T0);

    // When they are parsed, then only the well-formed one with a consistent bucket is accepted
    expect(parseWalObjectKey(good)).toMatchObject({ prefix: 'a/b/', brokerId: 5 });
    expect(parseWalObjectKey(good.replace('/2026/01/02/03/', '/2026/01/02/05/'))).toBeUndefined();
    expect(parseWalObjectKey('.walproxy-validate-0123456789abcdef')).toBeUndefined();
    expect(parseWalObjectKey(`${good}.tmp`)).toBeUndefined();
  });
});
