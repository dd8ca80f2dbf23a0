// Preloaded into each sidecar by the memory soak (e2e/bench/soak.bench.ts) through
// NODE_OPTIONS=--require: the sidecar's /metrics has no heap figures, and /proc shows only the
// resident total, so this appends process.memoryUsage() (JS heap, Buffers outside it) to
// $SOAK_PROBE_DIR/<pid>.jsonl every $SOAK_PROBE_INTERVAL_MS, to tell which of them grows.
// With $SOAK_PROBE_SNAPSHOT_AT_S (seconds after start, comma-separated) it also writes a V8 heap
// snapshot to $SOAK_PROBE_DIR/<pid>-<s>.heapsnapshot at each (ArrayBuffer backing stores appear in
// it with their sizes), for e2e/bench/heap-diff.ts to tell what grew between two of them. A
// snapshot stops the sidecar for a few seconds: a diagnosis run, not a measurement of the rate.
// Measurement only: unref'd timers, nothing in the sidecar's own code changes.
const { appendFileSync } = require('node:fs');
const path = require('node:path');
const v8 = require('node:v8');

const dir = process.env.SOAK_PROBE_DIR;
if (dir) {
  const file = path.join(dir, `${process.pid}.jsonl`);
  const intervalMs = Number(process.env.SOAK_PROBE_INTERVAL_MS ?? 5000);
  const write = () =>
    appendFileSync(file, `${JSON.stringify({ t: Date.now(), ...process.memoryUsage() })}\n`);
  write();
  setInterval(write, intervalMs).unref();
  for (const at of (process.env.SOAK_PROBE_SNAPSHOT_AT_S ?? '').split(',').filter(Boolean)) {
    setTimeout(() => {
      v8.writeHeapSnapshot(path.join(dir, `${process.pid}-${at}.heapsnapshot`));
    }, Number(at) * 1000).unref();
  }
}
