import { parseWalObject } from '@walproxy/shared';
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { type WalAppendOptions, WalWriter } from '../../src/wal/index.js';
import { SEALING_DEFAULTS, SealingPolicy } from '../../src/wal/sealing-policy.js';
import { MemoryObjectStore } from './memory-store.js';
import { kindOf } from './ticket-outcome.js';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);
/** budget − PUT p99 15 − GET p50 3 − slack 2 (SEALING_DEFAULTS). */
const linger = (budgetMs: number) => budgetMs - 20;

/**
 * Prices that make the arithmetic obvious: an object saves one unit per record byte and its
 * requests cost 10,000, so below 10,000 bytes it costs more than it saves.
 */
const BREAK_EVEN = 10_000;
const economics = {
  breakEvenObjectBytes: BREAK_EVEN,
  savingUsd: (bytes: number) => bytes - BREAK_EVEN,
  savingPerByte: (bytes: number) => (bytes - BREAK_EVEN) / bytes,
  stockUsdPerByte: 1,
};

function batchOf(bytes: number, fill = 0x61): Buffer {
  return makeBatch({ records: Buffer.alloc(bytes - 61, fill) });
}

function setup() {
  const store = new MemoryObjectStore();
  const policy = new SealingPolicy({ economics });
  const writer = new WalWriter({ store, brokerId: 7, policy });
  onTestFinished(() => writer.close());
  const append = (topic: string, bytes: number, options: WalAppendOptions = {}) =>
    writer.append({ topicName: topic, partition: 0, batch: batchOf(bytes) }, options);
  /** Topic names of each stored object's batches, in upload order. */
  const objects = () =>
    store.putKeys.map((key) =>
      parseWalObject(store.objects.get(key)!).entries.map((e) => `${e.topicName}:${e.length}`),
    );
  return { store, writer, append, objects, policyOf: () => policy };
}

