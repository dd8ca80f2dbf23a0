import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreHealth } from '../../src/store/store-health.js';

const log = pino({ level: 'silent' });

describe('StoreHealth', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('starts degraded and turns healthy after the first successful probe', async () => {
    // Given a store whose probe succeeds
    const probe = vi.fn(async () => {});
    const health = new StoreHealth({ store: 's3://b', probe, log, now: () => Date.now() });
    expect(health.usable).toBe(false);
    // When it starts
    health.start();
    await vi.advanceTimersByTimeAsync(1);
    // Then one probe made it healthy
    expect(probe).toHaveBeenCalledTimes(1);
    expect(health.state).toBe('healthy');
    expect(health.stats.degradations).toBe(0);
    health.stop();
  });

  it('keeps probing every interval while the store fails, and stops once it answers', async () => {
    // Given a store that fails three probes
    let failures = 3;
    const probe = vi.fn(async () => {
      if (failures-- > 0) throw new Error('connect ECONNREFUSED');
    });
    const health = new StoreHealth({
      store: 's3://b',
      probe,
      log,
      probeIntervalMs: 1_000,
      now: () => Date.now(),
    });
    const states: string[] = [];
    health.onChange((s) => states.push(s));
    health.start();
    // When three intervals pass
    await vi.advanceTimersByTimeAsync(2_500);
    expect(health.usable).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    // Then the fourth probe succeeded and no more run
    expect(health.usable).toBe(true);
    expect(probe).toHaveBeenCalledTimes(4);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probe).toHaveBeenCalledTimes(4);
    expect(health.stats.probeFailures).toBe(3);
    expect(states).toEqual(['healthy']);
    health.stop();
  });

  it('counts a probe that never answers as failed, after the probe timeout', async () => {
    // Given a frozen store: the probe never settles
    const probe = vi.fn(() => new Promise<void>(() => {}));
    const health = new StoreHealth({
      store: 's3://b',
      probe,
      log,
      probeIntervalMs: 500,
      probeTimeoutMs: 2_000,
      now: () => Date.now(),
    });
    health.start();
    // When 2 s pass, then an interval
    await vi.advanceTimersByTimeAsync(2_001);
    expect(health.stats.probeFailures).toBe(1);
    await vi.advanceTimersByTimeAsync(500);
    // Then a second probe started
    expect(probe).toHaveBeenCalledTimes(2);
    expect(health.usable).toBe(false);
    health.stop();
  });

  it('goes degraded on markDegraded, counts it, and recovers through a probe', async () => {
    // Given a healthy store
    let ok = true;
    const probe = vi.fn(async () => {
      if (!ok) throw new Error('503 SlowDown');
    });
    const health = new StoreHealth({
      store: 's3://b',
      probe,
      log,
      probeIntervalMs: 1_000,
      now: () => Date.now(),
    });
    health.start();
    await vi.advanceTimersByTimeAsync(1);
    expect(health.usable).toBe(true);
    // When an upload fails for good and the store stays down for 3 s
    ok = false;
    health.markDegraded('upload failed');
    health.markDegraded('upload failed again');
    expect(health.usable).toBe(false);
    await vi.advanceTimersByTimeAsync(3_000);
    expect(health.usable).toBe(false);
    ok = true;
    await vi.advanceTimersByTimeAsync(1_000);
    // Then it is healthy again, one degradation counted, ~4 s spent degraded
    expect(health.usable).toBe(true);
    expect(health.stats.degradations).toBe(1);
    expect(health.stats.degradedMsTotal).toBeGreaterThanOrEqual(4_000);
    health.stop();
  });
});
