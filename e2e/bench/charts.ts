// SVG charts of the benchmark results, for docs/benchmarks.md: `make bench-charts` (and the end of
// `make bench`) renders one chart per result file that exists under .runs/bench/ into
// docs/charts/. Apache ECharts renders them in Node with its server-side SVG renderer: no
// browser, no canvas, no DOM.
//   npx tsx e2e/bench/charts.ts [--results <dir>] [--out <dir>]
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as echarts from 'echarts';
import { repoRoot } from '../src/cluster/paths.js';
import type { RunStamp } from './run-stamp.js';

/** One arm's figures in `.runs/bench/replication.json`; null where the arm has none (stock: no sidecar). */
interface ReplicationArm {
  mbps?: number | null;
  p50_ms_1mbps?: number | null;
  p99_ms_1mbps?: number | null;
  p50_ms_5mbps?: number | null;
  p99_ms_5mbps?: number | null;
  sidecar_cpu_s_per_gb?: number | null;
  peak_rss_mb?: number | null;
  cross_zone_ratio?: number | null;
}

/**
 * `.runs/bench/replication.json` (issue #13): `arms` holds the arms issue #13 names, `other_arms`
 * the floor (`bare-pipe`) and any baseline arms; the charts draw both.
 */
export interface ReplicationResults {
  run?: RunStamp;
  arms: Record<string, ReplicationArm>;
  other_arms?: Record<string, ReplicationArm>;
}

/** `.runs/bench/pass-through.json` (issue #13). */
export interface PassThroughResults {
  run?: RunStamp;
  arms: Record<string, { produce_cpu_s_per_gib?: number; consume_cpu_s_per_gib?: number }>;
}

/** `.runs/bench/cost.json` (issue #14): one entry per rate per broker. */
export interface CostResults {
  run?: RunStamp;
  rates: Array<{
    mbps_per_broker: number;
    object_bytes_p50?: number;
    saved_fraction: number;
    p99_added_ms?: number;
    budget_ms?: number;
  }>;
}

/** `.runs/bench/soak.json` (issues #12, #24): the fields the chart reads. */
export interface SoakChartResults {
  /** When the run started (results recorded before `run` existed have only this). */
  date: string;
  run?: RunStamp;
  settings: { steady_from_s: number; batches_per_s_per_broker_target?: number };
  sidecars: Array<{
    broker_id: number;
    peak_rss_mb: number;
    flatness: { slope_mb_per_min: number } | null;
    series: Array<{ t_s: number; rss_mb: number }>;
  }>;
}

export interface BenchResults {
  replication?: ReplicationResults;
  passThrough?: PassThroughResults;
  cost?: CostResults;
  soak?: SoakChartResults;
}

/** The soak's goal for a sidecar's peak RSS at the 512Mi defaults (issue #24). */
const SOAK_PEAK_GOAL_MB = 256;

/** "run 2026-12-04 22:56 UTC at 2661fdc": which run a chart shows, from its result file. */
export function runLine(run: RunStamp | undefined, date?: string): string {
  const started = run?.started ?? date;
  if (started === undefined) return 'run: date and commit not recorded';
  const when = `${started.slice(0, 10)} ${started.slice(11, 16)} UTC`;
  return `run ${when} at ${run?.commit ?? 'a commit not recorded'}`;
}

const WIDTH = 720;
const HEIGHT = 400;
const FONT = { fontFamily: 'sans-serif', fontSize: 13 };

function svg(option: echarts.EChartsCoreOption): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: WIDTH, height: HEIGHT });
  try {
    chart.setOption({ animation: false, textStyle: FONT, backgroundColor: '#fff', ...option });
    return `${chart.renderToSVGString()}\n`;
  } finally {
    chart.dispose();
  }
}

/** One colour per arm, so an arm's p50 and p99 lines match. */
const PALETTE = ['#5470c6', '#91cc75', '#ee6666', '#73c0de', '#fac858', '#9a60b4'];
const xName = (name: string) => ({ name, nameLocation: 'middle', nameGap: 28 });
const title = (text: string, subtext: string, run: string) => ({
  text,
  subtext: `${subtext}\n${run}`,
  left: 'center',
  textStyle: { fontSize: 15 },
});

/** Every arm of a replication run, the issue's arms first, then the floor and baselines. */
const replicationArms = (r: ReplicationResults): Array<[string, ReplicationArm]> => [
  ...Object.entries(r.arms),
  ...Object.entries(r.other_arms ?? {}),
];

/** A bar label with `digits` decimals: CPU figures drift more than that between rounds. */
const fixedLabel = (digits: number) => ({
  show: true,
  position: 'top',
  formatter: (p: { value: number }) => p.value.toFixed(digits),
});

