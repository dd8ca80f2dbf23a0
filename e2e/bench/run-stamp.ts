// Which run a benchmark result came from, written into its JSON so that a chart drawn from it
// (e2e/bench/charts.ts) can say so: when the run started and at which commit of this repository
// (with "+changes" when the work tree differed from it).
import { execFileSync } from 'node:child_process';
import { repoRoot } from '../src/cluster/paths.js';

export interface RunStamp {
  /** ISO time the run started. */
  started: string;
  /** Short commit of the checkout, "+changes" appended when it had uncommitted changes; null outside git. */
  commit: string | null;
}

export function runStamp(startedAt: Date = new Date()): RunStamp {
  return { started: startedAt.toISOString(), commit: checkoutCommit() };
}

function checkoutCommit(): string | null {
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: repoRoot(),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  try {
    const commit = git('rev-parse', '--short', 'HEAD');
    // Results and charts are written under .runs/ and docs/charts/: neither makes the code differ.
    const changed = git('status', '--porcelain', '--untracked-files=no', '--', '.', ':!docs/charts')
      .split('\n')
      .filter(Boolean);
    return changed.length > 0 ? `${commit}+changes` : commit;
  } catch {
    return null;
  }
}
