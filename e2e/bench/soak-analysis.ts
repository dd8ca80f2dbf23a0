// What the memory soak (soak.bench.ts) derives from its samples: rates, peaks, flatness, and
// the tables it prints. Pure, so it can be tested and rerun on a recorded soak.json.

import type { RunStamp } from './run-stamp.js';

/** The batch index drops entries older than this (its default maxAgeMs): it fills for 120 s. */
export const INDEX_MAX_AGE_S = 120;
/** A second window, once the index is at its age bound with a sample interval to spare. */
export const LATE_FROM_S = INDEX_MAX_AGE_S + 60;

export interface ProcSample {
  t_s: number;
  rss_mb: number;
  hwm_mb: number;
  /** Cumulative `wal.produce.batchesCopied` (this sidecar as leader). */
  batches_copied: number;
  /** Cumulative Produce requests through the client listener. */
  produce_requests: number;
  index_entries: number;
  index_mb: number;
  /** Batch bytes copied and not yet stored. */
  pending_mb: number;
}

export interface HeapSample {
  t_s: number;
  rss_mb: number;
  heap_used_mb: number;
  heap_total_mb: number;
  external_mb: number;
  array_buffers_mb: number;
}

export interface Flatness {
  from_s: number;
  samples: number;
  slope_mb_per_min: number;
  max_minus_min_mb: number;
}

export const round = (x: number, digits = 1) => Number(x.toFixed(digits));

/** Least-squares slope (MB per minute) and spread of `points` from `fromS` on. */
export function flatness(points: { t_s: number; mb: number }[], fromS: number): Flatness | undefined {
  const window = points.filter((p) => p.t_s >= fromS);
  if (window.length < 3) return undefined;
  const xs = window.map((p) => p.t_s / 60);
  const ys = window.map((p) => p.mb);
  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  const mx = mean(xs);
  const my = mean(ys);
  const cov = xs.reduce((n, x, i) => n + (x - mx) * (ys[i]! - my), 0);
  const variance = xs.reduce((n, x) => n + (x - mx) ** 2, 0);
  return {
    from_s: fromS,
    samples: window.length,
    slope_mb_per_min: round(cov / variance, 2),
    max_minus_min_mb: round(Math.max(...ys) - Math.min(...ys)),
  };
}

/** What the soak records of one sidecar as it runs; everything else is derived from it. */
export interface RawSidecar {
  broker_id: number;
  pid: number;
  partitions_led: number;
  memory_bounds_log: unknown;
  cgroup_memory_limit: string | null;
  series: ProcSample[];
  heap_series: HeapSample[];
}

export interface SoakResult {
  date: string;
  /** When and at which commit (absent in results recorded before it was written). */
  run?: RunStamp;
  kafka_version: string;
  command: string;
  settings: Record<string, string | number> & { steady_from_s: number };
  failure: string | null;
  load_average: string;
  cpu_cores: Record<string, number>;
  producer_records_per_s: (number | null)[];
  producer_avg_latency_ms: (number | null)[];
  producer_intervals: unknown[];
  sidecars: (RawSidecar & ReturnType<typeof analyse>)[];
  final_counters: unknown;
}

