// A node preload for benchmarks: sums the process's GC pauses by kind (perf_hooks 'gc' entries) and
// samples its external memory, and writes them at exit to $GC_STATS_DIR/gc-<pid>.json (default:
// the temp directory). For a sidecar: BENCH_BASELINE_NODE_FLAGS="--require $PWD/e2e/bench/gc-stats.cjs"
// on a baseline arm of `make bench-replication` (docs/benchmarks.md, "What the GC is").
const { PerformanceObserver, constants } = require('node:perf_hooks');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const kinds = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};
const stats = {};
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = kinds[entry.detail?.kind] ?? String(entry.detail?.kind);
    stats[kind] ??= { count: 0, ms: 0 };
    stats[kind].count++;
    stats[kind].ms += entry.duration;
  }
}).observe({ entryTypes: ['gc'] });
let peakExternal = 0;
let peakArrayBuffers = 0;
setInterval(() => {
  const memory = process.memoryUsage();
  peakExternal = Math.max(peakExternal, memory.external);
  peakArrayBuffers = Math.max(peakArrayBuffers, memory.arrayBuffers);
}, 500).unref();
const started = Date.now();
process.on('exit', () => {
  const dir = process.env.GC_STATS_DIR ?? os.tmpdir();
  const summary = {
    seconds: (Date.now() - started) / 1000,
    cpu: process.cpuUsage(),
    stats,
    peakExternalMb: peakExternal / 1e6,
    peakArrayBuffersMb: peakArrayBuffers / 1e6,
  };
  fs.writeFileSync(path.join(dir, `gc-${process.pid}.json`), JSON.stringify(summary));
});
