import { writeFileSync } from 'node:fs';
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
import { parseSidecarConfig, type SidecarConfig } from '../../src/config/sidecar-config.js';

// TLS, SASL and object-store encryption settings of `walproxy sidecar`: every bad one is one line
// naming its flag (the CLI prints them and exits 2, see main.test.ts).

let dir: string;
let ca: TestCa;
let server: TestCert;
let other: TestCert;
let passwordFile: string;

beforeAll(() => {
  dir = tempDir();
  ca = makeCa(dir);
  server = issueCert(ca, { cn: 'kafka-1', san: ['DNS:kafka-1.kafka-headless'] });
  other = issueCert(ca, { cn: 'other' });
  passwordFile = path.join(dir, 'password');
  writeFileSync(passwordFile, 's3cr3t\n');
});
afterAll(() => removeDir(dir));

const minimal = {
  'broker-id': '1',
  'client-listen': '0.0.0.0:9192',
  'client-upstream': '127.0.0.1:9092',
};
const replication = {
  'replication-listen': '0.0.0.0:9193',
  'replication-upstream': '127.0.0.1:9093',
  'egress-listen-base': '19000',
  'peer-address-template': 'kafka-{id}.kafka-headless:9193',
  'egress-broker-ids': ['0,2'],
};
const wal = { 'wal-store-url': 'file:///tmp/wal', 'wal-topic': ['orders'] };

function configOf(raw: Record<string, unknown>): SidecarConfig {
  const result = parseSidecarConfig(raw);
  if ('errors' in result) throw new Error(result.errors.join('\n'));
  return result.config;
}

function errorsOf(raw: Record<string, unknown>): string[] {
  const result = parseSidecarConfig(raw);
  return 'errors' in result ? result.errors : [];
}

describe('client ingress TLS', () => {
  it('takes a certificate, key and CA, with client certificates required', () => {
    const config = configOf({
      ...minimal,
      'client-tls-cert': server.certPath,
      'client-tls-key': server.keyPath,
      'client-tls-ca': ca.certPath,
      'client-tls-client-auth': 'required',
    });
    expect(config.clientTls).toEqual({
      files: { cert: server.certPath, key: server.keyPath, ca: ca.certPath },
      clientAuth: 'required',
    });
  });

  it('is off without a certificate, and client auth defaults to none', () => {
    expect(configOf(minimal).clientTls).toBeUndefined();
    expect(
      configOf({ ...minimal, 'client-tls-cert': server.certPath, 'client-tls-key': server.keyPath }).clientTls
        ?.clientAuth,
    ).toBe('none');
  });

  it('names a missing key file', () => {
    const missing = path.join(dir, 'nope.key');
    expect(errorsOf({ ...minimal, 'client-tls-cert': server.certPath, 'client-tls-key': missing })).toEqual([
      `--client-tls-key: cannot read ${missing}: ENOENT: no such file or directory, open '${missing}'`,
    ]);
  });

  it('says when the key does not match the certificate', () => {
    expect(
      errorsOf({ ...minimal, 'client-tls-cert': server.certPath, 'client-tls-key': other.keyPath }),
    ).toEqual([
      `--client-tls-key: the key in ${other.keyPath} does not match the certificate in ${server.certPath}`,
    ]);
  });

  it('names an unreadable CA bundle', () => {
    const missing = path.join(dir, 'no-ca.pem');
    expect(
      errorsOf({
        ...minimal,
        'client-tls-cert': server.certPath,
        'client-tls-key': server.keyPath,
        'client-tls-ca': missing,
      }),
    ).toEqual([
      `--client-tls-ca: cannot read ${missing}: ENOENT: no such file or directory, open '${missing}'`,
    ]);
  });

  it('refuses client auth without a CA, an unknown mode, and half a pair', () => {
    const tls = { 'client-tls-cert': server.certPath, 'client-tls-key': server.keyPath };
    expect(errorsOf({ ...minimal, ...tls, 'client-tls-client-auth': 'required' })).toEqual([
      "--client-tls-client-auth: 'required' needs --client-tls-ca (the CA that signs client certificates)",
    ]);
    expect(errorsOf({ ...minimal, ...tls, 'client-tls-client-auth': 'always' })).toEqual([
      "--client-tls-client-auth: 'always' is not none, requested, required",
    ]);
    expect(errorsOf({ ...minimal, 'client-tls-cert': server.certPath })).toEqual([
      '--client-tls-key: is required with --client-tls-cert',
    ]);
    expect(errorsOf({ ...minimal, 'client-tls-ca': ca.certPath })).toEqual([
      '--client-tls-cert: is required with --client-tls-ca (TLS needs a certificate and key)',
    ]);
  });
});

