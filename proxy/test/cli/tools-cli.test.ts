import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openObjectStore } from '../../src/store/index.js';
import { newWalObjectKey } from '../../src/wal/object-key.js';

// The built CLI, exactly as operators run it (`make test-unit` builds first).
const MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

function run(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('walproxy operator commands', () => {
  it('wal gc: one line per bad setting, exit 2, nothing on stdout', async () => {
    const result = await run(['wal', 'gc', '--older-than=2', '--s3-force-path-style=yes']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim().split('\n')).toEqual([
      'walproxy wal gc: --store-url: is required (s3://bucket/prefix or file:///dir)',
      "walproxy wal gc: --s3-force-path-style: 'yes' is not true or false",
      "walproxy wal gc: --older-than: '2' is not a duration (a number with a unit: ms, s, m, h, d; e.g. 90s, 2h, 1h30m)",
    ]);
  });

  it('wal gc: WALPROXY_DELETE=true in the environment deletes nothing and says it is ignored; only --delete deletes', async () => {
    // Given a file store holding one WAL object created three hours ago
    const dir = mkdtempSync(path.join(tmpdir(), 'walproxy-gc-'));
    try {
      const url = pathToFileURL(dir).href;
      const store = openObjectStore(url);
      const key = newWalObjectKey('', 1, Date.now() - 3 * 3_600_000);
      await store.put(key, Buffer.from('not a real object: gc reads keys only'));
      await store.close();
      const file = path.join(dir, key);
      expect(existsSync(file)).toBe(true);
      const gc = (args: string[]) =>
        run(['wal', 'gc', `--store-url=${url}`, '--older-than=1h', ...args], { WALPROXY_DELETE: 'true' });
      // When gc runs with the variable set and no flag, or the flag set to false
      for (const args of [[], ['--delete=false'], ['--no-delete']]) {
        const dry = await gc(args);
        // Then it is a dry run, and it says the variable is ignored
        expect(dry.code, dry.stderr).toBe(0);
        expect(dry.stdout).toMatch(/^would delete 1 objects/m);
        expect(dry.stderr).toContain(
          'walproxy wal gc: WALPROXY_DELETE is ignored: only --delete on the command line deletes',
        );
        expect(existsSync(file), args.join(' ')).toBe(true);
      }
      // And only the flag deletes
      const real = await gc(['--delete']);
      expect(real.code, real.stderr).toBe(0);
      expect(real.stdout).toMatch(/^deleted 1 objects/m);
      expect(existsSync(file)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('wal verify: requires --bootstrap and checks times and data dirs', async () => {
    const result = await run([
      'wal',
      'verify',
      '--store-url=s3://bucket/wal',
      '--since=yesterday',
      '--data-dir=/nonexistent/walproxy',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      'walproxy wal verify: --bootstrap: is required (host:port of a broker or its sidecar)',
      "walproxy wal verify: --since: 'yesterday' is not a time (ISO 8601 like 2026-01-02T03:04:05Z, epoch milliseconds, or a duration ago like 2h)",
      "walproxy wal verify: --data-dir: '/nonexistent/walproxy' does not exist",
    ]);
  });

  it('wal ls on a file:// store that does not exist fails with one line, exit 1', async () => {
    const result = await run(['wal', 'ls', '--store-url=file:///nonexistent/walproxy-store']);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^walproxy wal ls: .*\(WALPROXY_ERR_STORE_/);
  });

  it('cost: prints the comparison; bad values one line each, exit 2', async () => {
    const ok = await run([
      'cost',
      '--throughput-mbps=20',
      '--mode=wal',
      '--linger-ms=50',
      '--object-bytes=400KB',
      '--retention=10m',
      '--residual=0',
      '--proxy-cpu-seconds-per-gb=35.6',
      '--wal-cpu-seconds-per-gb=137.1',
    ]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(
      /saved per month: \$1,609\.41 \(77\.6 %\); net of relaying: \$1,588\.50 \(76\.6 %\)/,
    );
    const bad = await run(['cost', '--throughput-mbps=fast', '--zones=0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toEqual([
      "walproxy cost: --throughput-mbps: 'fast' is not a number from 0 to 1000000000",
      "walproxy cost: --zones: '0' is not a whole number from 1 to 32",
    ]);
  });

  it('cost: a default sidecar at 0.05 MB/s over 3 brokers costs nothing extra (the issue printed EXTRA $921.01)', async () => {
    const result = await run(['cost', '--throughput-mbps', '0.05', '--brokers', '3']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).not.toContain('EXTRA cost per month');
    expect(result.stdout).toMatch(/^saved per month: \$0\.00 \(0\.0 %\)/m);
    expect(result.stdout).toMatch(/→ INLINE \(stock replication\)/);
    // The forced-WAL figure beside it says what mode=wal would cost at that rate
    expect(result.stdout).toMatch(
      /^forced through the WAL \(mode=wal, linger 30 ms, objects of 500 B\): .*EXTRA cost/m,
    );
  });

  it('version prints the package version', async () => {
    const result = await run(['version']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^walproxy \d+\.\d+\.\d+ \(node v\d+/);
  });

  it('unknown wal subcommand or flag: exit 2', async () => {
    expect((await run(['wal', 'lss'])).code).toBe(2);
    expect((await run(['wal', 'ls', '--stor-url=x'])).code).toBe(2);
  });
});
