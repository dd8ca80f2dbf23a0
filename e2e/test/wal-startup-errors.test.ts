import { spawn } from 'node:child_process';
import { describe, expect, inject, it } from 'vitest';
import { sidecarEntry } from '../src/cluster/paths.js';
import { walSidecarEnv } from '../src/cluster/wal-settings.js';

/** Runs `walproxy sidecar` with a WAL store and returns how it ended. */
function runSidecar(extra: string[], env: Record<string, string> = walSidecarEnv()) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(
      process.execPath,
      [
        sidecarEntry(),
        'sidecar',
        '--broker-id=1',
        '--client-listen=127.0.0.1:1',
        '--client-upstream=127.0.0.1:9',
        '--admin-listen=off',
        '--wal-topic=t',
        ...extra,
      ],
      { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const guard = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code) => {
      clearTimeout(guard);
      resolve({ code, stderr });
    });
  });
}

describe('WAL store problems at startup', () => {
  it('an invalid store URL is one clear error, exit 2', async () => {
    const { code, stderr } = await runSidecar(['--wal-store-url=s3://Not_A_Bucket/wal']);
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/--wal-store-url: invalid object store URL .*is not a valid bucket name/);
  });

  it('an unreachable endpoint is one clear error, exit 2', async () => {
    const { code, stderr } = await runSidecar([
      '--wal-store-url=s3://walproxy-e2e/wal',
      '--s3-endpoint=http://127.0.0.1:9',
      '--s3-force-path-style=true',
    ]);
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(
      /--wal-store-url: the object store is not usable: .*(unreachable|ECONNREFUSED|connect)/i,
    );
  });

  it('a bucket that does not exist is one clear error, exit 2', async () => {
    const { s3 } = inject('cluster');
    const { code, stderr } = await runSidecar([
      `--wal-store-url=s3://no-such-bucket-here/wal`,
      `--s3-endpoint=${s3.endpoint}`,
      '--s3-force-path-style=true',
    ]);
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /--wal-store-url: the object store is not usable: .*(no such bucket|NoSuchBucket|does not exist)/i,
    );
  });

  it('a directory that cannot be written is one clear error, exit 2', async () => {
    const { code, stderr } = await runSidecar(['--wal-store-url=file:///proc/walproxy-cannot-write-here']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/--wal-store-url: the object store is not usable/);
  });
});