/** p50 and p99 produce latency at 1 and 5 MB/s, one line per arm and percentile. */
function latencyVsRate(r: ReplicationResults): string {
  const series = replicationArms(r).flatMap(([arm, a], i) =>
    (['p50', 'p99'] as const).map((p) => ({
      // Both lines of an arm under its name: one legend entry per arm, p50 dashed and p99 solid
      name: arm,
      type: 'line',
      symbolSize: 7,
      color: PALETTE[i % PALETTE.length],
      lineStyle: { type: p === 'p50' ? 'dashed' : 'solid' },
      data: [
        [1, a[`${p}_ms_1mbps`]],
        [5, a[`${p}_ms_5mbps`]],
      ].filter(([, v]) => v !== undefined && v !== null),
    })),
  );
  return svg({
    title: title(
      'Produce latency vs rate, per arm',
      'acks=all, three zones (replication benchmark); p50 dashed, p99 solid',
      runLine(r.run),
    ),
    legend: { bottom: 0 },
    grid: { top: 85, bottom: 75, left: 60, right: 30 },
    xAxis: { type: 'value', ...xName('MB/s'), min: 0, max: 6 },
    yAxis: { type: 'value', name: 'ms' },
    series,
  });
}

/** Sidecar CPU per GB replicated, per arm. */
function cpuPerGb(r: ReplicationResults): string {
  const arms = replicationArms(r).filter(
    ([, a]) => a.sidecar_cpu_s_per_gb !== undefined && a.sidecar_cpu_s_per_gb !== null,
  );
  return svg({
    title: title('Sidecar CPU per GB produced, per arm', 'replication benchmark', runLine(r.run)),
    grid: { top: 85, bottom: 40, left: 60, right: 30 },
    xAxis: { type: 'category', data: arms.map(([arm]) => arm) },
    yAxis: { type: 'value', name: 'CPU s / GB' },
    series: [
      {
        type: 'bar',
        data: arms.map(([, a]) => a.sidecar_cpu_s_per_gb),
        label: fixedLabel(1),
      },
    ],
  });
}

/** Produce and consume CPU per GiB, bare pipe vs walproxy. */
function passThroughCpu(r: PassThroughResults): string {
  const arms = Object.keys(r.arms);
  return svg({
    title: title('Pass-through CPU per GiB', 'a bare TCP pipe vs walproxy, same traffic', runLine(r.run)),
    legend: { bottom: 0 },
    grid: { top: 85, bottom: 60, left: 60, right: 30 },
    xAxis: { type: 'category', data: ['produce', 'consume'] },
    yAxis: { type: 'value', name: 'CPU s / GiB' },
    series: arms.map((arm) => ({
      name: arm,
      type: 'bar',
      label: fixedLabel(2),
      data: [r.arms[arm]!.produce_cpu_s_per_gib, r.arms[arm]!.consume_cpu_s_per_gib],
    })),
  });
}

/**
 * Saved share of stock replication cost vs rate per broker, one line per latency budget, with the
 * added p99 latency on the right axis.
 */
function savedVsRate(r: CostResults): string {
  const rates = [...r.rates].sort((a, b) => a.mbps_per_broker - b.mbps_per_broker);
  const budgets = [...new Set(rates.map((x) => x.budget_ms))].sort((a, b) => (a ?? 0) - (b ?? 0));
  const label = (budget: number | undefined) => (budget === undefined ? '' : ` (${budget} ms)`);
  return svg({
    title: title(
      'Saved vs rate per broker',
      'share of stock replication cost saved (solid); added p99 latency (dashed); per latency budget',
      runLine(r.run),
    ),
    legend: { bottom: 0, left: 'center', width: 600, itemGap: 24 },
    grid: { top: 85, bottom: 100, left: 60, right: 60 },
    xAxis: { type: 'log', ...xName('MB/s per broker'), logBase: 10 },
    yAxis: [
      { type: 'value', name: 'saved %', max: 100 },
      { type: 'value', name: 'added p99 ms', position: 'right', splitLine: { show: false } },
    ],
    series: budgets.flatMap((budget, i) => {
      const mine = rates.filter((x) => x.budget_ms === budget);
      const withLatency = mine.filter((x) => x.p99_added_ms !== undefined);
      const color = PALETTE[i % PALETTE.length];
      return [
        {
          name: `saved %${label(budget)}`,
          type: 'line',
          symbolSize: 7,
          color,
          data: mine.map((x) => [x.mbps_per_broker, Math.round(1000 * x.saved_fraction) / 10]),
          ...(i === 0
            ? {
                markLine: {
                  silent: true,
                  symbol: 'none',
                  data: [{ yAxis: 0 }],
                  lineStyle: { color: '#c00' },
                },
              }
            : {}),
        },
        ...(withLatency.length > 0
          ? [
              {
                name: `added p99 ms${label(budget)}`,
                type: 'line',
                yAxisIndex: 1,
                symbolSize: 7,
                color,
                lineStyle: { type: 'dashed' },
                data: withLatency.map((x) => [x.mbps_per_broker, x.p99_added_ms]),
              },
            ]
          : []),
      ];
    }),
  });
}

