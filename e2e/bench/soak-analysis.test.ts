import { describe, expect, it } from 'vitest';
import { analyse, flatness, type HeapSample, type ProcSample, type RawSidecar } from './soak-analysis.js';

/** A sidecar sampled every 5 s for 10 minutes at 5,000 batches/s, RSS as `rssAt(t_s)`. */
function sidecar(rssAt: (t: number) => number, heapUsedAt: (t: number) => number = () => 40): RawSidecar {
  const series: ProcSample[] = [];
  const heap: HeapSample[] = [];
  for (let t = 0; t <= 600; t += 5) {
    series.push({
      t_s: t,
      rss_mb: rssAt(t),
      hwm_mb: rssAt(t),
      batches_copied: 5_000 * t,
      produce_requests: 625 * t,
      index_entries: 0,
      index_mb: 0,
      pending_mb: 0,
    });
    heap.push({
      t_s: t,
      rss_mb: rssAt(t),
      heap_used_mb: heapUsedAt(t),
      heap_total_mb: 120,
      external_mb: 0,
      array_buffers_mb: 150,
    });
  }
  return {
    broker_id: 1,
    pid: 1,
    partitions_led: 12,
    memory_bounds_log: null,
    cgroup_memory_limit: null,
    series,
    heap_series: heap,
  };
}

describe('memory soak analysis', () => {
  it('reads a steady rise as its slope in MB per minute and its spread', () => {
    // Given RSS rising 6 MB per minute from 100 MB
    const points = Array.from({ length: 121 }, (_, i) => ({ t_s: i * 5, mb: 100 + (i * 5 * 6) / 60 }));

    // When it is fitted from minute 1 on
    const fit = flatness(points, 60);

    // Then the slope is 6 MB/min and max − min is what 9 minutes of it add
    expect(fit).toEqual({ from_s: 60, samples: 109, slope_mb_per_min: 6, max_minus_min_mb: 54 });
  });

  it('tells a sidecar that fills until the index age and then stays level from one that keeps growing', () => {
    // Given one sidecar filling 1 MB/s for 180 s and then flat at 380 MB, another growing 1 MB/min throughout
    const levels = analyse(
      sidecar((t) => 200 + Math.min(t, 180)),
      60,
    );
    const grows = analyse(
      sidecar((t) => 300 + t / 60),
      60,
    );

    // Then the first rises from minute 1 but is flat after 180 s; the second has the same slope in both windows
    expect(levels.flatness).toMatchObject({ slope_mb_per_min: 7.73, max_minus_min_mb: 120 });
    expect(levels.flatness_after_index_age).toMatchObject({ slope_mb_per_min: 0, max_minus_min_mb: 0 });
    expect(grows.flatness?.slope_mb_per_min).toBe(1);
    expect(grows.flatness_after_index_age?.slope_mb_per_min).toBe(1);
    // And the peak, the rates and the batches per request come from the series
    expect(levels).toMatchObject({
      peak_rss_mb: 380,
      rss_at_steady_from_mb: 260,
      rss_at_index_age_mb: 380,
      rss_end_mb: 380,
      batches_per_s: 5_000,
      batches_per_s_steady: 5_000,
      batches_per_s_after_index_age: 5_000,
      batches_per_request: 8,
    });
  });

  it('keeps the lowest heap in use of each minute, where data kept would show as a rising floor', () => {
    // Given a heap in use that swings between 40 and 100 MB every 30 s (collections), floor rising 2 MB/min
    const result = analyse(
      sidecar(
        () => 400,
        (t) => (Math.floor(t / 30) % 2 === 0 ? 40 : 100) + Math.floor(t / 60) * 2,
      ),
      60,
    );

    // Then the floors are the low side of each minute's swing: 40, 42, …, 58 (and 60 for the last sample)
    expect(result.heap_used_floor_by_minute_mb).toEqual([40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60]);
  });
});
