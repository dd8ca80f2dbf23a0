import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../src/cluster/paths.js';
import { runStamp } from './run-stamp.js';

describe('runStamp', () => {
  it("names the checkout's commit and the start it is given", () => {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: repoRoot(),
      encoding: 'utf8',
    }).trim();
    const stamp = runStamp(new Date('2026-12-04T22:56:46.120Z'));
    expect(stamp.started).toBe('2026-12-04T22:56:46.120Z');
    // The short commit, marked when tracked files differ from it (as they may while one works)
    expect(stamp.commit === head || stamp.commit === `${head}+changes`).toBe(true);
  });
});
