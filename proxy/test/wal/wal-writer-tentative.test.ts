import { parseWalObject } from '@walproxy/shared';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { isWalWriteError, WalWriter } from '../../src/wal/index.js';
import { MemoryObjectStore } from './memory-store.js';

function setup(options: { lingerMs?: number; confirmTimeoutMs?: number } = {}) {
  const store = new MemoryObjectStore();
  const writer = new WalWriter({
    store,
    brokerId: 1,
    lingerMs: options.lingerMs ?? 5,
    confirmTimeoutMs: options.confirmTimeoutMs ?? 5_000,
  });
  onTestFinished(() => writer.close());
  const append = (text: string, partition = 0) =>
    writer.append(
      { topicName: 't', partition, batch: makeBatch({ records: Buffer.from(text) }) },
      { tentative: true },
    );
  const storedTexts = () =>
    [...store.objects.values()].flatMap((o) =>
      parseWalObject(o).entries.map((e) => o.subarray(e.position + 61, e.position + e.length).toString()),
    );
  return { store, writer, append, storedTexts };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('WalWriter tentative batches', () => {
  it('stores a tentative batch only once confirmed', async () => {
    const { append, storedTexts, writer } = setup();
    const ticket = append('confirmed later');
    await sleep(30);
    // Given no confirmation yet, then no object holds it, past the linger
    expect(storedTexts()).toEqual([]);
    expect(writer.stats.tentativeBatches).toBe(1);
    // When the broker's answer confirms it, then it is stored (its linger already ran: at once)
    ticket.confirm();
    const location = await ticket.durable;
    expect(storedTexts()).toEqual(['confirmed later']);
    expect(location.length).toBeGreaterThan(61);
  });

  it('never stores a batch the broker refused', async () => {
    const { append, storedTexts, writer } = setup();
    const refused = append('refused');
    const accepted = append('accepted', 1);
    refused.reject();
    accepted.confirm();
    await accepted.durable;
    const error = await refused.durable.catch((e: unknown) => e);
    expect(isWalWriteError(error, 'NOT_APPENDED')).toBe(true);
    expect(storedTexts()).toEqual(['accepted']);
    expect(writer.stats).toMatchObject({ batchesRejected: 1, pendingBytes: 0 });
  });

  it('carries an unconfirmed batch over while the confirmed ones are sealed', async () => {
    const { append, storedTexts } = setup();
    const early = append('early');
    const late = append('late');
    early.confirm();
    await early.durable;
    expect(storedTexts()).toEqual(['early']);
    late.confirm();
    await late.durable;
    expect(storedTexts().sort()).toEqual(['early', 'late']);
  });

  it('drops a batch neither confirmed nor refused within the bound (acks=0, RF=1), counted', async () => {
    const { append, storedTexts, writer } = setup({ confirmTimeoutMs: 20 });
    const ticket = append('nobody answers');
    const error = await ticket.durable.catch((e: unknown) => e);
    expect(isWalWriteError(error, 'UNCONFIRMED')).toBe(true);
    expect(writer.stats).toMatchObject({ batchesUnconfirmed: 1, pendingBytes: 0, tentativeBatches: 0 });
    // And a confirmation that comes too late changes nothing
    ticket.confirm();
    await sleep(20);
    expect(storedTexts()).toEqual([]);
  });

  it('counts tentative bytes against maxPendingBytes and gives them back when dropped', async () => {
    const { append, writer } = setup();
    const ticket = append('x');
    expect(writer.stats.pendingBytes).toBeGreaterThan(0);
    ticket.reject();
    expect(writer.stats.pendingBytes).toBe(0);
  });
});
