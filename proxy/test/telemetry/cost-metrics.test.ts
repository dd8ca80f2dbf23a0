import { afterEach, describe, expect, it } from 'vitest';
import { parsePrometheusText, type Sample } from '../../src/cost/counters-source.js';
import { SidecarCostMeter, type SidecarUsage } from '../../src/cost/live.js';
import { DEFAULT_PRICES } from '../../src/cost/prices.js';
import { Telemetry } from '../../src/telemetry/index.js';
import type { SealingGroupStats } from '../../src/wal/sealing-policy.js';
import { fakeSources, silentLog } from './fixtures.js';

let current: Telemetry | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
});

const GIB = 2 ** 30;
/** One hour of a leader at ~10 MB/s: 36 GB replicated to two followers through the store. */
const usage: SidecarUsage = {
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
};

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    ?.value;
}

describe('cost-aware replication on /metrics', () => {
  it('exports the process CPU and uptime, the groups, what was not copied or not uploaded, and the live dollars', async () => {
    // Given a sidecar with a 50 ms group in the WAL (switched once each way) and a 25 ms one inline
    const fake = fakeSources();
    const groups: SealingGroupStats[] = [
      {
        budgetMs: 50,
        mode: 'wal',
        lingerMs: 30,
        bytesPerSec: 4e6,
        savedFraction: 0.7,
        switchesToWal: 2,
        switchesToInline: 1,
      },
      {
        budgetMs: 25,
        mode: 'inline',
        lingerMs: 5,
        bytesPerSec: 1e5,
        savedFraction: 0,
        switchesToWal: 0,
        switchesToInline: 0,
      },
    ];
    const cost = new SidecarCostMeter(DEFAULT_PRICES, { replicationFactor: 3, zones: 3 }).price(usage);
    fake.sources.wal!.sealing = () => groups;
    fake.sources.wal!.cost = () => cost;
    fake.produce.batchesNotCopiedInlineMode = 3;
    fake.produce.bytesNotCopiedInlineMode = 3_000;
    fake.writer.objectsAbandoned = 2;
    fake.writer.bytesAbandoned = 20_000;
    current = new Telemetry({ sources: fake.sources, log: silentLog });
    current.start();

    // When /metrics is scraped
    const samples = parsePrometheusText(await current.prometheusText());

    // Then the process metrics are there, as OpenTelemetry names them
    expect(value(samples, 'process_cpu_time_total', { cpu_mode: 'user' })).toBeGreaterThan(0);
    expect(value(samples, 'process_cpu_time_total', { cpu_mode: 'system' })).toBeGreaterThanOrEqual(0);
    expect(value(samples, 'process_uptime')).toBeGreaterThan(0);
    // And the groups' switches and modes
    expect(value(samples, 'walproxy_wal_mode_switches_total', { to: 'wal', budget_ms: '50' })).toBe(2);
    expect(value(samples, 'walproxy_wal_mode_switches_total', { to: 'inline', budget_ms: '50' })).toBe(1);
    expect(value(samples, 'walproxy_wal_groups', { mode: 'wal' })).toBe(1);
    expect(value(samples, 'walproxy_wal_groups', { mode: 'inline' })).toBe(1);
    expect(value(samples, 'walproxy_wal_group_rate', { budget_ms: '25', mode: 'inline' })).toBe(1e5);
    expect(value(samples, 'walproxy_wal_group_saved_fraction', { budget_ms: '50' })).toBe(0.7);
    // And what was not copied or not uploaded
    expect(value(samples, 'walproxy_produce_not_copied_total', { reason: 'inline_mode' })).toBe(3);
    expect(value(samples, 'walproxy_produce_not_copied_bytes_total', { reason: 'inline_mode' })).toBe(3_000);
    expect(value(samples, 'walproxy_wal_objects_abandoned_total', { reason: 'below_break_even' })).toBe(2);
    expect(value(samples, 'walproxy_wal_bytes_abandoned_total', { reason: 'below_break_even' })).toBe(20_000);
    // And the dollars: each line of the pricing, stock, and the saving without the relaying CPU
    for (const line of [...cost.walproxy, ...cost.proxy]) {
      expect(value(samples, 'walproxy_cost_spent_total', { item: line.key! })).toBeCloseTo(line.usd, 9);
    }
    expect(value(samples, 'walproxy_cost_stock_total')).toBeCloseTo(cost.stockUsd, 9);
    expect(value(samples, 'walproxy_cost_saved')).toBeCloseTo(cost.savedUsd, 9);
  });
});