describe('WalWriter with a sealing policy', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps one open object per latency budget, each sealed at its own budget’s deadline', async () => {
    // Given topics with budgets of 25 ms (linger 5) and 100 ms (linger 80), batches of both at T0
    const { append, objects, writer } = setup();
    const tight = append('tight', 12_000, { budgetMs: 25 });
    const loose = append('loose', 12_000, { budgetMs: 100 });
    append('loose', 12_000, { budgetMs: 100 });

    // When 5 ms pass, the tight topic's object is sealed alone; the loose one's is still open
    await vi.advanceTimersByTimeAsync(linger(25));
    expect(await kindOf(tight)).toBe('stored');
    expect(objects()).toEqual([['tight:12000']]);
    // And the tight topic's next batch does not seal the loose object early
    append('tight', 12_000, { budgetMs: 25 });
    await vi.advanceTimersByTimeAsync(linger(25));
    expect(objects()).toHaveLength(2);
    expect(writer.stats.sealedByLinger).toBe(2);

    // Then at 80 ms the loose object is sealed with both of its batches, none of the other budget
    await vi.advanceTimersByTimeAsync(linger(100) - 2 * linger(25) - 1);
    expect(objects()).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(await kindOf(loose)).toBe('stored');
    expect(objects()).toEqual([['tight:12000'], ['tight:12000'], ['loose:12000', 'loose:12000']]);
  });

  it('does not upload an object below break-even at its deadline: its tickets reject, its bytes are counted', async () => {
    // Given a 50 ms budget (linger 30) and 3,000 bytes of batches: under the 10,000-byte break-even
    const { append, store, writer } = setup();
    const tickets = [append('quiet', 1_000, { budgetMs: 50 }), append('quiet', 2_000, { budgetMs: 50 })];
    expect(writer.stats.pendingBytes).toBe(3_000);

    // When the deadline passes
    await vi.advanceTimersByTimeAsync(linger(50));

    // Then nothing was uploaded, every ticket says why, and the batches left pendingBytes
    expect(await Promise.all(tickets.map(kindOf))).toEqual(['BELOW_BREAK_EVEN', 'BELOW_BREAK_EVEN']);
    expect(store.putKeys).toEqual([]);
    expect(writer.stats).toMatchObject({
      objectsAbandoned: 1,
      batchesAbandoned: 2,
      bytesAbandoned: 3_000,
      objectsUploaded: 0,
      pendingBytes: 0,
    });
    // And an object above break-even at the next deadline is uploaded
    const big = append('quiet', 11_000, { budgetMs: 50 });
    await vi.advanceTimersByTimeAsync(linger(50));
    expect(await kindOf(big)).toBe('stored');
  });

  it('tells the policy what each object it could abandon became: uploaded or not, and its bytes', async () => {
    const { append: appendTo, policyOf } = setup();
    const spy = vi.spyOn(policyOf(), 'objectDecided');
    // Given a small object (abandoned), a big one (uploaded), and one that must be stored
    appendTo('small', 1_000, { budgetMs: 50 });
    await vi.advanceTimersByTimeAsync(linger(50));
    appendTo('big', 11_000, { budgetMs: 50 });
    await vi.advanceTimersByTimeAsync(linger(50));
    appendTo('durable', 1_000, { budgetMs: 50, requiresStore: true });
    await vi.advanceTimersByTimeAsync(linger(50));
    // Then the policy heard of the first two only: the third was never its to abandon
    expect(spy.mock.calls.map(([budget, bytes, uploaded]) => [budget, bytes, uploaded])).toEqual([
      [50, 1_000, false],
      [50, 11_000, true],
    ]);
  });

  it('uploads a small object when one of its batches requires the store (durable ack, mode=wal)', async () => {
    // Given a small batch that needs no store and one that does, in the same budget group
    const { append, objects, writer } = setup();
    const optional = append('auto', 1_000, { budgetMs: 50 });
    const required = append('durable', 1_000, { budgetMs: 50, requiresStore: true });

    // When the deadline passes, then the object is uploaded, both batches in it
    await vi.advanceTimersByTimeAsync(linger(50));
    expect([await kindOf(optional), await kindOf(required)]).toEqual(['stored', 'stored']);
    expect(objects()).toEqual([['auto:1000', 'durable:1000']]);
    expect(writer.stats.objectsAbandoned).toBe(0);
  });

  it('lets a topic’s deprecated linger.ms shorten the budget’s wait, never lengthen it', async () => {
    // Given a 100 ms budget (linger 80) and a batch whose topic says linger.ms 10
    const { append, writer } = setup();
    append('short', 12_000, { budgetMs: 100, lingerMs: 10 });
    await vi.advanceTimersByTimeAsync(9);
    expect(writer.stats.sealedByLinger).toBe(0);
    // Then it is sealed at 10 ms
    await vi.advanceTimersByTimeAsync(1);
    expect(writer.stats.sealedByLinger).toBe(1);

    // And a linger.ms of 500 still seals at the budget's 80 ms
    append('long', 12_000, { budgetMs: 100, lingerMs: 500 });
    await vi.advanceTimersByTimeAsync(linger(100) - 1);
    expect(writer.stats.sealedByLinger).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(writer.stats.sealedByLinger).toBe(2);
  });

  it('seals by size before the deadline, at the smallest target of its batches', async () => {
    const { append, writer } = setup();
    // Given a 100 ms budget and a topic with target.bytes 30,000: three 12,000-byte batches
    append('t', 12_000, { budgetMs: 100, targetBytes: 30_000 });
    append('t', 12_000, { budgetMs: 100, targetBytes: 30_000 });
    // When a third would pass the target, the object is sealed first, at once
    append('t', 12_000, { budgetMs: 100, targetBytes: 30_000 });
    expect(writer.stats.sealedBySize).toBe(1);
    expect(writer.stats.sealedByLinger).toBe(0);
  });

  it('uses the default budget for an append without one', async () => {
    const { append, writer } = setup();
    append('t', 12_000);
    await vi.advanceTimersByTimeAsync(linger(SEALING_DEFAULTS.latencyBudgetMs) - 1);
    expect(writer.stats.sealedByLinger).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(writer.stats.sealedByLinger).toBe(1);
  });

  it('seals or abandons, at the next timer turn, a tentative batch confirmed after its deadline', async () => {
    const { append, writer } = setup();
    // Given a small tentative batch whose broker answer comes 40 ms later (budget 50: linger 30)
    const small = append('t', 1_000, { budgetMs: 50, tentative: true });
    await vi.advanceTimersByTimeAsync(40);
    // When it is confirmed, then its object is abandoned (below break-even, past the deadline)
    small.confirm();
    await vi.advanceTimersByTimeAsync(0);
    expect(await kindOf(small)).toBe('BELOW_BREAK_EVEN');
    // And a large one confirmed late is sealed
    const large = append('t', 12_000, { budgetMs: 50, tentative: true });
    await vi.advanceTimersByTimeAsync(40);
    large.confirm();
    await vi.advanceTimersByTimeAsync(0);
    expect(writer.stats.sealedByLinger).toBe(1);
    expect(await kindOf(large)).toBe('stored');
  });

  it('puts batches confirmed together after their deadline into one object, not one object each', async () => {
    // Given two 6,000-byte tentative batches (each below the 10,000-byte break-even, together above)
    // whose confirmation comes after their deadline, as acks=all's does when a follower fetch
    // that waited for the previous object confirms them both
    const { append, objects, writer } = setup();
    const tickets = [
      append('t', 6_000, { budgetMs: 50, tentative: true }),
      append('t', 6_000, { budgetMs: 50, tentative: true }),
    ];
    await vi.advanceTimersByTimeAsync(40);
    // When both are confirmed by the same fetch
    for (const ticket of tickets) ticket.confirm();
    await vi.advanceTimersByTimeAsync(0);
    // Then one object holds both, and it is uploaded
    expect(await Promise.all(tickets.map(kindOf))).toEqual(['stored', 'stored']);
    expect(objects()).toEqual([['t:6000', 't:6000']]);
    expect(writer.stats.objectsAbandoned).toBe(0);
  });

  it('flush uploads every open object, whatever its size', async () => {
    const { append, objects, writer } = setup();
    const tickets = [append('a', 1_000, { budgetMs: 25 }), append('b', 1_000, { budgetMs: 200 })];
    await writer.flush();
    expect(await Promise.all(tickets.map(kindOf))).toEqual(['stored', 'stored']);
    expect(objects()).toEqual([['a:1000'], ['b:1000']]);
  });
});