/** Each sidecar's RSS over the soak, against the peak goal, from the steady window's start on marked. */
function soakRss(r: SoakChartResults): string {
  const steadyMin = r.settings.steady_from_s / 60;
  const rate = r.settings.batches_per_s_per_broker_target;
  return svg({
    title: title(
      'Sidecar RSS over the memory soak',
      `3 sidecars at the 512Mi defaults${rate ? `, ${rate} batches/s per broker asked` : ''}; slope from minute ${Math.round(steadyMin)}`,
      runLine(r.run, r.date),
    ),
    legend: { bottom: 0 },
    grid: { top: 85, bottom: 75, left: 60, right: 30 },
    xAxis: { type: 'value', ...xName('minutes'), min: 0 },
    yAxis: {
      type: 'value',
      name: 'RSS MB',
      min: 0,
      max: Math.max(SOAK_PEAK_GOAL_MB + 24, ...r.sidecars.map((c) => c.peak_rss_mb)),
    },
    series: r.sidecars.map((c, i) => ({
      name: `sidecar ${c.broker_id}: ${c.flatness ? `${c.flatness.slope_mb_per_min} MB/min` : 'no slope'}, peak ${c.peak_rss_mb} MB`,
      type: 'line',
      showSymbol: false,
      color: PALETTE[i % PALETTE.length],
      data: c.series.map((p) => [Math.round((p.t_s / 60) * 100) / 100, p.rss_mb]),
      ...(i === 0
        ? {
            markLine: {
              silent: true,
              symbol: 'none',
              lineStyle: { color: '#c00' },
              data: [
                { yAxis: SOAK_PEAK_GOAL_MB, label: { formatter: `peak goal ${SOAK_PEAK_GOAL_MB} MB` } },
                {
                  xAxis: steadyMin,
                  label: { formatter: 'slope window' },
                  lineStyle: { type: 'dotted', color: '#888' },
                },
              ],
            },
          }
        : {}),
    })),
  });
}

/** File name → SVG, for each chart whose results are present. */
export function renderCharts(results: BenchResults): Map<string, string> {
  const charts = new Map<string, string>();
  if (results.replication) {
    charts.set('replication-latency-vs-rate.svg', latencyVsRate(results.replication));
    charts.set('replication-cpu-per-gb.svg', cpuPerGb(results.replication));
  }
  if (results.passThrough) charts.set('pass-through-cpu-per-gib.svg', passThroughCpu(results.passThrough));
  if (results.cost) charts.set('cost-saved-vs-rate.svg', savedVsRate(results.cost));
  if (results.soak) charts.set('soak-rss.svg', soakRss(results.soak));
  return charts;
}

/** The result files under `dir` that exist (zone-local.json, issue #15, has no chart yet). */
export function loadResults(dir: string): BenchResults {
  const read = <T>(name: string): T | undefined => {
    const file = path.join(dir, name);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : undefined;
  };
  const results: BenchResults = {};
  const replication = read<ReplicationResults>('replication.json');
  const passThrough = read<PassThroughResults>('pass-through.json');
  const cost = read<CostResults>('cost.json');
  const soak = read<SoakChartResults>('soak.json');
  if (replication) results.replication = replication;
  if (passThrough) results.passThrough = passThrough;
  if (cost) results.cost = cost;
  if (soak) results.soak = soak;
  return results;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (flag: string, fallback: string) => {
    const i = process.argv.indexOf(flag);
    return i >= 0 && process.argv[i + 1] ? path.resolve(process.argv[i + 1]!) : fallback;
  };
  const resultsDir = arg('--results', path.join(repoRoot(), '.runs/bench'));
  const outDir = arg('--out', path.join(repoRoot(), 'docs/charts'));
  const charts = renderCharts(loadResults(resultsDir));
  if (charts.size === 0) {
    console.log(
      `bench-charts: no results under ${resultsDir} (replication.json, pass-through.json, cost.json, soak.json)`,
    );
  } else {
    mkdirSync(outDir, { recursive: true });
    for (const [name, content] of charts) {
      writeFileSync(path.join(outDir, name), content);
      console.log(`bench-charts: ${path.relative(process.cwd(), path.join(outDir, name))}`);
    }
  }
}
