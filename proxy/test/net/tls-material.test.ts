import { copyFileSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  issueCert,
  makeCa,
  removeDir,
  type TestCa,
  type TestCert,
  tempDir,
} from '../../../e2e/src/tls/certs.js';
import { createLogger } from '../../src/log.js';
import { loadTlsMaterial, TlsFileError, TlsMaterial } from '../../src/net/tls-material.js';

let dir: string;
let ca: TestCa;
let first: TestCert;
let second: TestCert;

beforeAll(() => {
  dir = tempDir();
  ca = makeCa(dir);
  first = issueCert(ca, { cn: 'first' });
  second = issueCert(ca, { cn: 'second' });
});
afterAll(() => removeDir(dir));

function problem(files: Parameters<typeof loadTlsMaterial>[0]): { role: string; message: string } {
  try {
    loadTlsMaterial(files);
  } catch (error) {
    if (error instanceof TlsFileError) return { role: error.role, message: error.message };
    throw error;
  }
  throw new Error('expected a TlsFileError');
}

function capture() {
  const lines: Array<{ level: string; msg: string; [k: string]: unknown }> = [];
  const log = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, log };
}

describe('loadTlsMaterial', () => {
  it('accepts a certificate, its key and a CA bundle', () => {
    const loaded = loadTlsMaterial({ cert: first.certPath, key: first.keyPath, ca: ca.certPath });
    expect(loaded.certificate?.subject).toBe('CN=first');
  });

  it('names the file that cannot be read', () => {
    expect(problem({ cert: first.certPath, key: path.join(dir, 'missing.key') })).toEqual({
      role: 'key',
      message: expect.stringMatching(/^cannot read .*missing\.key: ENOENT/),
    });
  });

  it('says when the key does not belong to the certificate', () => {
    expect(problem({ cert: first.certPath, key: second.keyPath })).toEqual({
      role: 'key',
      message: `the key in ${second.keyPath} does not match the certificate in ${first.certPath}`,
    });
  });

  it('refuses a CA bundle or certificate file without a certificate in it', () => {
    const notPem = path.join(dir, 'not-a-ca.pem');
    writeFileSync(notPem, 'hello\n');
    expect(problem({ ca: notPem })).toEqual({ role: 'ca', message: `${notPem} holds no PEM certificate` });
    expect(problem({ cert: notPem, key: first.keyPath })).toEqual({
      role: 'cert',
      message: `${notPem} holds no PEM certificate`,
    });
  });

  it('refuses a key file that holds a certificate', () => {
    expect(problem({ cert: first.certPath, key: first.certPath })).toMatchObject({
      role: 'key',
      message: expect.stringContaining('does not hold an unencrypted PEM private key'),
    });
  });
});

describe('TlsMaterial reload', () => {
  it('applies new files once they read the same twice, and tells listeners', async () => {
    const live = tempDir();
    try {
      // Given material loaded from files in place
      const cert = path.join(live, 'tls.crt');
      const key = path.join(live, 'tls.key');
      copyFileSync(first.certPath, cert);
      copyFileSync(first.keyPath, key);
      const { log, lines } = capture();
      const material = new TlsMaterial({ cert, key }, { name: 'test', log });
      const seen: string[] = [];
      material.onReload((s) => seen.push(s.certificate!.subject));
      // When both files are replaced
      copyFileSync(second.certPath, cert);
      copyFileSync(second.keyPath, key);
      // Then the first check only notes the change, the second applies it
      await material.check();
      expect(material.snapshot.certificate?.subject).toBe('CN=first');
      await material.check();
      expect(material.snapshot.certificate?.subject).toBe('CN=second');
      expect(seen).toEqual(['CN=second']);
      expect(lines.find((l) => l.msg.startsWith('TLS certificate reloaded'))).toMatchObject({
        tls: 'test',
        subject: 'CN=second',
      });
    } finally {
      removeDir(live);
    }
  });

  it('keeps the current certificate when the new pair does not match, and logs that once', async () => {
    const live = tempDir();
    try {
      const cert = path.join(live, 'tls.crt');
      const key = path.join(live, 'tls.key');
      copyFileSync(first.certPath, cert);
      copyFileSync(first.keyPath, key);
      const { log, lines } = capture();
      const material = new TlsMaterial({ cert, key }, { name: 'test', log });
      // When only the certificate is replaced, for good
      copyFileSync(second.certPath, cert);
      for (let i = 0; i < 4; i++) await material.check();
      // Then the old pair stays in use and one error line says why
      expect(material.snapshot.certificate?.subject).toBe('CN=first');
      const refused = lines.filter((l) => l.msg.startsWith('new TLS files refused'));
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({ level: 'error', error: expect.stringContaining('does not match') });
      // And when the matching key follows, the pair is applied
      copyFileSync(second.keyPath, key);
      await material.check();
      await material.check();
      expect(material.snapshot.certificate?.subject).toBe('CN=second');
      expect(material.reloads).toBe(1);
    } finally {
      removeDir(live);
    }
  });

  it('follows a Kubernetes secret volume, where the ..data symlink is swapped to a new directory', async () => {
    const volume = tempDir();
    try {
      // Given the layout kubelet writes: tls.crt -> ..data/tls.crt, ..data -> ..2024_01_01
      const write = (version: string, cert: TestCert) => {
        const versionDir = path.join(volume, version);
        mkdirSync(versionDir);
        copyFileSync(cert.certPath, path.join(versionDir, 'tls.crt'));
        copyFileSync(cert.keyPath, path.join(versionDir, 'tls.key'));
      };
      write('..v1', first);
      symlinkSync('..v1', path.join(volume, '..data'));
      symlinkSync('..data/tls.crt', path.join(volume, 'tls.crt'));
      symlinkSync('..data/tls.key', path.join(volume, 'tls.key'));
      const { log } = capture();
      const material = new TlsMaterial(
        { cert: path.join(volume, 'tls.crt'), key: path.join(volume, 'tls.key') },
        { name: 'test', log },
      );
      // When kubelet writes a new version and renames a new ..data symlink over the old one
      write('..v2', second);
      symlinkSync('..v2', path.join(volume, '..data_tmp'));
      renameSync(path.join(volume, '..data_tmp'), path.join(volume, '..data'));
      rmSync(path.join(volume, '..v1'), { recursive: true });
      await material.check();
      await material.check();
      // Then the new certificate is in use
      expect(material.snapshot.certificate?.subject).toBe('CN=second');
    } finally {
      removeDir(volume);
    }
  });
});