/** Rates, peaks and flatness of one sidecar's series, from `steadyFromS` and from LATE_FROM_S on. */
export function analyse(raw: RawSidecar, steadyFromS: number) {
  const s = raw.series;
  const first = s[0]!;
  const last = s.at(-1)!;
  const rateFrom = (fromS: number) => {
    const from = s.find((p) => p.t_s >= fromS && p !== last);
    return from ? round((last.batches_copied - from.batches_copied) / (last.t_s - from.t_s || 1), 0) : null;
  };
  const points = (pick: (p: HeapSample) => number) =>
    raw.heap_series.map((p) => ({ t_s: p.t_s, mb: pick(p) }));
  const rss = s.map((p) => ({ t_s: p.t_s, mb: p.rss_mb }));
  // The lowest JS heap in use sampled in each minute: near the heap after a collection, so a
  // floor that rises is data kept; a heapTotal that rises over a level floor is V8 reserving space.
  const heapFloorByMinute: number[] = [];
  for (const p of raw.heap_series) {
    if (p.t_s < 0) continue;
    const minute = Math.floor(p.t_s / 60);
    heapFloorByMinute[minute] = Math.min(
      heapFloorByMinute[minute] ?? Number.POSITIVE_INFINITY,
      p.heap_used_mb,
    );
  }
  return {
    batches_per_s: round((last.batches_copied - first.batches_copied) / (last.t_s - first.t_s || 1), 0),
    // The first minute includes the JVMs' and the sidecars' warm-up.
    batches_per_s_steady: rateFrom(steadyFromS),
    batches_per_s_after_index_age: rateFrom(LATE_FROM_S),
    produce_requests_per_s: round(
      (last.produce_requests - first.produce_requests) / (last.t_s - first.t_s || 1),
      0,
    ),
    batches_per_request: round(
      (last.batches_copied - first.batches_copied) /
        Math.max(1, last.produce_requests - first.produce_requests),
      2,
    ),
    peak_rss_mb: Math.max(...s.map((p) => p.rss_mb)),
    hwm_mb: last.hwm_mb,
    rss_at_steady_from_mb: s.find((p) => p.t_s >= steadyFromS)?.rss_mb ?? null,
    rss_at_index_age_mb: s.find((p) => p.t_s >= LATE_FROM_S)?.rss_mb ?? null,
    rss_end_mb: last.rss_mb,
    index_mb_end: last.index_mb,
    flatness: flatness(rss, steadyFromS) ?? null,
    flatness_after_index_age: flatness(rss, LATE_FROM_S) ?? null,
    heap_used_flatness:
      flatness(
        points((p) => p.heap_used_mb),
        steadyFromS,
      ) ?? null,
    heap_total_flatness_after_index_age:
      flatness(
        points((p) => p.heap_total_mb),
        LATE_FROM_S,
      ) ?? null,
    array_buffers_flatness_after_index_age:
      flatness(
        points((p) => p.array_buffers_mb),
        LATE_FROM_S,
      ) ?? null,
    heap_used_floor_by_minute_mb: heapFloorByMinute,
  };
}

export function report(result: SoakResult): void {
  const t = result.settings;
  const from = t.steady_from_s;
  const wall = result.sidecars[0]?.series.at(-1)?.t_s ?? 0;
  console.log(
    `Memory soak, Kafka ${result.kafka_version}, ${result.date}: ${wall.toFixed(0)} s, target ${t.batches_per_s_per_broker_target} batches/s per broker (acks=${t.acks}, ${t.record_bytes} B records, one per batch, ${t.producers} producers, ${t.partitions} partitions), sidecars: ${t.sidecar_memory_flags}, ${t.s3}`,
  );
  console.log(
    `| sidecar | partitions led | batches/s (WAL): all / ${from} s..end / ${LATE_FROM_S} s..end | batches / Produce | peak RSS MB (VmHWM) | RSS at ${from} s → ${LATE_FROM_S} s → end MB | slope MB/min, ${from} s..end | max − min after ${from} s MB | slope MB/min, ${LATE_FROM_S} s..end | max − min after ${LATE_FROM_S} s MB |`,
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const s of result.sidecars) {
    console.log(
      `| ${s.broker_id} | ${s.partitions_led} | ${s.batches_per_s} / ${s.batches_per_s_steady ?? '-'} / ${s.batches_per_s_after_index_age ?? '-'} | ${s.batches_per_request} | ${s.peak_rss_mb} (${s.hwm_mb}) | ${s.rss_at_steady_from_mb ?? '-'} → ${s.rss_at_index_age_mb ?? '-'} → ${s.rss_end_mb} | ${s.flatness?.slope_mb_per_min ?? '-'} | ${s.flatness?.max_minus_min_mb ?? '-'} | ${s.flatness_after_index_age?.slope_mb_per_min ?? '-'} | ${s.flatness_after_index_age?.max_minus_min_mb ?? '-'} |`,
    );
  }
  console.log(
    `| sidecar | index MB end | heap used, lowest per minute MB | heapTotal slope MB/min, ${LATE_FROM_S} s..end | ArrayBuffers slope MB/min, ${LATE_FROM_S} s..end |`,
  );
  console.log('|---|---|---|---|---|');
  for (const s of result.sidecars) {
    console.log(
      `| ${s.broker_id} | ${s.index_mb_end} | ${s.heap_used_floor_by_minute_mb.join(', ') || '-'} | ${s.heap_total_flatness_after_index_age?.slope_mb_per_min ?? '-'} | ${s.array_buffers_flatness_after_index_age?.slope_mb_per_min ?? '-'} |`,
    );
  }
  const cpu = result.cpu_cores;
  console.log(
    `CPU (cores, of ${cpu.machine_cores}): machine ${cpu.machine_busy}, sidecars ${cpu.sidecars}, brokers ${cpu.brokers}, producers ${cpu.producers}, versitygw ${cpu.s3}; producer-side records/s ${JSON.stringify(result.producer_records_per_s)}; memory bounds logged: ${result.sidecars.some((s) => s.memory_bounds_log) ? 'yes' : 'none'}`,
  );
}
