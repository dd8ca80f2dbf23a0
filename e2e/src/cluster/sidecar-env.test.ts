import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { sidecarExtraEnv, sidecarProcessEnv } from './kafka-cluster.js';
import { sidecarEntry } from './paths.js';

// The built sidecar, as the harness starts it (`make test-unit` builds first), with no listen
// flags: it exits 2 listing what is wrong, which shows whether it took the environment.
function sidecarStart(env: NodeJS.ProcessEnv): { code: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [sidecarEntry(), 'sidecar', '--broker-id', '1'], {
    env,
    encoding: 'utf8',
    timeout: 15_000,
  });
  return { code: result.status, stderr: result.stderr };
}

describe('the environment the harness gives sidecars', () => {
  it("keeps the harness's WALPROXY_KEEP_LOGS from the sidecar, which would refuse it as an unknown flag", () => {
    // Given a test run asked to keep its logs
    const runner = { ...process.env, WALPROXY_KEEP_LOGS: '1' };

    // Then the raw environment makes the sidecar refuse a flag it never got (the bug)
    expect(sidecarStart(runner).stderr).toMatch(/Unknown argument: keepLogs/);
    // And with the harness's environment it only misses its listen flags
    const started = sidecarStart(sidecarProcessEnv(runner));
    expect(started.code).toBe(2);
    expect(started.stderr).not.toMatch(/keepLogs/);
    expect(started.stderr).toMatch(/--client-listen: is required/);
  });
  it("keeps the fuzz tests' WALPROXY_FUZZ_* from the sidecar, so that a documented seed can be replayed on a cluster", () => {
    // Given the replay command of a failed e2e fuzz case (docs/architecture.md, "Fuzzing")
    const runner = {
      ...process.env,
      WALPROXY_FUZZ_SEED: '7',
      WALPROXY_FUZZ_CASE: '0',
      WALPROXY_FUZZ_CASES: '2',
    };

    // Then the raw environment makes the sidecar refuse flags it never got (the bug)
    expect(sidecarStart(runner).stderr).toMatch(/Unknown arguments?: fuzzSeed/);
    // And with the harness's environment it only misses its listen flags
    const started = sidecarStart(sidecarProcessEnv(runner));
    expect(started.code).toBe(2);
    expect(started.stderr).not.toMatch(/fuzz/i);
    expect(started.stderr).toMatch(/--client-listen: is required/);
  });
});

describe('SIDECAR_EXTRA_ENV', () => {
  it('reads "K=V K=V" (a value may hold "=") and refuses a word that is not NAME=value', () => {
    expect(sidecarExtraEnv('MALLOC_TRIM_THRESHOLD_=268435456  A=b=c')).toEqual({
      MALLOC_TRIM_THRESHOLD_: '268435456',
      A: 'b=c',
    });
    expect(sidecarExtraEnv(undefined)).toEqual({});
    expect(() => sidecarExtraEnv('MALLOC_ARENA_MAX')).toThrow(/not NAME=value/);
    expect(() => sidecarExtraEnv('=1')).toThrow(/not NAME=value/);
  });

  it("is the harness's variable: the sidecar gets the variables it names, not SIDECAR_EXTRA_ENV itself", () => {
    expect(sidecarProcessEnv({ SIDECAR_EXTRA_ENV: 'A=1', PATH: '/bin' })).toEqual({ PATH: '/bin' });
  });
});
