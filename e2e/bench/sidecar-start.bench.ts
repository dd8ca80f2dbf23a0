/**
 * How long a sidecar takes from spawn to `sidecar ready` (every listener open), for the bundled
 * CLI the image runs (proxy/dist/cli/walproxy.mjs) against the same program unbundled
 * (proxy/dist/cli/main.js), interleaved in one run so that the machine's load hits both alike.
 * A restart's clients wait for this (issue #12: a sidecar started while the store is down is
 * ready within 2 s). The sidecar gets WAL flags and a store and broker that are not there: start
 * never waits for either.
 *
 *   npx tsx e2e/bench/sidecar-start.bench.ts     (make bench-start; env START_RUNS, default 9)
 *
 * START_BASELINE=<entry> adds a third program to the interleaving (e.g. an earlier build's bundle,
 * copied aside), reported as `baseline`. START_BUSY=<n> keeps n CPU-bound processes running
 * meanwhile (each ending itself after 5 min, killed at the end), for the start of a sidecar on
 * a busy node: what a restart during load meets.
 *
 * Prints the figures and writes .runs/bench/sidecar-start.json.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../src/cluster/paths.js';

const RUNS = Number(process.env.START_RUNS ?? 9);
const BUSY = Number(process.env.START_BUSY ?? 0);
const ENTRIES: Record<string, string> = {
  bundled: path.join(repoRoot(), 'proxy', 'dist', 'cli', 'walproxy.mjs'),
  unbundled: path.join(repoRoot(), 'proxy', 'dist', 'cli', 'main.js'),
  ...(process.env.START_BASELINE ? { baseline: path.resolve(process.env.START_BASELINE) } : {}),
};
const READY = '"msg":"sidecar ready"';
const BASE_PORT = 23_000;

/** Spawns one sidecar, resolves with the milliseconds until it logged `sidecar ready`, kills it. */
async function timeToReady(entry: string, port: number): Promise<number> {
  const begun = performance.now();
  const child = spawn(
    process.execPath,
    [
      entry,
      'sidecar',
      '--broker-id=1',
      `--client-listen=127.0.0.1:${port}`,
      // Nothing listens on port 1: start must not wait for the broker or the store.
      '--client-upstream=127.0.0.1:1',
      `--admin-listen=127.0.0.1:${port + 1}`,
      '--wal-store-url=s3://bucket/start/',
      '--s3-endpoint=http://127.0.0.1:1',
      '--wal-topic=t',
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y', AWS_REGION: 'us-east-1' },
    },
  );
  let output = '';
  const ms = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no "sidecar ready" in 30 s: ${output.slice(-500)}`)),
      30_000,
    );
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(READY)) {
        clearTimeout(timer);
        resolve(performance.now() - begun);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sidecar exited ${code} before ready: ${output.slice(-500)}`));
    });
  });
  child.removeAllListeners('exit');
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  return ms;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

const kinds = Object.keys(ENTRIES);
const samples: Record<string, number[]> = Object.fromEntries(kinds.map((k) => [k, []]));
// Each busy process ends itself after 5 min whatever happens to this one, and is killed at the end.
const busy = Array.from({ length: BUSY }, () =>
  spawn(process.execPath, ['-e', 'const end = Date.now() + 300_000; while (Date.now() < end) {}'], {
    stdio: 'ignore',
  }),
);
let port = BASE_PORT;
try {
  for (let run = 0; run < RUNS; run++) {
    // Rotate which goes first, so none always meets a warmer page cache.
    const order = kinds.map((_, i) => kinds[(i + run) % kinds.length]!);
    for (const kind of order) {
      samples[kind]!.push(await timeToReady(ENTRIES[kind]!, port));
      port += 2;
    }
  }
} finally {
  for (const child of busy) child.kill('SIGKILL');
}
const p50 = (kind: string) => Math.round(median(samples[kind]!));
const result: Record<string, unknown> = { runs: RUNS, busy_processes: BUSY, entries: ENTRIES };
for (const kind of kinds) {
  result[`${kind}_ms`] = samples[kind]!.map(Math.round);
  result[`${kind}_p50_ms`] = p50(kind);
}
result.bundled_over_unbundled = Math.round((p50('bundled') / p50('unbundled')) * 100) / 100;
if (ENTRIES.baseline)
  result.bundled_over_baseline = Math.round((p50('bundled') / p50('baseline')) * 100) / 100;
console.log(
  `sidecar spawn to ready, ${RUNS} runs each, interleaved, ${BUSY} busy processes: ${kinds
    .map((k) => `${k} p50 ${p50(k)} ms (${(result[`${k}_ms`] as number[]).join(', ')})`)
    .join('; ')}: bundled/unbundled ${result.bundled_over_unbundled}${
    ENTRIES.baseline ? `, bundled/baseline ${result.bundled_over_baseline}` : ''
  }`,
);
const out = path.join(repoRoot(), '.runs', 'bench', 'sidecar-start.json');
mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
console.log(`results: ${out}`);
