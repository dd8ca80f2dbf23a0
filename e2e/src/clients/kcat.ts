import { type RunResult, runBounded } from './run-bounded.js';

/** Runs Debian's kcat (librdkafka) with `input` on stdin, bounded by `timeoutMs`. */
export function kcat(args: string[], input = '', timeoutMs = 120_000): Promise<RunResult> {
  return runBounded('kcat', args, { input, timeoutMs, label: `kcat ${args.join(' ')}` });
}
