import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { newWalObjectKey } from '../../src/wal/object-key.js';
import { RecentKeys } from '../../src/wal/recent-keys.js';

const MiB = 1024 * 1024;

function collectGarbage(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** `n` distinct keys as the writer names objects (prefix, hour, broker, time, random part). */
function objectKeys(n: number): string[] {
  const start = Date.UTC(2026, 11, 4, 14);
  return Array.from({ length: n }, (_, i) => newWalObjectKey('wal/', 1 + (i % 3), start + i * 10));
}

describe('RecentKeys', () => {
  it('tells a first read from a re-read, and forgets the oldest key beyond its capacity', () => {
    const seen = new RecentKeys(3);
    const [a, b, c, d] = objectKeys(4) as [string, string, string, string];
    expect([seen.add(a), seen.add(a), seen.add(b), seen.add(c), seen.add(b)]).toEqual([
      true,
      false,
      true,
      true,
      false,
    ]);
    expect(seen.size).toBe(3);
    // d pushes a (the oldest) out: a reads as new again, and pushes b out in turn
    expect(seen.add(d)).toBe(true);
    expect(seen.add(c)).toBe(false);
    expect(seen.add(a)).toBe(true);
    expect(seen.add(b)).toBe(true);
    expect(seen.size).toBe(3);
  });

  it('counts 65,536 distinct object keys as 65,536 objects', () => {
    const seen = new RecentKeys(65_536);
    const keys = objectKeys(65_536);
    // (two keys of one 30-bit hash count once: a few in 65,536 at most)
    expect(keys.filter((k) => seen.add(k)).length).toBeGreaterThanOrEqual(65_530);
    expect(keys.filter((k) => seen.add(k)).length).toBe(0);
  });

  it("remembers a reader's 65,536 object keys in under 3 MiB of heap, where a Set of the keys holds them all", () => {
    const gc = collectGarbage();
    const start = Date.UTC(2026, 11, 4, 14);
    // As in a follower's reader: each key arrives in a reference, is read once, and nothing but
    // the reader's memory of it outlives the fill.
    const heapHeldBy = (remember: { add(key: string): unknown }) => {
      for (let i = 0; i < 3; i++) gc();
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 65_536; i++) remember.add(newWalObjectKey('wal/', 1 + (i % 3), start + i * 10));
      for (let i = 0; i < 3; i++) gc();
      return (process.memoryUsage().heapUsed - before) / MiB;
    };
    // The control (what the reader did before): the measurement sees the keys a Set keeps
    const keySet = new Set<string>();
    const setMiB = heapHeldBy(keySet);
    const recent = new RecentKeys(65_536);
    const recentMiB = heapHeldBy(recent);
    console.log(
      `[recent-keys] 65,536 keys remembered: Set of keys +${setMiB.toFixed(2)} MiB, RecentKeys +${recentMiB.toFixed(2)} MiB`,
    );
    expect(keySet.size).toBe(65_536);
    expect(setMiB).toBeGreaterThan(5);
    expect(recent.size).toBeGreaterThanOrEqual(65_530);
    expect(recentMiB).toBeLessThan(3);
  });
});
