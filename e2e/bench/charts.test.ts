import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadResults, renderCharts, runLine, type SoakChartResults } from './charts.js';
import type { RunStamp } from './run-stamp.js';

// Recorded results of real runs (each fixture's `source` names the run and where its figures are
// in docs/benchmarks.md), not figures made up to look good.
const fixtures = fileURLToPath(new URL('./fixtures', import.meta.url));

/** The text nodes of an SVG document. */
const texts = (svg: string) => [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);

describe('benchmark charts', () => {
  it('renders one SVG per chart of the result files that exist', () => {
    // Given the replication, pass-through, cost and soak results of recorded runs
    const charts = renderCharts(loadResults(fixtures));

    // Then there are the five charts, each a standalone SVG document of the chart's size
    expect([...charts.keys()].sort()).toEqual([
      'cost-saved-vs-rate.svg',
      'pass-through-cpu-per-gib.svg',
      'replication-cpu-per-gb.svg',
      'replication-latency-vs-rate.svg',
      'soak-rss.svg',
    ]);
    for (const svg of charts.values()) {
      expect(svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"[^>]*viewBox="0 0 720 400"/);
      expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    }
    // And each names what it plots: arms in the legend or on the axis, the axis units, the values
    // (the replication run writes the floor, bare-pipe, under `other_arms`: charted with the rest)
    const latency = texts(charts.get('replication-latency-vs-rate.svg')!);
    for (const name of ['stock', 'inline', 'wal', 'wal-moto', 'bare-pipe', 'MB/s', 'ms'])
      expect(latency).toContain(name);
    expect(latency.some((t) => t.includes('p50 dashed, p99 solid'))).toBe(true);
    const cpu = texts(charts.get('replication-cpu-per-gb.svg')!);
    for (const name of ['inline', 'wal', 'wal-moto', 'bare-pipe', '122.3', '15.6', 'CPU s / GB'])
      expect(cpu).toContain(name);
    // (stock has no sidecar, so no bar)
    expect(cpu).not.toContain('stock');
    const passThrough = texts(charts.get('pass-through-cpu-per-gib.svg')!);
    for (const name of ['bare-pipe', 'walproxy', 'produce', 'consume', '1.69', '0.91'])
      expect(passThrough).toContain(name);
    // And the cost chart draws a line per latency budget, saved and added p99 apart
    const cost = texts(charts.get('cost-saved-vs-rate.svg')!);
    for (const name of ['saved % (25 ms)', 'saved % (50 ms)', 'added p99 ms (25 ms)', 'MB/s per broker'])
      expect(cost).toContain(name);
  });

  it('says in every chart which run it shows: its date and commit', () => {
    const charts = renderCharts(loadResults(fixtures));
    const runOf = (file: string) =>
      runLine((JSON.parse(readFileSync(path.join(fixtures, file), 'utf8')) as { run: RunStamp }).run);
    expect(texts(charts.get('replication-latency-vs-rate.svg')!)).toContain(runOf('replication.json'));
    expect(texts(charts.get('replication-cpu-per-gb.svg')!)).toContain(runOf('replication.json'));
    expect(texts(charts.get('pass-through-cpu-per-gib.svg')!)).toContain(runOf('pass-through.json'));
    expect(texts(charts.get('cost-saved-vs-rate.svg')!)).toContain(runOf('cost.json'));
    expect(texts(charts.get('soak-rss.svg')!)).toContain(runOf('soak.json'));
    expect(runOf('replication.json')).toBe('run 2026-12-05 04:35 UTC at 9154050');
  });

  it('plots each sidecar of the soak with its slope and peak, against the peak goal', () => {
    // Given the recorded soak
    const soak = JSON.parse(readFileSync(path.join(fixtures, 'soak.json'), 'utf8')) as SoakChartResults;
    const chart = texts(renderCharts({ soak }).get('soak-rss.svg')!);
    // Then the legend has every sidecar with the slope and peak the soak computed, and the goal is drawn
    for (const c of soak.sidecars)
      expect(chart).toContain(
        `sidecar ${c.broker_id}: ${c.flatness!.slope_mb_per_min} MB/min, peak ${c.peak_rss_mb} MB`,
      );
    expect(chart).toContain('peak goal 256 MB');
    expect(chart).toContain('RSS MB');
    expect(chart).toContain('minutes');
  });

  it('names a run by its date and commit, and says when either was not recorded', () => {
    expect(runLine({ started: '2026-12-04T22:56:46.120Z', commit: '2661fdc' })).toBe(
      'run 2026-12-04 22:56 UTC at 2661fdc',
    );
    expect(runLine(undefined, '2026-12-04T17:16:00.000Z')).toBe(
      'run 2026-12-04 17:16 UTC at a commit not recorded',
    );
    expect(runLine(undefined)).toBe('run: date and commit not recorded');
  });

  it('renders nothing for results that are not there', () => {
    const empty = mkdtempSync(path.join(tmpdir(), 'walproxy-bench-'));
    try {
      expect(renderCharts(loadResults(empty)).size).toBe(0);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
    expect([
      ...renderCharts({ cost: { rates: [{ mbps_per_broker: 1, saved_fraction: 0.5 }] } }).keys(),
    ]).toEqual(['cost-saved-vs-rate.svg']);
  });
});
