import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseCostFlags } from '../../src/cli/cost-command.js';
import { crossZoneFollowers } from '../../src/cost/economics.js';
import { computeCost } from '../../src/cost/model.js';
import { DEFAULT_PRICES, mergePrices } from '../../src/cost/prices.js';

describe('walproxy cost', () => {
  it('reproduces the hand-computed reference case (20 MB/s, RF 3 over 3 zones, 400 KB objects)', () => {
    const parsed = parseCostFlags({
      'throughput-mbps': '20',
      // Every batch through the WAL at a 50 ms linger, as priced by hand below (the default,
      // --mode=auto, would seal by the sidecar's latency budget instead).
      mode: 'wal',
      rf: '3',
      zones: '3',
      'linger-ms': '50', // 400 KB fills in 20 ms at 20 MB/s, so objects are full: 50 PUT/s
      'object-bytes': '400KB',
      brokers: '1',
      retention: '10m',
      residual: '0',
      // The CPU figures of the replication benchmark of 2026-11-30 (the defaults then).
      'proxy-cpu-seconds-per-gb': '35.6',
      'wal-cpu-seconds-per-gb': '137.1',
    });
    if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
    const cost = computeCost(parsed.parsed.inputs, DEFAULT_PRICES);
    const usd = Object.fromEntries([...cost.walproxy, ...cost.proxy].map((l) => [l.item, l.usd]));

    // A 30-day month is 2,592,000 s; 20 MB/s × 2,592,000 s = 51,840 GB produced.
    expect(cost.producedGbPerMonth).toBeCloseTo(51_840, 6);
    // Stock: 2 followers in other zones × 51,840 GB × $0.02 = $2,073.60
    expect(cost.stockUsd).toBeCloseTo(2_073.6, 6);
    // PUTs: 20,000,000 / 400,000 = 50/s × 2,592,000 = 129,600,000 × $0.00113/1,000 = $146.448
    expect(cost.objectsPerSecond).toBeCloseTo(50, 9);
    expect(usd['S3E1Z PUT requests']).toBeCloseTo(146.448, 6);
    // Upload: 51,840 GB × $0.0032 = $165.888
    expect(usd['S3E1Z upload']).toBeCloseTo(165.888, 6);
    // GETs: each of 2 followers reads each object once: 259,200,000 × $0.00003/1,000 = $7.776
    expect(usd['S3E1Z GET requests (followers)']).toBeCloseTo(7.776, 6);
    // Retrieval: 2 × 51,840 GB = 103,680 GB × $0.0006 = $62.208
    expect(usd['S3E1Z retrieval (followers)']).toBeCloseTo(62.208, 6);
    // Storage: 20 MB/s × 600 s = 12 GB held × $0.11/GB-month = $1.32
    expect(usd['S3E1Z storage (retention)']).toBeCloseTo(1.32, 6);
    // Sidecar CPU at $0.0408 per vCPU-hour: the WAL path 137.1 s/GB × 51,840 GB = 1,974.24 h →
    // $80.5490; relaying (any proxy, not in the saving) 35.6 s/GB → 512.64 h → $20.9157
    expect(usd['sidecar CPU, WAL path']).toBeCloseTo(80.548992, 6);
    expect(usd['sidecar CPU, relaying (any proxy in front of the broker)']).toBeCloseTo(20.915712, 6);
    // walproxy's replication 146.448 + 165.888 + 7.776 + 62.208 + 1.32 + 80.548992 = $464.188992
    expect(cost.walproxyUsd).toBeCloseTo(464.188992, 6);
    expect(cost.savedUsd).toBeCloseTo(2_073.6 - 464.188992, 6);
    // And with the relaying: $485.104704 in all
    expect(cost.totalUsd).toBeCloseTo(485.104704, 6);
    expect(cost.netSavedUsd).toBeCloseTo(2_073.6 - 485.104704, 6);

    // Break-even object size: request cost per object (0.00113 + 2 × 0.00003) / 1,000 = $1.19e-6,
    // divided by the saving per byte (0.04 − 0.0032 − 2 × 0.0006 − 0.11 × 600 / 2,592,000
    // − 137.1 × 0.0408 / 3,600) / 1e9 = 0.034020737… / 1e9 → 34,979 bytes
    const perByte = (0.04 - 0.0032 - 0.0012 - (0.11 * 600) / 2_592_000 - (137.1 * 0.0408) / 3600) / 1e9;
    expect(cost.breakEvenObjectBytes).toBeCloseTo(1.19e-6 / perByte, 3);
    expect(Math.round(cost.breakEvenObjectBytes!)).toBe(34_979);
    // Break-even throughput: the 50 ms linger seals at least 20 objects/s whatever the rate, a fixed
    // $1.19e-6 × 20 = $2.38e-5 per second; the rate whose per-byte saving pays that: ≈ 0.70 MB/s
    // (the relaying CPU is paid inline too, so it moves no break-even)
    expect(cost.breakEvenBytesPerSec).toBeCloseTo(2.38e-5 / perByte, 0);
  });

  it('counts followers in other zones with replicas spread round-robin', () => {
    expect(crossZoneFollowers(3, 3)).toBe(2);
    expect(crossZoneFollowers(3, 1)).toBe(0);
    expect(crossZoneFollowers(5, 3)).toBe(3);
    expect(crossZoneFollowers(2, 3)).toBe(1);
  });

  it('has no break-even when objects are smaller than the break-even size', () => {
    const cost = computeCost(
      {
        throughputBytesPerSec: 100e6,
        replicationFactor: 3,
        zones: 3,
        lingerMs: 1000,
        objectBytes: 10_000,
        brokers: 1,
        retentionSec: 600,
        residualFraction: 0,
      },
      DEFAULT_PRICES,
    );
    expect(cost.savedUsd).toBeLessThan(0);
    expect(cost.breakEvenBytesPerSec).toBeUndefined();
  });

  it('takes a price file that overrides some prices, and refuses unknown or negative ones', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'walproxy-prices-'));
    const good = path.join(dir, 'good.json');
    writeFileSync(good, JSON.stringify({ crossZonePerGb: 0.04, source: 'my contract' }));
    const parsed = parseCostFlags({ 'throughput-mbps': '1', prices: good });
    if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
    expect(parsed.parsed.prices).toEqual({ ...DEFAULT_PRICES, crossZonePerGb: 0.04, source: 'my contract' });

    expect(mergePrices({ putPer1k: 1, getPer1000: -1 }, 'p.json')).toEqual({
      errors: [
        'p.json: unknown price "putPer1k" (known: source, region, storeClass, crossZonePerGb, putPer1000, getPer1000, uploadPerGb, retrievalPerGb, storagePerGbMonth, freeBytesPerRequest, vcpuHourUsd)',
        'p.json: "getPer1000" must be a number >= 0, got -1',
      ],
    });
  });

  it('with a latency budget, prices what the sealing policy would do: the WAL above 1.5 × break-even, inline below', () => {
    const at = (mbps: string) => {
      // The flags as yargs hands them over, defaults included.
      const parsed = parseCostFlags({
        'throughput-mbps': mbps,
        brokers: '3',
        'latency-budget-ms': '50',
        'object-bytes': '1MB',
        rf: '3',
        zones: '3',
        'linger-ms': '10',
        retention: '1h',
        residual: '0.0114',
        'proxy-cpu-seconds-per-gb': '35.6',
        'wal-cpu-seconds-per-gb': '137.1',
      });
      if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
      return { ...parsed.parsed, cost: computeCost(parsed.parsed.inputs, parsed.parsed.prices) };
    };
    // 30 MB/s over 3 brokers, 50 ms: linger 50 − 15 − 3 − 2 = 30 ms, 10 MB/s × 30 ms = 300 KB objects.
    const busy = at('30');
    expect(busy.policy?.state).toMatchObject({ mode: 'wal', lingerMs: 30, objectBytes: 300_000 });
    expect(busy.cost.effectiveObjectBytes).toBeCloseTo(300_000, 6);
    // 0.3 MB/s: 3 KB objects would not pay; walproxy's replication is stock's, saving exactly 0,
    // and only the relaying CPU comes on top.
    const quiet = at('0.3');
    expect(quiet.policy?.state.mode).toBe('inline');
    expect(quiet.cost.objectsPerSecond).toBe(0);
    expect(quiet.cost.walproxyUsd).toBeCloseTo(quiet.cost.stockUsd, 9);
    expect(quiet.cost.savedUsd).toBeCloseTo(0, 9);
    expect(quiet.cost.netSavedUsd).toBeCloseTo(-quiet.cost.proxyUsd, 9);
  });

  it("prices a default sidecar by default: at the issue's 0.05 MB/s over 3 brokers, inline, saving 0, with the forced-WAL cost beside it", () => {
    // Given `walproxy cost --throughput-mbps 0.05 --brokers 3`: the flags as yargs hands them over,
    // defaults included (--linger-ms and --object-bytes among them)
    const parsed = parseCostFlags({
      'throughput-mbps': '0.05',
      brokers: '3',
      mode: 'auto',
      rf: '3',
      zones: '3',
      'linger-ms': '10',
      'object-bytes': '400000',
      retention: '1h',
      residual: '0.0114',
      'proxy-cpu-seconds-per-gb': '35.6',
      'wal-cpu-seconds-per-gb': '137.1',
    });
    if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
    const { inputs, prices, policy, forcedWal } = parsed.parsed;
    // Then it is the sealing policy at the sidecar's default budget: 500 B objects would not pay
    expect(policy).toMatchObject({ budgetMs: 50, defaultBudget: true, state: { mode: 'inline' } });
    const cost = computeCost(inputs, prices);
    // so walproxy's replication costs exactly what stock's does: saved 0, not the old -$921
    expect(cost.walproxyUsd).toBeCloseTo(cost.stockUsd, 9);
    expect(cost.savedUsd).toBeCloseTo(0, 9);
    expect(cost.objectsPerSecond).toBe(0);
    // And the figure beside it, every batch forced through the WAL at the same budget, costs more
    const forced = computeCost(forcedWal!, prices);
    expect(forced.objectsPerSecond).toBeGreaterThan(0);
    expect(forced.savedUsd).toBeLessThan(0);
  });

  it('with --mode=wal prices every batch through the WAL, at --linger-ms unless a budget is given', () => {
    const flags = { 'throughput-mbps': '0.05', brokers: '3', 'linger-ms': '10', 'object-bytes': '400000' };
    const forced = parseCostFlags({ ...flags, mode: 'wal' });
    if ('errors' in forced) throw new Error(forced.errors.join('\n'));
    expect(forced.parsed.policy).toBeUndefined();
    expect(forced.parsed.forcedWal).toBeUndefined();
    expect(forced.parsed.inputs).toMatchObject({ lingerMs: 10 });
    expect(forced.parsed.inputs.mode).not.toBe('inline');
    // 100 objects/s per broker at a 10 ms linger, whatever they cost
    expect(computeCost(forced.parsed.inputs, forced.parsed.prices).objectsPerSecond).toBeCloseTo(300, 9);
    const budgeted = parseCostFlags({ ...flags, mode: 'wal', 'latency-budget-ms': '50' });
    if ('errors' in budgeted) throw new Error(budgeted.errors.join('\n'));
    expect(budgeted.parsed.inputs).toMatchObject({ lingerMs: 30, mode: 'wal' });
    expect(budgeted.parsed.policy?.state.mode).toBe('inline');
    expect(parseCostFlags({ ...flags, mode: 'inline' })).toEqual({
      errors: ["--mode: 'inline' is not auto or wal (a mode=inline topic costs what stock does)"],
    });
  });

  it('reports every bad flag at once, by name', () => {
    expect(
      parseCostFlags({ rf: '0', zones: 'two', 'linger-ms': '-1', retention: '3', residual: '2' }),
    ).toEqual({
      errors: [
        '--throughput-mbps: is required (megabytes per second)',
        "--rf: '0' is not a whole number from 1 to 32",
        "--zones: 'two' is not a whole number from 1 to 32",
        "--linger-ms: '-1' is not a number from 0 to 60000",
        "--retention: '3' is not a duration (a number with a unit: ms, s, m, h, d; e.g. 90s, 2h, 1h30m)",
        "--residual: '2' is not a number from 0 to 1",
      ],
    });
  });
});
