import { parseWalObject } from '@walproxy/shared';
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import { ProducerWaits, type WalAppendOptions, WalWriter } from '../../src/wal/index.js';
import { SealingPolicy } from '../../src/wal/sealing-policy.js';
import { MemoryObjectStore } from './memory-store.js';
import { kindOf } from './ticket-outcome.js';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);
const BUDGET = 100;
/** budget − PUT p99 15 − GET p50 3 − slack 2 (SEALING_DEFAULTS). */
const LINGER = BUDGET - 20;
const BREAK_EVEN = 10_000;
const economics = {
  breakEvenObjectBytes: BREAK_EVEN,
  savingUsd: (bytes: number) => bytes - BREAK_EVEN,
  savingPerByte: (bytes: number) => (bytes - BREAK_EVEN) / bytes,
  stockUsdPerByte: 1,
};

let correlationId = 0;
const requestInfo = (): RequestInfo => ({ apiKey: 0, apiVersion: 9, correlationId: ++correlationId });

function setup(options: { policy?: boolean } = {}) {
  const store = new MemoryObjectStore();
  const producerWaits = new ProducerWaits();
  const writer = new WalWriter({
    store,
    brokerId: 7,
    lingerMs: LINGER,
    producerWaits,
    ...(options.policy ? { policy: new SealingPolicy({ economics }) } : {}),
  });
  onTestFinished(() => writer.close());
  /**
   * One acks=all Produce request of `bytes` on `connection`, as the Produce filter reports it:
   * appended tentatively, followed by ProducerWaits, confirmed when the test says the broker
   * appended it.
   */
  const produce = (connection: object, bytes: number, appendOptions: WalAppendOptions = {}) => {
    const ticket = writer.append(
      { topicName: 't', partition: 0, batch: makeBatch({ records: Buffer.alloc(bytes - 61, 0x61) }) },
      { tentative: true, budgetMs: BUDGET, ...appendOptions },
    );
    const info = requestInfo();
    producerWaits.sent(
      connection,
      info,
      { expectsAnswer: true, waitsForTheWal: true, batches: [ticket] },
      Date.now(),
    );
    return { ticket, info };
  };
  const objects = () =>
    store.putKeys.map((key) => parseWalObject(store.objects.get(key)!).entries.map((e) => e.length));
  return { store, writer, producerWaits, produce, objects };
}

describe('WalWriter sealing when every producer waits for the object', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('seals at once when the only producer’s request is in: nothing else can join before its answer', async () => {
    // Given one producer whose acks=all request the broker appended
    const { writer, produce, objects } = setup();
    const { ticket } = produce({}, 2_000);
    ticket.confirm();
    // When the turn ends, then the object is sealed without waiting out the 80 ms linger
    await vi.advanceTimersByTimeAsync(1);
    expect(await kindOf(ticket)).toBe('stored');
    expect(objects()).toEqual([[2_000]]);
    expect(writer.stats).toMatchObject({ sealedProducersWaiting: 1, sealedByLinger: 0 });
  });

  it('keeps lingering while another producer’s request is still being appended, then seals with both', async () => {
    // Given two producers with a request each; the broker appended the first one's
    const { writer, produce, objects } = setup();
    const first = produce({}, 2_000);
    const second = produce({}, 3_000);
    first.ticket.confirm();
    await vi.advanceTimersByTimeAsync(5);
    // Then the object waits for the second
    expect(objects()).toEqual([]);
    // When the broker appends the second one
    second.ticket.confirm();
    await vi.advanceTimersByTimeAsync(1);
    // Then one object holds both, sealed long before the linger would have ended
    expect(objects()).toEqual([[2_000, 3_000]]);
    expect(writer.stats.sealedProducersWaiting).toBe(1);
  });

  it('lingers for a producer answered a moment ago: its next request may join', async () => {
    // Given a producer answered at T0 and another whose request is in
    const { writer, producerWaits, produce, objects } = setup();
    const earlier = produce({}, 1_000);
    earlier.ticket.confirm();
    await vi.advanceTimersByTimeAsync(1);
    expect(objects()).toHaveLength(1);
    const returning = {};
    producerWaits.sent(
      returning,
      requestInfo(),
      { expectsAnswer: false, waitsForTheWal: false, batches: [] },
      Date.now(),
    );
    const waiting = produce({}, 2_000);
    waiting.ticket.confirm();
    // Then the object lingers: the acks=0 producer may send again within the linger
    await vi.advanceTimersByTimeAsync(LINGER - 1);
    expect(objects()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(objects()).toEqual([[1_000], [2_000]]);
    expect(writer.stats).toMatchObject({ sealedProducersWaiting: 1, sealedByLinger: 1 });
  });

  it('with a policy, seals at once only what must be stored: a mode=auto object lingers its budget', async () => {
    // Given mode=auto batches (no store required) of 2,000 bytes, under the 10,000-byte break-even
    const { writer, produce, store, objects } = setup({ policy: true });
    const { ticket } = produce({}, 2_000);
    ticket.confirm();
    // When the producer waits for the object, then it still lingers: the producer's next request
    // grows meanwhile, and the budget is what lets objects pay
    await vi.advanceTimersByTimeAsync(LINGER - 1);
    expect(store.putKeys).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(await kindOf(ticket)).toBe('BELOW_BREAK_EVEN');
    expect(writer.stats).toMatchObject({ objectsAbandoned: 1, sealedProducersWaiting: 0 });
    // And an object stored whatever it costs (durable ack, mode=wal) is sealed at once
    const required = produce({}, 1_000, { requiresStore: true });
    required.ticket.confirm();
    await vi.advanceTimersByTimeAsync(1);
    expect(await kindOf(required.ticket)).toBe('stored');
    expect(objects()).toEqual([[1_000]]);
    expect(writer.stats.sealedProducersWaiting).toBe(1);
  });

  it('seals at once a batch no known producer stands behind (appended without a report): nobody may add', async () => {
    // Given a batch appended without any producer reported to ProducerWaits
    const { writer } = setup();
    const ticket = writer.append(
      { topicName: 't', partition: 0, batch: makeBatch({ records: Buffer.alloc(1_000) }) },
      { budgetMs: BUDGET },
    );
    // Then it seals at the next turn: only a known producer keeps an object open
    await vi.advanceTimersByTimeAsync(1);
    expect(await kindOf(ticket)).toBe('stored');
    expect(writer.stats.sealedProducersWaiting).toBe(1);
  });
});
