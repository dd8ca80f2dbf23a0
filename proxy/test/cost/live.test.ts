import { describe, expect, it } from 'vitest';
import { SidecarCostMeter, type SidecarUsage } from '../../src/cost/live.js';
import type { MeasuredCost } from '../../src/cost/measured.js';
import { DEFAULT_PRICES } from '../../src/cost/prices.js';

const GIB = 2 ** 30;
const LAYOUT = { replicationFactor: 3, zones: 3 };
const IDLE: SidecarUsage = {
  bytesReferenced: 0,
  inlineBytes: 0,
  uploadAttempts: 0,
  bytesUploaded: 0,
  gets: 0,
  bytesFetched: 0,
  bytesFromDownstream: 0,
  bytesFromUpstream: 0,
  cpuSeconds: 0,
  uptimeSeconds: 0,
};
const lines = (c: MeasuredCost) => [...c.walproxy, ...c.proxy];
const usd = (c: MeasuredCost, key: string) => lines(c).find((l) => l.key === key)!.usd;

describe('a sidecar’s running cost (the walproxy.cost.* counters)', () => {
  it('never lowers a line when the modelled relaying cost outgrows the CPU spent (a dip reads as a counter reset)', () => {
    // Given a sidecar that spent 10 CPU-s uploading WAL objects, then relayed 10 GiB in 1 CPU-s
    // (less than the pass-through rate models) while still uploading
    const meter = new SidecarCostMeter(DEFAULT_PRICES, LAYOUT);
    const first = meter.price({
      ...IDLE,
      uploadAttempts: 10,
      bytesUploaded: 1e6,
      cpuSeconds: 10,
      uptimeSeconds: 60,
    });
    const cpuWal = usd(first, 'cpu_wal');
    const spent = lines(first).map((l) => l.usd);
    const second = meter.price({
      ...IDLE,
      uploadAttempts: 20,
      bytesUploaded: 2e6,
      bytesFromDownstream: 10 * GIB,
      cpuSeconds: 11,
      uptimeSeconds: 75,
    });
    // Then no line went down (before: cpu_wal fell from 10 to 0.7 CPU-s' worth), and the CPU lines
    // still add up to the CPU spent
    expect(usd(second, 'cpu_wal')).toBeGreaterThanOrEqual(cpuWal);
    for (const [i, l] of lines(second).entries()) expect(l.usd, l.key).toBeGreaterThanOrEqual(spent[i]!);
    expect(usd(second, 'cpu_wal') + usd(second, 'cpu_proxy')).toBeCloseTo(
      (11 / 3600) * DEFAULT_PRICES.vcpuHourUsd,
      15,
    );
  });

  it('charges an idle sidecar’s CPU to relaying, not to the WAL: nothing saved, never a negative saving', () => {
    // Given a sidecar that moved no byte for an hour and spent 5 CPU-s on timers and scrapes
    const meter = new SidecarCostMeter(DEFAULT_PRICES, LAYOUT);
    meter.price({ ...IDLE, cpuSeconds: 1, uptimeSeconds: 60 });
    const cost = meter.price({ ...IDLE, cpuSeconds: 5, uptimeSeconds: 3_600 });
    // Then the WAL spent nothing and saved nothing; the CPU is on the relaying line
    expect(usd(cost, 'cpu_wal')).toBe(0);
    expect(cost.walproxyUsd).toBe(0);
    expect(cost.savedUsd).toBe(0);
    expect(usd(cost, 'cpu_proxy')).toBeCloseTo((5 / 3600) * DEFAULT_PRICES.vcpuHourUsd, 15);
  });

  it('saves nothing, and loses nothing, where every replicated byte went inline (a mode=auto group below break-even)', () => {
    // Given a leader whose followers got 1 GB inline, with more CPU than the relaying model says
    const meter = new SidecarCostMeter(DEFAULT_PRICES, LAYOUT);
    const cost = meter.price({
      ...IDLE,
      inlineBytes: 1e9,
      bytesFromDownstream: 0.5e9,
      bytesFromUpstream: 1e9,
      cpuSeconds: 30,
      uptimeSeconds: 600,
    });
    // Then stock and walproxy cost the same cross-zone bytes: saved exactly 0
    expect(cost.stockUsd).toBeGreaterThan(0);
    expect(cost.savedUsd).toBeCloseTo(0, 15);
    expect(usd(cost, 'cpu_wal')).toBe(0);
  });

  it('charges the CPU beyond relaying to the WAL path in intervals where the WAL worked', () => {
    // Given a leader that sent 72 GB to two followers through the store in an hour on 3,600 CPU-s
    const meter = new SidecarCostMeter(DEFAULT_PRICES, LAYOUT);
    const cost = meter.price({
      bytesReferenced: 72e9,
      inlineBytes: 0,
      uploadAttempts: 100_000,
      bytesUploaded: 36e9,
      gets: 200_000,
      bytesFetched: 72e9,
      bytesFromDownstream: 36 * GIB,
      bytesFromUpstream: 10 * GIB,
      cpuSeconds: 3_600,
      uptimeSeconds: 3_600,
    });
    // Then relaying is 36 GiB × 1.03 + 10 GiB × 0.86 = 45.68 CPU-s, the WAL path the rest
    const quantity = (key: string) => lines(cost).find((l) => l.key === key)!.quantity;
    expect(quantity('cpu_proxy')).toBeCloseTo(45.68 / 3600, 12);
    expect(quantity('cpu_wal')).toBeCloseTo(3_554.32 / 3600, 12);
    expect(cost.stockUsd).toBeCloseTo(1.44, 12);
    expect(cost.savedUsd).toBeGreaterThan(0);
  });
});