describe('replication ingress and peer TLS', () => {
  const replicationTls = () => ({
    'replication-tls-cert': server.certPath,
    'replication-tls-key': server.keyPath,
  });

  it('requires peer certificates from the CA by default, and the egress inherits the identity', () => {
    const config = configOf({
      ...minimal,
      ...replication,
      'replication-tls-cert': server.certPath,
      'replication-tls-key': server.keyPath,
      'replication-tls-ca': ca.certPath,
    });
    expect(config.replicationTls?.clientAuth).toBe('required');
    expect(config.peerTls).toEqual({
      files: { ca: ca.certPath, cert: server.certPath, key: server.keyPath },
      verifyHostname: true,
    });
  });

  it('asks for the CA that required peer certificates are checked against', () => {
    expect(errorsOf({ ...minimal, ...replication, ...replicationTls() })).toEqual([
      '--replication-tls-ca: is required: with --replication-tls-client-auth=required (the default is required) peers are verified against this CA; set --replication-tls-client-auth=none to accept any peer',
    ]);
  });

  it('the egress needs a CA to verify peers even when the ingress accepts any peer', () => {
    expect(
      errorsOf({ ...minimal, ...replication, ...replicationTls(), 'replication-tls-client-auth': 'none' }),
    ).toEqual([
      "--peer-tls-ca: is required when the egress uses TLS: the CA that signed the peers' replication ingress certificates (default: --replication-tls-ca)",
    ]);
  });

  it('takes a server-name template and CA-only verification, or no egress TLS at all', () => {
    const base = { ...minimal, ...replication, ...replicationTls(), 'replication-tls-ca': ca.certPath };
    expect(
      configOf({
        ...base,
        'peer-tls-server-name': 'kafka-{id}.kafka-headless',
        'peer-tls-verify-hostname': 'false',
      }).peerTls,
    ).toMatchObject({ serverName: 'kafka-{id}.kafka-headless', verifyHostname: false });
    expect(configOf({ ...base, 'peer-tls': 'false' }).peerTls).toBeUndefined();
  });

  it('turns egress TLS on for a sidecar without a replication ingress when a peer CA is given', () => {
    const config = configOf({
      ...minimal,
      'egress-listen-base': '19000',
      'peer-address': ['0=10.0.0.1:9193'],
      'peer-tls-ca': ca.certPath,
      'peer-tls-cert': other.certPath,
      'peer-tls-key': other.keyPath,
    });
    expect(config.peerTls?.files).toEqual({ ca: ca.certPath, cert: other.certPath, key: other.keyPath });
  });

  it('reports a bad peer key against the peer flag', () => {
    expect(
      errorsOf({
        ...minimal,
        'egress-listen-base': '19000',
        'peer-address': ['0=10.0.0.1:9193'],
        'peer-tls-ca': ca.certPath,
        'peer-tls-cert': other.certPath,
        'peer-tls-key': server.keyPath,
      }),
    ).toEqual([
      `--peer-tls-key: the key in ${server.keyPath} does not match the certificate in ${other.certPath}`,
    ]);
  });
});

