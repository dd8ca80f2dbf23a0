import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { issueCert, makeCa, removeDir, tempDir } from '../../../e2e/src/tls/certs.js';

// The built CLI, exactly as operators run it (`make test-unit` builds first).
const MAIN = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

function run(args: string[], env: Record<string, string> = {}, stopAfterMs?: number) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (stopAfterMs !== undefined && stdout.includes('sidecar ready'))
        setTimeout(() => child.kill('SIGTERM'), stopAfterMs);
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const guard = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.on('exit', (code) => {
      clearTimeout(guard);
      resolve({ code, stdout, stderr });
    });
  });
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('walproxy CLI', () => {
  it('is built', () => {
    expect(existsSync(MAIN), `${MAIN} missing: run 'npm run build'`).toBe(true);
  });

  it('documents every sidecar flag in --help', async () => {
    const { code, stdout } = await run(['sidecar', '--help']);
    expect(code).toBe(0);
    for (const flag of [
      '--broker-id',
      '--client-listen',
      '--client-upstream',
      '--replication-listen',
      '--replication-upstream',
      '--egress-listen-base',
      '--peer-address-template',
      '--max-frame-bytes',
      '--drain-timeout-ms',
    ]) {
      expect(stdout).toContain(flag);
    }
  });

  it('exits 2 with one line per bad setting, naming the flag', async () => {
    const { code, stderr, stdout } = await run(['sidecar', '--broker-id', 'x', '--client-listen', 'nope']);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toEqual([
      "walproxy sidecar: --broker-id: 'x' is not a whole number from 0 to 2147483647",
      "walproxy sidecar: --client-listen: 'nope' is not host:port",
      'walproxy sidecar: --client-upstream: is required (host:port)',
    ]);
  });

  it('exits 2 with one line per bad TLS or SASL setting, before opening a port', async () => {
    const dir = tempDir();
    try {
      const ca = makeCa(dir);
      const server = issueCert(ca, { cn: 'server' });
      const other = issueCert(ca, { cn: 'other' });
      const { code, stderr, stdout } = await run([
        'sidecar',
        '--broker-id=1',
        '--client-listen=127.0.0.1:1',
        '--client-upstream=127.0.0.1:2',
        `--client-tls-cert=${server.certPath}`,
        `--client-tls-key=${other.keyPath}`,
        '--metadata-sasl-mechanism=GSSAPI',
      ]);
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr.trim().split('\n')).toEqual([
        `walproxy sidecar: --client-tls-key: the key in ${other.keyPath} does not match the certificate in ${server.certPath}`,
        "walproxy sidecar: --metadata-sasl-mechanism: 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
      ]);
    } finally {
      removeDir(dir);
    }
  });

  it('exits 2 on an unknown flag', async () => {
    const { code, stderr } = await run(['sidecar', '--brokr-id', '1']);
    expect(code).toBe(2);
    expect(stderr).toMatch(/^walproxy: Unknown arguments?: brokr-id/);
  });

  it('reads settings from WALPROXY_* variables, starts, and exits 0 on SIGTERM', async () => {
    const [listen, upstream] = [await freePort(), await freePort()];
    const { code, stdout } = await run(
      ['sidecar', '--admin-listen', 'off'],
      {
        WALPROXY_BROKER_ID: '3',
        WALPROXY_CLIENT_LISTEN: `127.0.0.1:${listen}`,
        WALPROXY_CLIENT_UPSTREAM: `127.0.0.1:${upstream}`,
      },
      100,
    );
    expect(code).toBe(0);
    const lines = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string; brokerId?: number });
    expect(lines.find((l) => l.msg === 'sidecar ready')?.brokerId).toBe(3);
    expect(lines.at(-1)?.msg).toBe('sidecar stopped');
  });
});

describe('walproxy sidecar --config', () => {
  it('reads a YAML file keyed by flag name; variables and flags win over it, in that order', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-config-'));
    const file = path.join(dir, 'walproxy.yaml');
    writeFileSync(
      file,
      [
        'broker-id: 7',
        'client-listen: 127.0.0.1:1',
        'client-upstream: 127.0.0.1:9',
        'log-level: from-file',
        'peer-address: [x]',
      ].join('\n'),
    );
    try {
      // The file alone: both of its bad values are reported, by flag name
      const fromFile = await run(['sidecar', `--config=${file}`]);
      expect(fromFile.code).toBe(2);
      expect(fromFile.stderr).toContain("--log-level: 'from-file' is not one of");
      expect(fromFile.stderr).toContain("--peer-address: 'x' is not <broker-id>=<host:port>");
      // A WALPROXY_* variable wins over the file, and a flag over both
      const fromEnv = await run(['sidecar', `--config=${file}`], { WALPROXY_LOG_LEVEL: 'from-env' });
      expect(fromEnv.stderr).toContain("--log-level: 'from-env' is not one of");
      const fromFlag = await run(['sidecar', `--config=${file}`, '--log-level=from-flag'], {
        WALPROXY_LOG_LEVEL: 'from-env',
      });
      expect(fromFlag.stderr).toContain("--log-level: 'from-flag' is not one of");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes the security settings from the file, variables and flags alike, in the same order', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-config-'));
    const file = path.join(dir, 'walproxy.yaml');
    writeFileSync(
      file,
      [
        'broker-id: 7',
        'client-listen: 127.0.0.1:1',
        'client-upstream: 127.0.0.1:9',
        'metadata-sasl-mechanism: FILE',
      ].join('\n'),
    );
    try {
      const fromFile = await run(['sidecar', `--config=${file}`]);
      expect(fromFile.stderr).toContain("--metadata-sasl-mechanism: 'FILE' is not one of");
      const env = { WALPROXY_METADATA_SASL_MECHANISM: 'ENV' };
      expect((await run(['sidecar', `--config=${file}`], env)).stderr).toContain("'ENV' is not one of");
      const fromFlag = await run(['sidecar', `--config=${file}`, '--metadata-sasl-mechanism=FLAG'], env);
      expect(fromFlag.code).toBe(2);
      expect(fromFlag.stderr).toContain("'FLAG' is not one of");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads the file however it is named: --config <file>, --config=<file> or WALPROXY_CONFIG', async () => {
    // (The YAML parser is loaded only when a file is named: each way of naming one must load it.)
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-config-'));
    const file = path.join(dir, 'walproxy.yaml');
    writeFileSync(file, ['broker-id: 7', 'client-listen: 127.0.0.1:1', 'log-level: from-file'].join('\n'));
    try {
      for (const [args, env] of [
        [['sidecar', '--config', file], {}],
        [['sidecar', `--config=${file}`], {}],
        [['sidecar'], { WALPROXY_CONFIG: file }],
      ] as const) {
        const { code, stderr } = await run([...args], env);
        expect(code).toBe(2);
        expect(stderr).toContain("--log-level: 'from-file' is not one of");
        expect(stderr).not.toContain('--client-listen: is required');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the file and the problem when it is not YAML', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-config-'));
    const file = path.join(dir, 'broken.yaml');
    writeFileSync(file, '{');
    try {
      const { code, stderr } = await run(['sidecar', `--config=${file}`]);
      expect(code).toBe(2);
      expect(stderr).toMatch(new RegExp(`^walproxy: --config ${file}: `));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
