import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadResults, renderCharts } from './charts.js';

// Fixture results in the formats issues #13 and #14 define (made-up figures, never committed as charts).
const fixtures = fileURLToPath(new URL('./fixtures', import.meta.url));

/** The text nodes of an SVG document. */
const texts = (svg: string) => [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);

describe('benchmark charts', () => {
  it('renders one SVG per chart of the result files that exist', () => {
    // Given the replication, pass-through and cost results
    const charts = renderCharts(loadResults(fixtures));

    // Then there are the four charts, each a standalone SVG document of the chart's size
    expect([...charts.keys()].sort()).toEqual([
      'cost-saved-vs-rate.svg',
      'pass-through-cpu-per-gib.svg',
      'replication-cpu-per-gb.svg',
      'replication-latency-vs-rate.svg',
    ]);
    for (const svg of charts.values()) {
      expect(svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"[^>]*viewBox="0 0 720 400"/);
      expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    }
    // And each names what it plots: arms in the legend or on the axis, the axis units, the values
    const latency = texts(charts.get('replication-latency-vs-rate.svg')!);
    for (const name of ['stock p99', 'wal p50', 'wal-moto p99', 'MB/s', 'ms'])
      expect(latency).toContain(name);
    const cpu = texts(charts.get('replication-cpu-per-gb.svg')!);
    for (const name of ['stock', 'inline', 'wal', 'wal-moto', '9.7', 'CPU s / GB'])
      expect(cpu).toContain(name);
    const passThrough = texts(charts.get('pass-through-cpu-per-gib.svg')!);
    for (const name of ['bare-pipe', 'walproxy', 'produce', 'consume', '2.4'])
      expect(passThrough).toContain(name);
    const cost = texts(charts.get('cost-saved-vs-rate.svg')!);
    for (const name of ['saved %', 'added p99 ms', 'MB/s per broker']) expect(cost).toContain(name);
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
