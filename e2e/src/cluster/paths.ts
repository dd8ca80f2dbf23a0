import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: the nearest ancestor holding tsconfig.base.json (works from src or dist). */
export function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'tsconfig.base.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('repository root (tsconfig.base.json) not found');
    dir = parent;
  }
  return dir;
}

export const DEFAULT_KAFKA_VERSION = '4.4.0';

export function kafkaVersion(): string {
  return process.env.KAFKA_VERSION ?? DEFAULT_KAFKA_VERSION;
}

/**
 * The logging backend in a version's jar directory, as e2e/kafka/fetch-kafka.sh chose it: Kafka
 * 3.x logs through log4j 1.x (reload4j, `-Dlog4j.configuration`), 4.x through Log4j2
 * (`-Dlog4j2.configurationFile`).
 */
export function kafkaLogging(version = kafkaVersion()): 'reload4j' | 'log4j2' {
  return version.startsWith('3.') ? 'reload4j' : 'log4j2';
}

/** The flat jar directory of a Kafka version, resolved from Maven Central on first use. */
export function kafkaLibDir(version = kafkaVersion()): string {
  const dir = path.join(repoRoot(), '.cache', 'kafka', version);
  if (!existsSync(path.join(dir, '.complete'))) {
    const script = path.join(repoRoot(), 'e2e', 'kafka', 'fetch-kafka.sh');
    const result = spawnSync('bash', [script, version], { stdio: 'inherit' });
    if (result.status !== 0) throw new Error(`resolving Kafka ${version} jars failed (${script})`);
  }
  return dir;
}

/**
 * The built sidecar entry point as the container image runs it: the bundled CLI (`make build`
 * produces it, proxy/bundle.mjs).
 */
export function sidecarEntry(): string {
  // SIDECAR_ENTRY (benchmarks): another build of the sidecar, e.g. an older commit's bundle copied
  // aside, to compare against in the same session.
  const entry = process.env.SIDECAR_ENTRY ?? path.join(repoRoot(), 'proxy', 'dist', 'cli', 'walproxy.mjs');
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run 'make build' first`);
  return entry;
}

/**
 * The same program unbundled (`proxy/dist/cli/main.js`, the package's bin): what a CPU-profiled
 * sidecar runs, so that every sample keeps the module it came from (e2e/bench/profile-summary.ts
 * attributes samples by module; in the bundle every frame is walproxy.mjs).
 */
export function unbundledSidecarEntry(): string {
  const entry = path.join(repoRoot(), 'proxy', 'dist', 'cli', 'main.js');
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run 'make build' first`);
  return entry;
}
