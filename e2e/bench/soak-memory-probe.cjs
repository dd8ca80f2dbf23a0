// Preloaded into each sidecar by the memory soak (e2e/bench/soak.bench.ts) through
// NODE_OPTIONS=--require: the sidecar's /metrics has no heap figures, and /proc shows only the
// resident total, so this appends process.memoryUsage() (JS heap, Buffers outside it) to
// $SOAK_PROBE_DIR/<pid>.jsonl every $SOAK_PROBE_INTERVAL_MS, to tell which of them grows.
// Measurement only: one unref'd timer, nothing in the sidecar's own code changes.
const { appendFileSync } = require('node:fs');
const path = require('node:path');

const dir = process.env.SOAK_PROBE_DIR;
if (dir) {
  const file = path.join(dir, `${process.pid}.jsonl`);
  const intervalMs = Number(process.env.SOAK_PROBE_INTERVAL_MS ?? 5000);
  const write = () =>
    appendFileSync(file, `${JSON.stringify({ t: Date.now(), ...process.memoryUsage() })}\n`);
  write();
  setInterval(write, intervalMs).unref();
}