describe("the sidecar's own Kafka client", () => {
  it('reads SASL credentials with the password from a file, never keeping it printable', () => {
    const config = configOf({
      ...minimal,
      ...wal,
      'metadata-sasl-mechanism': 'scram-sha-512',
      'metadata-sasl-username': 'walproxy',
      'metadata-sasl-password-file': passwordFile,
    });
    const sasl = config.wal?.metadata.sasl;
    expect(sasl?.mechanism).toBe('SCRAM-SHA-512');
    expect(sasl?.password.reveal()).toBe('s3cr3t');
    expect(JSON.stringify(config)).not.toContain('s3cr3t');
  });

  it('refuses an unknown mechanism, and a mechanism without user or password file', () => {
    expect(errorsOf({ ...minimal, 'metadata-sasl-mechanism': 'GSSAPI' })).toEqual([
      "--metadata-sasl-mechanism: 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
    ]);
    expect(errorsOf({ ...minimal, 'metadata-sasl-mechanism': 'PLAIN' })).toEqual([
      '--metadata-sasl-username: is required with --metadata-sasl-mechanism',
      '--metadata-sasl-password-file: is required with --metadata-sasl-mechanism (a file, so the password is never on a command line)',
    ]);
    expect(errorsOf({ ...minimal, 'metadata-sasl-username': 'walproxy' })).toEqual([
      '--metadata-sasl-mechanism: is required with --metadata-sasl-username',
    ]);
  });

  it('names an unreadable or empty password file', () => {
    const missing = path.join(dir, 'no-password');
    const empty = path.join(dir, 'empty-password');
    writeFileSync(empty, '\n');
    const sasl = { 'metadata-sasl-mechanism': 'PLAIN', 'metadata-sasl-username': 'walproxy' };
    expect(errorsOf({ ...minimal, ...sasl, 'metadata-sasl-password-file': missing })).toEqual([
      `--metadata-sasl-password-file: cannot read ${missing}: ENOENT: no such file or directory, open '${missing}'`,
    ]);
    expect(errorsOf({ ...minimal, ...sasl, 'metadata-sasl-password-file': empty })).toEqual([
      `--metadata-sasl-password-file: ${empty} is empty`,
    ]);
  });

  it('uses TLS when the client ingress does, and then needs a bootstrap by a certificate name', () => {
    const clientTls = { 'client-tls-cert': server.certPath, 'client-tls-key': server.keyPath };
    expect(errorsOf({ ...minimal, ...wal, ...clientTls })).toEqual([
      "--metadata-bootstrap: is required when the sidecar's own client uses TLS (--metadata-tls): a client ingress by a name in its certificate, e.g. kafka-0.kafka-headless:9192",
    ]);
    const config = configOf({
      ...minimal,
      ...wal,
      ...clientTls,
      'metadata-bootstrap': ['kafka-1.kafka-headless:9192'],
      'metadata-tls-ca': ca.certPath,
    });
    expect(config.wal?.metadata).toMatchObject({
      bootstrap: ['kafka-1.kafka-headless:9192'],
      tls: { files: { ca: ca.certPath } },
    });
    expect(configOf({ ...minimal, ...wal }).wal?.metadata.tls).toBeUndefined();
  });
});

describe('object-store encryption', () => {
  it('passes SSE settings to the store', () => {
    expect(
      configOf({ ...minimal, ...wal, 's3-sse': 'aws:kms', 's3-sse-kms-key-id': 'alias/walproxy' }).wal
        ?.storeOptions,
    ).toMatchObject({ serverSideEncryption: 'aws:kms', sseKmsKeyId: 'alias/walproxy' });
    expect(configOf({ ...minimal, ...wal }).wal?.storeOptions.serverSideEncryption).toBeUndefined();
  });

  it('refuses an unknown algorithm, a key id without KMS, and KMS on a directory bucket without a key', () => {
    expect(errorsOf({ ...minimal, ...wal, 's3-sse': 'aes' })).toEqual([
      "--s3-sse: 'aes' is not none, AES256 or aws:kms",
    ]);
    expect(errorsOf({ ...minimal, ...wal, 's3-sse': 'AES256', 's3-sse-kms-key-id': 'k' })).toEqual([
      '--s3-sse-kms-key-id: is used only with --s3-sse=aws:kms',
    ]);
    expect(
      errorsOf({ ...minimal, ...wal, 'wal-store-url': 's3://wal--use1-az4--x-s3/p', 's3-sse': 'aws:kms' }),
    ).toEqual([
      "--s3-sse-kms-key-id: is required with --s3-sse=aws:kms on directory bucket wal--use1-az4--x-s3: S3 Express One Zone takes only the key of the bucket's default encryption, named explicitly",
    ]);
  });
});

it('reports every bad security setting at once, one line each', () => {
  expect(
    errorsOf({
      ...minimal,
      ...wal,
      'client-tls-cert': server.certPath,
      'client-tls-key': other.keyPath,
      'metadata-sasl-mechanism': 'KERBEROS',
      's3-sse': 'rot13',
    }),
  ).toEqual([
    `--client-tls-key: the key in ${other.keyPath} does not match the certificate in ${server.certPath}`,
    "--metadata-sasl-mechanism: 'KERBEROS' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
    "--s3-sse: 'rot13' is not none, AES256 or aws:kms",
  ]);
});
