// Test certificates, made at test time with the openssl CLI (never checked in, so none expires in
// the repository). For the proxy's unit tests and the e2e scenarios that need TLS:
//
//   const dir = tempDir();                       // remove it with removeDir(dir) when done
//   const ca = makeCa(dir);                      // a self-signed CA
//   const server = issueCert(ca, { cn: 'kafka-1', san: ['DNS:localhost', 'IP:127.0.0.1'] });
//   const client = issueCert(ca, { cn: 'sidecar-0' });
//   const old = issueCert(ca, { cn: 'kafka-1', expired: true });
//
// Every certificate is ECDSA P-256 (fast to make) and carries both serverAuth and clientAuth
// extended key usage, like a cert-manager Certificate with usages [server auth, client auth]:
// a sidecar presents the same certificate as a replication-ingress server and as an egress client.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A certificate and its private key: PEM text and the files holding it. */
export interface TestCert {
  cert: string;
  key: string;
  certPath: string;
  keyPath: string;
}

export interface TestCa extends TestCert {
  /** Directory the CA issues into. */
  dir: string;
  name: string;
}

export interface IssueOptions {
  /** Subject common name. */
  cn: string;
  /** subjectAltName entries as openssl writes them: `DNS:kafka-1.kafka-headless`, `IP:127.0.0.1`. */
  san?: string[];
  /** Valid for a day that ended before now (notBefore and notAfter both in the past). */
  expired?: boolean;
  /** File name stem in the CA's directory; default: the common name. */
  name?: string;
}

let serial = Date.now();

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

export function tempDir(prefix = 'walproxy-tls-'): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** A self-signed CA valid for 30 days, as `<name>.crt` / `<name>.key` in `dir`. */
export function makeCa(dir: string, name = 'test-ca'): TestCa {
  const certPath = path.join(dir, `${name}.crt`);
  const keyPath = path.join(dir, `${name}.key`);
  openssl(
    [
      'req',
      '-x509',
      ...EC_KEY,
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-subj',
      `/CN=${name}`,
      '-days',
      '30',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  return {
    dir,
    name,
    certPath,
    keyPath,
    cert: readFileSync(certPath, 'utf8'),
    key: readFileSync(keyPath, 'utf8'),
  };
}

/** A leaf certificate signed by `ca`, as `<name>.crt` / `<name>.key` in the CA's directory. */
export function issueCert(ca: TestCa, options: IssueOptions): TestCert {
  const name = options.name ?? options.cn;
  const certPath = path.join(ca.dir, `${name}.crt`);
  const keyPath = path.join(ca.dir, `${name}.key`);
  const csrPath = path.join(ca.dir, `${name}.csr`);
  const extPath = path.join(ca.dir, `${name}.ext`);
  openssl(['req', ...EC_KEY, '-keyout', keyPath, '-out', csrPath, '-subj', `/CN=${options.cn}`], ca.dir);
  const ext = [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=serverAuth,clientAuth',
  ];
  if (options.san && options.san.length > 0) ext.push(`subjectAltName=${options.san.join(',')}`);
  writeFileSync(extPath, `${ext.join('\n')}\n`);
  serial++;
  if (options.expired) {
    // `openssl ca` is the one 3.0 command that takes explicit validity dates: a day in 2020.
    const caDir = path.join(ca.dir, `.${name}-ca`);
    rmSync(caDir, { recursive: true, force: true });
    mkdirSync(caDir, { recursive: true });
    writeFileSync(path.join(caDir, 'index.txt'), '');
    writeFileSync(path.join(caDir, 'serial'), `${serial.toString(16).padStart(16, '0')}\n`);
    const config = path.join(caDir, 'ca.cnf');
    writeFileSync(
      config,
      [
        '[ca]',
        'default_ca = test',
        '[test]',
        `database = ${path.join(caDir, 'index.txt')}`,
        `new_certs_dir = ${caDir}`,
        `serial = ${path.join(caDir, 'serial')}`,
        'default_md = sha256',
        'policy = any',
        'unique_subject = no',
        '[any]',
        'commonName = supplied',
        '',
      ].join('\n'),
    );
    openssl(
      [
        'ca',
        '-batch',
        '-notext',
        '-config',
        config,
        '-cert',
        ca.certPath,
        '-keyfile',
        ca.keyPath,
        '-in',
        csrPath,
        '-out',
        certPath,
        '-startdate',
        '20200101000000Z',
        '-enddate',
        '20200102000000Z',
        '-extfile',
        extPath,
      ],
      ca.dir,
    );
  } else {
    openssl(
      [
        'x509',
        '-req',
        '-in',
        csrPath,
        '-CA',
        ca.certPath,
        '-CAkey',
        ca.keyPath,
        '-set_serial',
        String(serial),
        '-days',
        '30',
        '-extfile',
        extPath,
        '-out',
        certPath,
      ],
      ca.dir,
    );
  }
  return { certPath, keyPath, cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') };
}
