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
 * Prints the figures and writes .runs/bench/sidecar-start.json.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../src/cluster/paths.js';

const RUNS = Number(process.env.START_RUNS ?? 9);
const ENTRIES = {
  bundled: path.join(repoRoot(), 'proxy', 'dist', 'cli', 'walproxy.mjs'),
  unbundled: path.join(repoRoot(), 'proxy', 'dist', 'cli', 'main.js'),
} as const;
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

const samples: Record<keyof typeof ENTRIES, number[]> = { bundled: [], unbundled: [] };
let port = BASE_PORT;
for (let run = 0; run < RUNS; run++) {
  // Alternate which goes first, so neither always meets a warmer page cache.
  const order = run % 2 === 0 ? (['bundled', 'unbundled'] as const) : (['unbundled', 'bundled'] as const);
  for (const kind of order) {
    samples[kind].push(await timeToReady(ENTRIES[kind], port));
    port += 2;
  }
}
const result = {
  runs: RUNS,
  bundled_ms: samples.bundled.map(Math.round),
  unbundled_ms: samples.unbundled.map(Math.round),
  bundled_p50_ms: Math.round(median(samples.bundled)),
  unbundled_p50_ms: Math.round(median(samples.unbundled)),
  bundled_over_unbundled: Math.round((median(samples.bundled) / median(samples.unbundled)) * 100) / 100,
};
console.log(
  `sidecar spawn to ready, ${RUNS} runs each, interleaved: bundled p50 ${result.bundled_p50_ms} ms (${result.bundled_ms.join(', ')}), unbundled p50 ${result.unbundled_p50_ms} ms (${result.unbundled_ms.join(', ')}): bundled/unbundled ${result.bundled_over_unbundled}`,
);
const out = path.join(repoRoot(), '.runs', 'bench', 'sidecar-start.json');
mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
console.log(`results: ${out}`);
