import { describe, expect, it } from 'vitest';
import yargs from 'yargs';
import { costOptions } from '../../src/cli/cost-command.js';
import { SIDECAR_DEFAULTS } from '../../src/config/sidecar-config.js';
import { lingerFor, WAL_DEFAULTS } from '../../src/wal/defaults.js';
import { SEALING_DEFAULTS } from '../../src/wal/sealing-policy.js';
import { WAL_WRITER_DEFAULTS } from '../../src/wal/wal-writer-types.js';

/** What a sidecar started without any --wal-* flag seals: its flags' defaults, through the policy. */
const sidecar = {
  objectBytes: SIDECAR_DEFAULTS['wal-target-bytes'],
  lingerMs: lingerFor(SIDECAR_DEFAULTS['wal-latency-budget-ms']),
};

describe('the WAL defaults (one set, wal/defaults.ts)', () => {
  it("are a default sidecar's: a 50 ms budget, 30 ms of linger, 1 MB objects", () => {
    expect(sidecar).toEqual({ objectBytes: 1_000_000, lingerMs: 30 });
    expect(WAL_DEFAULTS).toMatchObject({ latencyBudgetMs: 50, ...sidecar });
  });

  it("give a writer without a policy a default sidecar's objects", () => {
    // Before: 400 KB and 10 ms, objects no sidecar made.
    expect(WAL_WRITER_DEFAULTS).toMatchObject({
      targetBytes: sidecar.objectBytes,
      lingerMs: sidecar.lingerMs,
    });
  });

  it("give the sealing policy the sidecar's budget and largest object", () => {
    expect(SEALING_DEFAULTS).toMatchObject({
      latencyBudgetMs: SIDECAR_DEFAULTS['wal-latency-budget-ms'],
      maxObjectBytes: sidecar.objectBytes,
    });
  });

  it("make `walproxy cost` price a default sidecar's linger and objects unless told otherwise", async () => {
    // Given `walproxy cost` with no --linger-ms or --object-bytes
    const argv = await costOptions(yargs([])).parse();
    // Then it prices what a default sidecar seals (before: 10 ms and 400,000 B)
    expect(argv['linger-ms']).toBe(String(sidecar.lingerMs));
    expect(argv['object-bytes']).toBe(String(sidecar.objectBytes));
  });
});
