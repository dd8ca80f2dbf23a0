import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCert, makeCa, removeDir, tempDir } from '../../e2e/src/tls/certs.js';
import {
  find,
  type K8sObject,
  parseLikeWalproxy,
  renderChart,
  schemaErrors,
  unknownFieldErrors,
} from './chart.js';

// The chart's TLS, SASL and object-store encryption values: what they mount, which flags they
// give walproxy, and that walproxy accepts those flags with real files at the mounted paths.

const SECRETS = '/var/run/secrets/walproxy';
const SECURE = [
  'walproxy.wal.storeUrl=s3://bucket/prefix',
  'walproxy.wal.topics={orders}',
  'walproxy.wal.sse=aws:kms',
  'walproxy.wal.sseKmsKeyId=alias/walproxy',
  'walproxy.tls.client.secretName=kafka-client-tls',
  'walproxy.tls.client.clientAuth=required',
  'walproxy.tls.replication.secretName=kafka-peer-tls',
  'walproxy.sasl.mechanism=SCRAM-SHA-512',
  'walproxy.sasl.username=walproxy',
  'walproxy.sasl.passwordSecret.name=walproxy-sasl',
];

function sidecar(objects: K8sObject[]) {
  const sts = find(objects, 'StatefulSet', 'kafka-walproxy-broker');
  const spec = sts.spec.template.spec;
  const container = [...spec.initContainers, ...spec.containers].find(
    (c: { name: string }) => c.name === 'walproxy',
  );
  return { spec, container, args: container.args as string[] };
}

describe('chart security values', () => {
  const objects = renderChart({ set: SECURE });
  let files: string;

  beforeAll(() => {
    // The secrets as the kubelet mounts them, with certificates made now.
    files = tempDir();
    const ca = makeCa(files);
    const cert = issueCert(ca, {
      cn: 'kafka',
      san: ['DNS:*.kafka-walproxy-broker-headless.streaming.svc.cluster.local'],
    });
    for (const dir of ['client-tls', 'replication-tls', 'sasl']) mkdirSync(path.join(files, dir));
    for (const dir of ['client-tls', 'replication-tls']) {
      copyFileSync(cert.certPath, path.join(files, dir, 'tls.crt'));
      copyFileSync(cert.keyPath, path.join(files, dir, 'tls.key'));
      copyFileSync(ca.certPath, path.join(files, dir, 'ca.crt'));
    }
    writeFileSync(path.join(files, 'sasl', 'password'), 'secret\n');
  });
  afterAll(() => removeDir(files));

  it('renders valid objects', async () => {
    expect(await schemaErrors(objects)).toEqual([]);
    expect(unknownFieldErrors(objects)).toEqual([]);
  });

  it('mounts each secret read-only into the sidecar only', () => {
    const { spec, container } = sidecar(objects);
    const volumes = Object.fromEntries(spec.volumes.map((v: { name: string }) => [v.name, v]));
    expect(volumes['walproxy-client-tls'].secret).toMatchObject({ secretName: 'kafka-client-tls' });
    expect(volumes['walproxy-replication-tls'].secret).toMatchObject({ secretName: 'kafka-peer-tls' });
    expect(volumes['walproxy-sasl'].secret).toMatchObject({
      secretName: 'walproxy-sasl',
      items: [{ key: 'password', path: 'password' }],
    });
    const mounts = Object.fromEntries(
      container.volumeMounts.map((m: { name: string; mountPath: string; readOnly: boolean }) => [
        m.name,
        `${m.mountPath} ${m.readOnly}`,
      ]),
    );
    expect(mounts).toMatchObject({
      'walproxy-client-tls': `${SECRETS}/client-tls true`,
      'walproxy-replication-tls': `${SECRETS}/replication-tls true`,
      'walproxy-sasl': `${SECRETS}/sasl true`,
    });
    const kafka = spec.containers.find((c: { name: string }) => c.name === 'kafka');
    expect(JSON.stringify(kafka.volumeMounts)).not.toContain('walproxy-');
  });

  it('gives walproxy flags it accepts', async () => {
    const { args } = sidecar(objects);
    expect(args).toEqual(
      expect.arrayContaining([
        '--s3-sse=aws:kms',
        '--s3-sse-kms-key-id=alias/walproxy',
        '--client-tls-client-auth=required',
        '--replication-tls-client-auth=required',
        `--metadata-sasl-password-file=${SECRETS}/sasl/password`,
        '--metadata-bootstrap=$(POD_NAME).kafka-walproxy-broker-headless.streaming.svc.cluster.local:9192',
      ]),
    );
    // As the kubelet expands $(POD_NAME) and the start script adds the pod's own flags.
    const argv = [
      'sidecar',
      '--broker-id=0',
      ...args.map((a) => a.replaceAll(SECRETS, files).replaceAll('$(POD_NAME)', 'kafka-walproxy-broker-0')),
      '--wal-store-url=file:///tmp/wal',
    ];
    expect(await parseLikeWalproxy(argv)).toEqual([]);
  });

  it('adds nothing when the values are off (the default)', () => {
    const { args, spec } = sidecar(renderChart());
    expect(args.filter((a) => /tls|sasl|sse/.test(a))).toEqual([]);
    expect(spec.volumes.map((v: { name: string }) => v.name)).not.toContain('walproxy-client-tls');
  });

  it('refuses unknown modes with one line naming the value', () => {
    expect(() => renderChart({ set: ['walproxy.wal.sse=aes'] })).toThrow(
      /walproxy.wal.sse must be none, AES256/,
    );
    expect(() => renderChart({ set: ['walproxy.tls.client.clientAuth=always'] })).toThrow(
      /walproxy.tls.client.clientAuth must be none, requested or required/,
    );
    expect(() => renderChart({ set: ['walproxy.sasl.mechanism=GSSAPI'] })).toThrow(
      /walproxy.sasl.mechanism must be PLAIN/,
    );
    expect(() => renderChart({ set: ['walproxy.sasl.mechanism=PLAIN'] })).toThrow(
      /needs walproxy.sasl.username and walproxy.sasl.passwordSecret.name/,
    );
  });
});
