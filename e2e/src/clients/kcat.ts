import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../cluster/paths.js';
import { type RunResult, runBounded } from './run-bounded.js';

export interface KcatOptions {
  /**
   * 'debian' (default): Debian 12's kcat as installed, on its librdkafka 2.0.2.
   * 'current': the same kcat binary on librdkafka 2.16 (see currentLibrdkafkaDir): librdkafka
   * before 2.6.1 computes SCRAM proofs that Kafka 4.x refuses (a nonce appended twice,
   * librdkafka#4895), so SCRAM scenarios need it.
   */
  librdkafka?: 'debian' | 'current';
  timeoutMs?: number;
  /** Run kcat inside this network namespace (e.g. a zone's client namespace). */
  netns?: string;
}

/** Runs Debian's kcat with `input` on stdin, bounded by `timeoutMs`. */
export function kcat(
  args: string[],
  input = '',
  timeoutMsOrOptions: number | KcatOptions = 120_000,
): Promise<RunResult> {
  const options =
    typeof timeoutMsOrOptions === 'number' ? { timeoutMs: timeoutMsOrOptions } : timeoutMsOrOptions;
  const env =
    options.librdkafka === 'current'
      ? { ...process.env, LD_LIBRARY_PATH: currentLibrdkafkaDir() }
      : undefined;
  return runBounded('kcat', args, {
    input,
    timeoutMs: options.timeoutMs ?? 120_000,
    label: `kcat ${args.join(' ')}`,
    ...(env ? { env } : {}),
    ...(options.netns ? { netns: options.netns } : {}),
  });
}

/**
 * Reads a topic to its end (`args` hold `-C -e`) until at least `expected` lines came back, or
 * `attempts` reads (500 ms apart) were made; returns the last read. A consumer that reads a
 * follower's replica (KIP-392, as zone-aware clients do) sees that replica's high watermark, which
 * trails the leader's by up to a follower fetch: right after an acknowledgement a read to the end
 * may stop short, on stock Kafka as through walproxy.
 */
export async function kcatReadAtLeast(
  args: string[],
  expected: number,
  options: KcatOptions = {},
  attempts = 20,
): Promise<RunResult & { lines: string[] }> {
  let result: RunResult & { lines: string[] } = { code: null, stdout: '', stderr: '', lines: [] };
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, 500));
    const read = await kcat(args, '', options);
    result = { ...read, lines: read.stdout.split('\n').filter((l) => l !== '') };
    if (read.code !== 0 || result.lines.length >= expected) break;
  }
  return result;
}

/** The confluent-kafka wheel (PyPI) whose bundled librdkafka kcat loads for SCRAM against Kafka 4.x. */
export const CONFLUENT_KAFKA_WHEEL = 'confluent-kafka==2.16.1';

/**
 * A directory holding `librdkafka.so.1` from the pinned confluent-kafka manylinux wheel (which
 * carries librdkafka with OpenSSL and SASL linked in), for `LD_LIBRARY_PATH`. librdkafka keeps its
 * ABI (soname .so.1), so Debian's kcat runs on it unchanged. Downloaded once into .cache;
 * idempotent and safe when test files race (each stages its own copy, then renames).
 */
export function currentLibrdkafkaDir(): string {
  const version = CONFLUENT_KAFKA_WHEEL.split('==')[1]!;
  const dir = path.join(repoRoot(), '.cache', `librdkafka-from-confluent-kafka-${version}`);
  const lib = path.join(dir, 'librdkafka.so.1');
  if (existsSync(lib)) return dir;
  const staging = `${dir}.${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const run = (command: string, args: string[]) => {
    const result = spawnSync(command, args, { encoding: 'utf8' });
    if (result.status !== 0)
      throw new Error(`${command} ${args.join(' ')} failed:\n${result.stderr}${result.stdout}`);
  };
  run('python3', [
    '-m',
    'pip',
    'download',
    '--quiet',
    '--disable-pip-version-check',
    '--no-deps',
    '--only-binary',
    ':all:',
    '--platform',
    'manylinux_2_28_x86_64',
    '--python-version',
    '3.11',
    '--dest',
    staging,
    CONFLUENT_KAFKA_WHEEL,
  ]);
  // Only the bundled library: a wheel is a zip; python extracts it, no unzip needed.
  run('python3', [
    '-c',
    [
      'import glob, sys, zipfile',
      'wheel = glob.glob(sys.argv[1] + "/*.whl")[0]',
      'z = zipfile.ZipFile(wheel)',
      'name = [n for n in z.namelist() if n.startswith("confluent_kafka.libs/librdkafka")][0]',
      'open(sys.argv[1] + "/librdkafka.so.1", "wb").write(z.read(name))',
    ].join('\n'),
    staging,
  ]);
  try {
    renameSync(staging, dir);
  } catch {
    // Another test file won the race; use its copy.
    rmSync(staging, { recursive: true, force: true });
  }
  if (!existsSync(lib)) throw new Error(`no ${lib} after extracting ${CONFLUENT_KAFKA_WHEEL}`);
  return dir;
}
