import { afterEach, describe, expect, it } from 'vitest';
import { type ControlledCluster, HarnessControl, serveHarnessControl } from './harness-control.js';

/** A cluster whose sidecar 1 is gone until started (its start takes 50 ms), and sidecar 2 runs. */
function fakeCluster() {
  let nextPid = 1000;
  const sidecars = new Map([
    [1, { pid: 11, running: false }],
    [2, { pid: 12, running: true }],
  ]);
  let starts = 0;
  const cluster: ControlledCluster = {
    sidecars,
    brokers: new Map([[1, { pid: 21 }]]),
    async startSidecar(id) {
      starts++;
      await new Promise((r) => setTimeout(r, 50));
      sidecars.set(id, { pid: nextPid++, running: true });
    },
  };
  return { cluster, starts: () => starts };
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

describe('the harness control port', () => {
  it('names the processes, and starts a killed sidecar once however often it is asked', async () => {
    const fake = fakeCluster();
    const served = await serveHarnessControl(fake.cluster);
    close = served.close;
    const control = new HarnessControl(served.url);
    expect(await control.pids()).toEqual({ sidecars: { 1: 11, 2: 12 }, brokers: { 1: 21 } });
    // Two requests while the start is under way get the one new process
    const [a, b] = await Promise.all([control.startSidecar(1), control.startSidecar(1)]);
    expect([a, b]).toEqual([1000, 1000]);
    expect(fake.starts()).toBe(1);
    // A running sidecar is left alone
    expect(await control.startSidecar(2)).toBe(12);
    expect(fake.starts()).toBe(1);
    await expect(control.startSidecar(3)).rejects.toThrow(/no sidecar 3/);
  });
});
