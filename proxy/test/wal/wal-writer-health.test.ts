import { describe, expect, it, onTestFinished } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { createLogger } from '../../src/log.js';
import { ObjectStoreError } from '../../src/store/index.js';
import { StoreHealth } from '../../src/store/store-health.js';
import { WalWriter } from '../../src/wal/index.js';
import { gate, MemoryObjectStore, unreachable } from './memory-store.js';

function setup(options: { degradeAfterMs?: number; uploadDeadlineMs?: number } = {}) {
  const store = new MemoryObjectStore();
  // Not started: only the writer's reports move it (the probe is StoreHealth's own test).
  const health = new StoreHealth({ store: store.url, probe: async () => {}, log: createLogger('silent') });
  health.markHealthy('test start');
  const writer = new WalWriter({
    store,
    brokerId: 1,
    lingerMs: 0,
    health,
    degradeAfterMs: options.degradeAfterMs ?? 50,
    uploadDeadlineMs: options.uploadDeadlineMs ?? 5_000,
    retryBaseMs: 1,
    retryMaxMs: 2,
  });
  onTestFinished(() => writer.close());
  const append = () => writer.append({ topicName: 't', partition: 0, batch: makeBatch() });
  return { store, health, writer, append };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('WalWriter and StoreHealth', () => {
  it('marks the store degraded when an upload hangs past degradeAfterMs (a frozen store never fails)', async () => {
    // Given a store whose puts never answer
    const { store, health, append } = setup({ degradeAfterMs: 30 });
    const frozen = gate();
    store.onPut = async () => frozen.promise;
    onTestFinished(() => frozen.open());
    // When a batch is appended and its object sealed
    append();
    await sleep(10);
    expect(health.state).toBe('healthy');
    // Then, once the put has been outstanding 30 ms, the store is degraded
    await sleep(60);
    expect(health.state).toBe('degraded');
  });

  it('marks the store degraded when an object fails for good (a refusing store)', async () => {
    const { store, health, append } = setup();
    store.onPut = async (key) => {
      throw new ObjectStoreError('WALPROXY_ERR_STORE_ACCESS_DENIED', `no access to ${key}`, { key });
    };
    await append().durable.catch(() => undefined);
    expect(health.state).toBe('degraded');
  });

  it('marks the store degraded after three failed attempts in a row (503 SlowDown storms)', async () => {
    const { store, health, append } = setup();
    let calls = 0;
    store.onPut = async (key, commit) => {
      calls++;
      if (calls <= 3)
        throw new ObjectStoreError('WALPROXY_ERR_STORE_OTHER', `SlowDown (HTTP 503) ${key}`, {
          key,
          retriable: true,
        });
      commit();
    };
    // When the fourth attempt stores the object, it was degraded after the third
    const states: string[] = [];
    health.onChange((s) => states.push(s));
    await append().durable;
    expect(states[0]).toBe('degraded');
  });

  it('marks it healthy again when an object is stored promptly', async () => {
    const { store, health, append } = setup();
    store.onPut = async () => {
      throw unreachable('k');
    };
    await append().durable.catch(() => undefined);
    expect(health.state).toBe('degraded');
    store.onPut = async (_key, commit) => commit();
    await append().durable;
    expect(health.state).toBe('healthy');
  });

  it('does not call a slow success healthy: the probe decides', async () => {
    const { store, health, append } = setup({ degradeAfterMs: 20 });
    health.markDegraded('test');
    store.onPut = async (_key, commit) => {
      await sleep(50);
      commit();
    };
    await append().durable;
    expect(health.state).toBe('degraded');
  });
});
