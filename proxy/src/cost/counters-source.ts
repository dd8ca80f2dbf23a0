// A run's counters from the sidecars' /metrics (Prometheus text, one scrape per sidecar, summed)
// or from a JSON file of MeasuredCounters, for `walproxy cost --from-metrics` (docs/cost.md).
import { relayCpuSeconds } from './economics.js';
import type { MeasuredCounters } from './measured.js';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Sample lines of Prometheus text format 0.0.4; comments, blank lines and timestamps are skipped. */
export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const l of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/**
 * Where each counter comes from. The CPU and uptime metrics are OpenTelemetry's process metrics
 * (`process.cpu.time` with `cpu.mode`, `process.uptime`), named as the sidecar's exporter names
 * them; a scrape without them leaves the CPU unmeasured and the duration to `--duration`.
 */
export const METRIC_NAMES = {
  puts: 'walproxy_wal_upload_attempts_total',
  bytesUploaded: 'walproxy_wal_bytes_uploaded_total',
  gets: 'walproxy_wal_reader_gets_total',
  bytesRead: 'walproxy_wal_reader_bytes_total',
  replicationBytes: 'walproxy_replication_bytes_total',
  listenerBytes: 'walproxy_listener_bytes_total',
  cpuSeconds: 'process_cpu_time_total',
  uptimeSeconds: 'process_uptime',
} as const;

/**
 * Sums the scrapes of every sidecar. The duration is `durationSec` when given, else the longest
 * uptime among the scrapes; counters count from each sidecar's start. The relaying share of the
 * CPU is the bytes the listeners received at the pass-through benchmark's rates.
 */
export function countersFromScrapes(
  scrapes: Array<{ origin: string; text: string }>,
  durationSec: number | undefined,
): { counters: MeasuredCounters } | { errors: string[] } {
  const errors: string[] = [];
  let cpu = 0;
  let relay = 0;
  let cpuSidecars = 0;
  let uptime: number | undefined;
  const counters: MeasuredCounters = {
    durationSec: 0,
    referencedBytes: 0,
    inlineBytes: 0,
    puts: 0,
    bytesUploaded: 0,
    gets: 0,
    bytesRead: 0,
    sidecarCpuSeconds: undefined,
  };
  for (const { origin, text } of scrapes) {
    const samples = parsePrometheusText(text);
    if (!samples.some((s) => s.name.startsWith('walproxy_'))) {
      errors.push(`${origin}: no walproxy_ metrics (is this a sidecar's /metrics?)`);
      continue;
    }
    const total = (name: string, where: (labels: Record<string, string>) => boolean = () => true) =>
      samples.filter((s) => s.name === name && where(s.labels)).reduce((n, s) => n + s.value, 0);
    const leader = (path: string) => (l: Record<string, string>) => l.side === 'leader' && l.path === path;
    counters.puts += total(METRIC_NAMES.puts);
    counters.bytesUploaded += total(METRIC_NAMES.bytesUploaded);
    counters.gets += total(METRIC_NAMES.gets);
    counters.bytesRead += total(METRIC_NAMES.bytesRead);
    counters.referencedBytes += total(METRIC_NAMES.replicationBytes, leader('referenced'));
    counters.inlineBytes += total(METRIC_NAMES.replicationBytes, leader('inline'));
    if (samples.some((s) => s.name === METRIC_NAMES.cpuSeconds)) {
      cpu += total(METRIC_NAMES.cpuSeconds);
      cpuSidecars++;
    }
    relay += relayCpuSeconds(
      total(METRIC_NAMES.listenerBytes, (l) => l.direction === 'from_downstream'),
      total(METRIC_NAMES.listenerBytes, (l) => l.direction === 'from_upstream'),
    );
    const up = samples.find((s) => s.name === METRIC_NAMES.uptimeSeconds)?.value;
    if (up !== undefined) uptime = Math.max(uptime ?? 0, up);
  }
  // CPU counts only if every sidecar reported it: a partial sum would understate it.
  counters.sidecarCpuSeconds = cpuSidecars === scrapes.length ? cpu : undefined;
  if (counters.sidecarCpuSeconds !== undefined) counters.proxyCpuSeconds = relay;
  const duration = durationSec ?? uptime;
  if (duration === undefined || duration <= 0) {
    errors.push(
      `no ${METRIC_NAMES.uptimeSeconds} in the scrapes: give --duration (how long the counters counted)`,
    );
  } else {
    counters.durationSec = duration;
  }
  return errors.length > 0 ? { errors } : { counters };
}

const REQUIRED_KEYS = [
  'durationSec',
  'referencedBytes',
  'inlineBytes',
  'puts',
  'bytesUploaded',
  'gets',
  'bytesRead',
] as const;
const OPTIONAL_KEYS = [
  'sidecarCpuSeconds',
  'proxyCpuSeconds',
  'crossZoneBytes',
  'stockCrossZoneBytes',
] as const;

/** A JSON object of MeasuredCounters; unknown keys and missing or negative numbers are refused. */
export function countersFromJson(
  json: unknown,
  origin: string,
): { counters: MeasuredCounters } | { errors: string[] } {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return { errors: [`${origin}: expected a JSON object of counters`] };
  }
  const errors: string[] = [];
  const record = json as Record<string, unknown>;
  const known: readonly string[] = [...REQUIRED_KEYS, ...OPTIONAL_KEYS];
  for (const key of Object.keys(record)) {
    if (!known.includes(key)) errors.push(`${origin}: unknown counter "${key}" (known: ${known.join(', ')})`);
  }
  const number = (key: string, required: boolean): number | undefined => {
    const v = record[key];
    if (v === undefined && !required) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
      errors.push(`${origin}: "${key}" must be a number >= 0, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return v;
  };
  const counters = {} as Record<string, number | undefined>;
  for (const key of REQUIRED_KEYS) counters[key] = number(key, true);
  for (const key of OPTIONAL_KEYS) counters[key] = number(key, false);
  if (counters.durationSec === 0) errors.push(`${origin}: "durationSec" must be more than 0`);
  return errors.length > 0 ? { errors } : { counters: counters as unknown as MeasuredCounters };
}
