import { spawnSync } from 'node:child_process';
import { copyFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { openObjectStore, Secret, saslAuthenticate } from '@walproxy/proxy';
import {
  ApiKey,
  CRC_START,
  crc32c,
  decodeProduceResponse,
  decodeResponseHeader,
  encodeProduceRequest,
  encodeRequestHeader,
  parseWalObject,
  responseHeaderVersion,
} from '@walproxy/shared';
import { AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerPerf, producerPerf } from '../src/clients/java-tools.js';
import { createTopic, withAdmin } from '../src/clients/kafkajs.js';
import { kcat, kcatReadAtLeast } from '../src/clients/kcat.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { sidecarEntry } from '../src/cluster/paths.js';
import {
  javaClientProps,
  kcatSecurityArgs,
  scramFormatArgs,
  secureBrokerProperties,
  secureSidecarArgs,
  USERS,
} from '../src/cluster/security-settings.js';
import { walSidecarEnv } from '../src/cluster/wal-settings.js';
import { type ZonePorts, zoneSidecarFlags } from '../src/cluster/zone-flags.js';
import { type MotoServer, startMoto } from '../src/s3/moto.js';
import { issueCert, makeCa, removeDir, type TestCa, tempDir } from '../src/tls/certs.js';
import { compareReplicas, readPartitionLog } from '../src/wal/inspect.js';

/**
 * Security through the sidecars on a real cluster (issue #8): clients on SASL_SSL with
 * SCRAM-SHA-512, the broker authenticating and authorizing them behind the sidecars' TLS, brokers
 * replicating over SASL through sidecars that talk mutual TLS, WAL topics replicated by reference.
 * A cluster of its own: its listeners differ from the shared cluster's.
 */

/** Debian's kcat on a librdkafka that can do SCRAM with Kafka 4.x (kcat.ts says why). */
const SCRAM_KCAT = { librdkafka: 'current' } as const;

/** moto records the key id without checking it against its KMS; enough to see the header sent. */
const KMS_KEY = 'arn:aws:kms:us-east-1:123456789012:alias/walproxy-e2e';

let dir: string;
let clientCa: TestCa;
let peerCa: TestCa;
let moto: MotoServer;
let cluster: KafkaCluster;
let failed = false;

const serverCertPath = (id: number) => path.join(dir, `client-ingress-${id}.crt`);

/**
 * Zone-local routing in this single-namespace layout: every sidecar's zone listeners on a
 * loopback address of its own, 127.0.N.10 (Linux routes all of 127/8 to lo), so that their
 * ports, equal for every sidecar as zone routing needs, do not collide. The zone egresses and the
 * zone bootstrap terminate the clients' TLS; zone ingress and egress talk mutual TLS with the
 * peer certificates, as the replication path does.
 */
const zoneHost = (id: number) => `127.0.${id}.10`;
/** The zone listeners' ports, above the cluster's own (its port base). */
const zonePorts = (base: number): ZonePorts => ({
  egressBase: base + 80,
  ingress: base + 90,
  bootstrap: base + 91,
});

const serverKeyPath = (id: number) => path.join(dir, `client-ingress-${id}.key`);

beforeAll(async () => {
  dir = tempDir('walproxy-security-');
  clientCa = makeCa(dir, 'client-ca');
  peerCa = makeCa(dir, 'peer-ca');
  for (const id of BROKER_IDS) {
    // Each sidecar's client-ingress certificate in files of its own, so one can be rotated alone.
    // The zone listeners of sidecar N are on 127.0.N.10 (zoneHost): client-facing ones carry the
    // client-ingress certificate, the zone ingress the peer one.
    const server = issueCert(clientCa, {
      cn: `kafka-${id}`,
      san: ['IP:127.0.0.1', 'DNS:localhost', `IP:${zoneHost(id)}`],
    });
    copyFileSync(server.certPath, serverCertPath(id));
    copyFileSync(server.keyPath, serverKeyPath(id));
    issueCert(peerCa, {
      cn: `sidecar-${id}`,
      san: ['IP:127.0.0.1', `IP:${zoneHost(id)}`],
      name: `peer-${id}`,
    });
  }
  moto = await startMoto();
  await moto.createBucket('walproxy-security');
  cluster = await KafkaCluster.start({
    // Started below, once the ACLs they need exist.
    sidecars: 'external',
    formatArgs: scramFormatArgs(),
    brokerProperties: secureBrokerProperties(),
    sidecarEnv: walSidecarEnv(),
    sidecarArgs: (id) => [
      '--wal-store-url=s3://walproxy-security/wal',
      `--s3-endpoint=${moto.endpoint}`,
      '--s3-force-path-style=true',
      '--wal-topic=wal-*',
      // Through the WAL whatever its objects cost (the sealing policy would keep small runs inline).
      '--topic-config=wal-*:mode=wal',
      '--topic-config=wal-sec-zl*:zone.local=true',
      '--topic-config=wal-zl-*:zone.local=true',
      ...zoneSidecarFlags(id, zoneHost, zonePorts(cluster.ports.base)),
      '--s3-sse=aws:kms',
      `--s3-sse-kms-key-id=${KMS_KEY}`,
      ...secureSidecarArgs(
        {
          serverCert: serverCertPath(id),
          serverKey: serverKeyPath(id),
          clientCa: clientCa.certPath,
          peerCert: path.join(peerCa.dir, `peer-${id}.crt`),
          peerKey: path.join(peerCa.dir, `peer-${id}.key`),
          peerCa: peerCa.certPath,
        },
        dir,
        `127.0.0.1:${cluster.ports.sidecarClient(id)}`,
      ),
    ],
  });
  // ACLs through the harness's PLAINTEXT DIRECT listener (its principal is a super user here).
  await withAdmin(cluster.directBootstrap(), (admin) =>
    admin.createAcls({
      acl: [
        acl(AclResourceTypes.TOPIC, 'wal-sec', ResourcePatternTypes.PREFIXED, 'User:alice'),
        acl(AclResourceTypes.GROUP, '*', ResourcePatternTypes.LITERAL, 'User:alice'),
        acl(
          AclResourceTypes.TOPIC,
          '__remote_wal_log_metadata',
          ResourcePatternTypes.LITERAL,
          'User:walproxy',
        ),
        acl(
          AclResourceTypes.TOPIC,
          '*',
          ResourcePatternTypes.LITERAL,
          'User:walproxy',
          AclOperationTypes.DESCRIBE,
        ),
      ],
    }),
  );
  for (const id of BROKER_IDS) await cluster.startSidecar(id);
}, 240_000);

afterAll(async () => {
  await cluster?.stop({ keepLogs: failed || process.env.WALPROXY_KEEP_LOGS === '1' });
  await moto?.stop();
  removeDir(dir);
}, 60_000);

function acl(
  resourceType: AclResourceTypes,
  resourceName: string,
  resourcePatternType: ResourcePatternTypes,
  principal: string,
  operation = AclOperationTypes.ALL,
) {
  return {
    resourceType,
    resourceName,
    resourcePatternType,
    principal,
    host: '*',
    operation,
    permissionType: AclPermissionTypes.ALLOW,
  };
}

function referencesSent(counters: Array<{ wal?: { fetchStrip?: Record<string, unknown> } }>): number {
  return counters.reduce((n, c) => n + Number(c.wal?.fetchStrip?.referencesSent ?? 0), 0);
}

describe('TLS and SASL through the sidecars', () => {
  it('carries SASL_SSL + SCRAM-SHA-512 clients (Java tools, kcat), and replicates WAL topics by reference over SASL', async () => {
    failed = true;
    const bootstrap = cluster.bootstrap();
    const alice = javaClientProps('alice', clientCa.certPath);
    await createTopic(cluster.directBootstrap(), 'wal-sec-java', { partitions: 3 });
    await createTopic(cluster.directBootstrap(), 'wal-sec-kcat', { partitions: 3 });
    const before = referencesSent(await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id))));

    // Given the Java perf producer and kcat, as alice over SASL_SSL
    const produced = await producerPerf({
      bootstrap,
      topic: 'wal-sec-java',
      records: 60_000,
      recordSize: 512,
      props: { ...alice, 'linger.ms': 5 },
    });
    expect(produced.records).toBe(60_000);
    const lines = Array.from({ length: 2_000 }, (_, i) => `sec-${i}`).join('\n');
    const sent = await kcat(
      [
        '-b',
        bootstrap,
        ...kcatSecurityArgs('alice', clientCa.certPath),
        '-t',
        'wal-sec-kcat',
        '-P',
        '-X',
        'acks=all',
      ],
      `${lines}\n`,
      SCRAM_KCAT,
    );
    expect(sent.code, sent.stderr).toBe(0);

    // Then consumers read everything back through the sidecars
    const consumed = await consumerPerf({ bootstrap, topic: 'wal-sec-java', records: 60_000, props: alice });
    expect(consumed.records).toBe(60_000);
    const read = await kcat(
      [
        '-b',
        bootstrap,
        ...kcatSecurityArgs('alice', clientCa.certPath),
        '-t',
        'wal-sec-kcat',
        '-C',
        '-e',
        '-o',
        'beginning',
        '-f',
        '%s\\n',
      ],
      '',
      SCRAM_KCAT,
    );
    expect(read.code, read.stderr).toBe(0);
    expect(read.stdout.trim().split('\n').sort()).toEqual(lines.split('\n').sort());

    // And followers, authenticating as admin on the SASL inter-broker listener through mutual-TLS
    // sidecars, replicated by reference: every replica byte-identical to its leader
    expect(await compareReplicas(cluster.workDirDataDirs(), 'wal-sec-java', 3)).toEqual([]);
    // (kcat's lines have no key: librdkafka's sticky partitioner may put all 2,000 in one
    // partition, so the others may rightly be empty on every replica)
    expect(await compareReplicas(cluster.workDirDataDirs(), 'wal-sec-kcat', 3, { mayBeEmpty: true })).toEqual(
      [],
    );
    const after = referencesSent(await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id))));
    expect(after).toBeGreaterThan(before);

    // And the WAL objects were stored with the server-side encryption asked for (--s3-sse)
    const s3 = new S3Client({
      endpoint: moto.endpoint,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'walproxy-security', Prefix: 'wal/' }));
    const keys = (listed.Contents ?? []).map((o) => o.Key!).filter((k) => k.endsWith('.wal'));
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys.slice(0, 5)) {
      const head = await s3.send(new HeadObjectCommand({ Bucket: 'walproxy-security', Key: key }));
      expect([head.ServerSideEncryption, head.SSEKMSKeyId], key).toEqual(['aws:kms', KMS_KEY]);
    }
    s3.destroy();
    failed = false;
  });

  it('lets the broker refuse a wrong password, and keeps serving everyone else', async () => {
    failed = true;
    const bootstrap = cluster.bootstrap();
    const wrong = await kcat(
      [
        '-b',
        bootstrap,
        ...kcatSecurityArgs('alice', clientCa.certPath, 'not-her-password'),
        '-L',
        '-m',
        '10',
      ],
      '',
      { ...SCRAM_KCAT, timeoutMs: 60_000 },
    );
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/Authentication failed/i);
    const right = await kcat(
      ['-b', bootstrap, ...kcatSecurityArgs('alice', clientCa.certPath), '-L', '-m', '10'],
      '',
      SCRAM_KCAT,
    );
    expect(right.code, right.stderr).toBe(0);
    failed = false;
  });

  it('returns the authorization error for a produce an ACL denies, and nothing of it reaches any replica or the bucket', async () => {
    failed = true;
    await createTopic(cluster.directBootstrap(), 'wal-denied', { partitions: 1 });
    await createTopic(cluster.directBootstrap(), 'wal-sec-direct', { partitions: 1 });
    // Given alice through the client ingresses (the direct path), denied write on wal-denied
    const denied = await produceThrough(cluster.bootstrap(), 'wal-denied', lines('denied-direct', 50));
    expect(denied.stderr).toMatch(/Topic authorization failed/i);
    // And, as a control that the bucket check sees stored records, a produce she may make
    const allowed = await produceThrough(cluster.bootstrap(), 'wal-sec-direct', lines('allowed-direct', 50));
    expect(allowed.code, allowed.stderr).toBe(0);
    // The leader's log, and so every follower's, holds nothing: there was nothing to reference.
    const offsets = await withAdmin(cluster.directBootstrap(), (admin) =>
      admin.fetchTopicOffsets('wal-denied'),
    );
    expect(offsets.map((o) => o.high)).toEqual(['0']);
    for (const id of BROKER_IDS) expect(readPartitionLog(cluster.dataDir(id), 'wal-denied', 0)).toEqual([]);
    // And the bucket holds the allowed records, none of the denied ones
    await uploadsSettled();
    expect(await storedBatchesWith('allowed-direct')).not.toEqual([]);
    expect(await storedBatchesWith('denied-direct')).toEqual([]);
    expect(await walTopicsSince(new Date(0))).not.toContain('wal-denied');
    failed = false;
  });

  it('gives a zone-local producer denied write TOPIC_AUTHORIZATION_FAILED, storing nothing and appending nothing; an allowed one goes by reference', async () => {
    failed = true;
    const started = new Date(Date.now() - 1_000);
    await createTopic(cluster.directBootstrap(), 'wal-zl-denied', { partitions: 3 });
    await createTopic(cluster.directBootstrap(), 'wal-denied-zone', { partitions: 1 });
    await createTopic(cluster.directBootstrap(), 'wal-sec-zl', { partitions: 3 });
    // alice, SASL_SSL through zone-a's sidecar (zone bootstrap, zone egresses, mutual TLS to the leaders' zone ingresses)
    const zoneBootstrap = `${zoneHost(1)}:${zonePorts(cluster.ports.base).bootstrap}`;
    const produceAs = (topic: string, text: string, partition?: number) =>
      kcat(
        [
          '-b',
          zoneBootstrap,
          ...kcatSecurityArgs('alice', clientCa.certPath),
          '-t',
          topic,
          ...(partition === undefined ? [] : ['-p', String(partition)]),
          '-P',
          '-X',
          'acks=all',
          '-X',
          'message.timeout.ms=15000',
          // Uncompressed, so that the bucket checks find the records' bytes
          '-X',
          'compression.codec=none',
        ],
        text,
        { ...SCRAM_KCAT, timeoutMs: 60_000 },
      );
    const referenced = async () =>
      (await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id)))).reduce(
        (n, c) =>
          n +
          Number(
            (c as unknown as { zone: { produce: { references: { batchesReferenced: number } } } }).zone
              .produce.references.batchesReferenced,
          ),
        0,
      );
    const before = await referenced();

    // When alice produces to a topic her ACLs do not cover, zone-local and not (wal-denied),
    // through zone-a's zone egresses: towards its own broker and towards the other zones' leaders
    const denied = await produceAs('wal-zl-denied', lines('denied-zone-local', 200).join('\n'));
    const deniedBytes = await produceThrough(
      zoneBootstrap,
      'wal-denied-zone',
      lines('denied-zone-bytes', 50),
    );
    // Then the broker refuses her exactly as on a direct connection
    expect(denied.stderr).toMatch(/Topic authorization failed/i);
    expect(deniedBytes.stderr).toMatch(/Topic authorization failed/i);
    // And no replica holds any of it, no reference was sent, and no WAL object holds any of it
    for (const id of BROKER_IDS) {
      for (const p of [0, 1, 2])
        expect(readPartitionLog(cluster.dataDir(id), 'wal-zl-denied', p)).toEqual([]);
      expect(readPartitionLog(cluster.dataDir(id), 'wal-denied-zone', 0)).toEqual([]);
    }
    expect(await referenced()).toBe(before);
    await uploadsSettled();
    expect(await walTopicsSince(started)).not.toContain('wal-zl-denied');
    expect(await storedBatchesWith('denied-zone-local')).toEqual([]);
    expect(await storedBatchesWith('denied-zone-bytes')).toEqual([]);

    // And to a topic she may write, twice (two connections, the same principal), her batches go by
    // reference and are read back. To a partition led outside zone-a: a keyless kcat sticks to
    // one partition per batch, and a batch for zone-a's own leader rightly goes as bytes (no zone
    // to cross), so a run that stuck to broker 1's partitions sent no reference at all.
    const metadata = await withAdmin(cluster.directBootstrap(), (admin) =>
      admin.fetchTopicMetadata({ topics: ['wal-sec-zl'] }),
    );
    const elsewhere = metadata.topics[0]!.partitions.find((p) => p.leader !== 1);
    expect(elsewhere, 'a partition of wal-sec-zl led outside zone-a').toBeDefined();
    const records = Array.from({ length: 3_000 }, (_, i) => `zl-${i}-${'x'.repeat(200)}`);
    for (const half of [records.slice(0, 1_500), records.slice(1_500)]) {
      const sent = await produceAs('wal-sec-zl', `${half.join('\n')}\n`, elsewhere!.partitionId);
      expect(sent.code, sent.stderr).toBe(0);
    }
    expect(await referenced()).toBeGreaterThan(before);
    // (the control: the store check above sees records that are stored, by reference too)
    await uploadsSettled();
    expect(await storedBatchesWith('zl-1499-')).not.toEqual([]);
    // Read back through the zone listener: the consumer is sent to its zone's replica (preferred
    // read replica), whose high watermark trails the leader's by a follower fetch, so a read to the
    // end right after the acknowledgement may stop before a partition's newest batch: read again
    // until every line is there (kcatReadAtLeast, bounded); nothing missing stays missing.
    const read = await kcatReadAtLeast(
      [
        '-b',
        zoneBootstrap,
        ...kcatSecurityArgs('alice', clientCa.certPath),
        '-t',
        'wal-sec-zl',
        '-C',
        '-e',
        '-o',
        'beginning',
        '-q',
        '-f',
        '%s\\n',
      ],
      records.length,
      SCRAM_KCAT,
    );
    expect(read.code, read.stderr).toBe(0);
    expect(read.stdout.trim().split('\n').sort()).toEqual([...records].sort());
    // (keyless kcat lines, sticky partitioner: a partition may rightly be empty on every replica)
    expect(await compareReplicas(cluster.workDirDataDirs(), 'wal-sec-zl', 3, { mayBeEmpty: true })).toEqual(
      [],
    );
    failed = false;
  });

  it('neither stores nor appends a Produce pipelined behind a SCRAM login with a wrong password (zone-local produce)', async () => {
    failed = true;
    const topic = 'wal-sec-zl-login';
    await createTopic(cluster.directBootstrap(), topic, { partitions: 3 });
    // A partition whose leader is in another zone than sidecar 1's (zone-a): its zone egress for
    // that leader stores zone-local batches in the bucket and forwards references
    const metadata = await withAdmin(cluster.directBootstrap(), (admin) =>
      admin.fetchTopicMetadata({ topics: [topic] }),
    );
    const target = metadata.topics[0]!.partitions.find((p) => p.leader !== 1);
    expect(target, 'a partition led outside zone-a').toBeDefined();
    const { partitionId: partition, leader } = target!;
    const zoneBootstrap = `${zoneHost(1)}:${zonePorts(cluster.ports.base).bootstrap}`;
    const egress = { host: zoneHost(1), port: zonePorts(cluster.ports.base).egressBase + leader };

    // Given that leader accepted alice's produce of the topic through zone-a's sidecar (her first
    // request goes as bytes; from its answer on, her batches of the topic go by reference)
    const warmUp = await produceThrough(zoneBootstrap, topic, lines('login-warm-up', 20), partition);
    expect(warmUp.code, warmUp.stderr).toBe(0);
    const referencedBefore = await batchesReferenced(1);

    // When a client that knows her name but not her password logs in as alice at zone-a's zone
    // egress for that leader, and pipelines a Produce behind its SCRAM client-final message
    const denied = await produceBehindLogin(egress, 'not-her-password', topic, partition, 'login-denied');
    // Then the broker refuses the login and closes the connection, never answering the Produce
    expect(denied.login).toMatch(/SASL_AUTHENTICATION_FAILED/);
    expect(denied.produce).toBe('closed');

    // And, as the control, alice's own login with a Produce pipelined the same way is appended and
    // stored by reference
    const allowed = await produceBehindLogin(egress, USERS.alice, topic, partition, 'login-allowed');
    expect(allowed.login).toBe('accepted');
    expect(allowed.produce).toBe(0);
    expect(await batchesReferenced(1)).toBeGreaterThan(referencedBefore);

    // And nothing of the refused login's Produce is in the bucket or in any replica's log
    await uploadsSettled();
    expect(await storedBatchesWith('login-allowed')).not.toEqual([]);
    expect(await storedBatchesWith('login-denied')).toEqual([]);
    const logged = (marker: string) =>
      BROKER_IDS.filter((id) =>
        readPartitionLog(cluster.dataDir(id), topic, partition).some(({ batch }) =>
          batch.bytes().includes(marker),
        ),
      );
    expect(logged('login-allowed')).toEqual([...BROKER_IDS]);
    expect(logged('login-denied')).toEqual([]);
    failed = false;
  });

  it('refuses at the TLS handshake a peer without a certificate from the peer CA, with a clear log line', async () => {
    failed = true;
    const rogueCa = makeCa(dir, 'rogue-ca');
    const rogue = issueCert(rogueCa, { cn: 'sidecar-9', san: ['IP:127.0.0.1'] });
    const expired = issueCert(peerCa, { cn: 'sidecar-8', san: ['IP:127.0.0.1'], expired: true });
    const port = cluster.ports.sidecarReplication(1);
    const sidecar = cluster.sidecars.get(1)!;
    const cases: Array<{ name: string; cert?: { cert: string; key: string }; reason: RegExp }> = [
      { name: 'no certificate', reason: /did not return a certificate/ },
      { name: 'another CA', cert: rogue, reason: /unable to verify/ },
      { name: 'expired', cert: expired, reason: /certificate has expired/ },
    ];
    for (const c of cases) {
      const outcome = await tryReplicationIngress(port, peerCa.cert, c.cert);
      // Nothing came back: the broker's inter-broker listener was never reached.
      expect(outcome.answered, c.name).toBe(false);
      // And the sidecar said why, naming the peer
      const logged = (line: string) =>
        line.includes('TLS client refused') &&
        c.reason.test(line) &&
        (outcome.localPort < 0 || line.includes(`:${outcome.localPort}"`));
      const deadline = Date.now() + 10_000;
      while (!sidecar.output().split('\n').some(logged) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 200));
      expect(sidecar.output().split('\n').some(logged), `${c.name}: ${sidecar.output().slice(-1500)}`).toBe(
        true,
      );
    }
    // And a peer with a certificate from the peer CA is served
    const good = issueCert(peerCa, { cn: 'sidecar-6', san: ['IP:127.0.0.1'] });
    expect((await tryReplicationIngress(port, peerCa.cert, good)).answered).toBe(true);
    failed = false;
  });

  it('picks up a rotated client-ingress certificate without a restart, keeping established connections', async () => {
    failed = true;
    const port = cluster.ports.sidecarClient(2);
    const established = await openTls(port, clientCa.cert);
    const oldSerial = established.getPeerCertificate().serialNumber;
    expect(await apiVersionsAnswered(established)).toBe(true);

    // When the certificate files are replaced (a new issuance by the same CA)
    const next = issueCert(clientCa, {
      cn: 'kafka-2',
      san: ['IP:127.0.0.1', 'DNS:localhost'],
      name: 'kafka-2-next',
    });
    writeFileSync(serverKeyPath(2), next.key);
    writeFileSync(serverCertPath(2), next.cert);

    // Then new connections get the new certificate within seconds
    let newSerial = oldSerial;
    const deadline = Date.now() + 15_000;
    while (newSerial === oldSerial && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      const probe = await openTls(port, clientCa.cert);
      newSerial = probe.getPeerCertificate().serialNumber;
      probe.destroy();
    }
    expect(newSerial).not.toBe(oldSerial);
    // And the connection made before the rotation still works: it goes on to the SASL handshake
    // (a SASL listener takes one ApiVersions before it, then expects SaslHandshake)
    expect(await saslHandshakeAnswered(established)).toBe(true);
    established.destroy();
    failed = false;
  });

  it('refuses to start on a missing key file, a key that does not match its certificate, or an unknown SASL mechanism (exit 2)', () => {
    const other = issueCert(clientCa, { cn: 'other', san: ['IP:127.0.0.1'] });
    const base = [
      sidecarEntry(),
      'sidecar',
      '--broker-id=1',
      '--client-listen=127.0.0.1:1',
      '--client-upstream=127.0.0.1:2',
    ];
    const cases: Array<{ flags: string[]; line: RegExp }> = [
      {
        flags: [
          `--client-tls-cert=${serverCertPath(1)}`,
          `--client-tls-key=${path.join(dir, 'missing.key')}`,
        ],
        line: /client-tls-key/,
      },
      {
        flags: [`--client-tls-cert=${serverCertPath(1)}`, `--client-tls-key=${other.keyPath}`],
        line: /client-tls-key[^\n]*(match|pair)/i,
      },
      {
        flags: [
          '--metadata-sasl-mechanism=GSSAPI',
          '--metadata-sasl-username=walproxy',
          `--metadata-sasl-password-file=${path.join(dir, 'walproxy.password')}`,
        ],
        line: /metadata-sasl-mechanism/,
      },
    ];
    for (const c of cases) {
      const run = spawnSync(process.execPath, [...base, ...c.flags], { encoding: 'utf8', timeout: 30_000 });
      expect(run.status, run.stderr).toBe(2);
      expect(run.stderr).toMatch(c.line);
    }
  });
});

/** `count` distinct records whose bytes start with `marker`. */
function lines(marker: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${marker}-${i}`);
}

/** kcat as alice through `bootstrap`, acks=all, records uncompressed (the bucket checks read their bytes). */
function produceThrough(bootstrap: string, topic: string, records: string[], partition?: number) {
  return kcat(
    [
      '-b',
      bootstrap,
      ...kcatSecurityArgs('alice', clientCa.certPath),
      '-t',
      topic,
      ...(partition === undefined ? [] : ['-p', String(partition)]),
      '-P',
      '-X',
      'acks=all',
      '-X',
      'message.timeout.ms=15000',
      '-X',
      'compression.codec=none',
    ],
    `${records.join('\n')}\n`,
    { ...SCRAM_KCAT, timeoutMs: 60_000 },
  );
}

/** Waits until no sidecar holds a batch not yet stored or failed: what is in the bucket then stays. */
async function uploadsSettled(): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const counters = await Promise.all(BROKER_IDS.map((id) => cluster.sidecarCounters(id)));
    if (counters.every((c) => c.wal?.writer.pendingBytes === 0)) return;
    if (Date.now() > deadline) throw new Error('WAL uploads did not settle within 30 s');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Every batch in the bucket's WAL objects whose bytes hold `marker` (records sent uncompressed), as
 * `topic-partition @ object`: the bucket read as a follower would, whatever topic the batch names.
 */
async function storedBatchesWith(marker: string): Promise<string[]> {
  const store = openObjectStore('s3://walproxy-security/wal', {
    endpoint: moto.endpoint,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  try {
    const found: string[] = [];
    for await (const info of store.list('')) {
      if (!info.key.endsWith('.wal')) continue;
      const object = await store.get(info.key);
      for (const entry of parseWalObject(object).entries) {
        const bytes = object.subarray(entry.position, entry.position + entry.length);
        if (bytes.includes(marker)) found.push(`${entry.topicName}-${entry.partition} @ ${info.key}`);
      }
    }
    return found;
  } finally {
    await store.close();
  }
}

/** The topics of every batch in the WAL objects stored since `since`. */
async function walTopicsSince(since: Date): Promise<string[]> {
  const s3 = new S3Client({
    endpoint: moto.endpoint,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  try {
    const topics = new Set<string>();
    let token: string | undefined;
    do {
      const page = await s3.send(
        new ListObjectsV2Command({ Bucket: 'walproxy-security', Prefix: 'wal/', ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        if (!object.Key!.endsWith('.wal') || object.LastModified! < since) continue;
        const got = await s3.send(new GetObjectCommand({ Bucket: 'walproxy-security', Key: object.Key! }));
        const body = Buffer.from(await got.Body!.transformToByteArray());
        for (const entry of parseWalObject(body).entries) topics.add(entry.topicName);
      }
      token = page.NextContinuationToken;
    } while (token);
    return [...topics];
  } finally {
    s3.destroy();
  }
}

/** zone.produce.references.batchesReferenced of sidecar `id`. */
async function batchesReferenced(id: number): Promise<number> {
  const counters = (await cluster.sidecarCounters(id)) as unknown as {
    zone: { produce: { references: { batchesReferenced: number } } };
  };
  return counters.zone.produce.references.batchesReferenced;
}

/**
 * Logs in as alice with `password` (SaslHandshake v1, SCRAM-SHA-512 in SaslAuthenticate v2) on a
 * TLS connection to `at`, writing a Produce v9 of one uncompressed record `marker` to
 * topic-partition in the same write as the SCRAM client-final message, as no real client would:
 * the login's outcome and the Produce's (its error code, or `closed` when the connection closed
 * without answering it).
 */
async function produceBehindLogin(
  at: { host: string; port: number },
  password: string,
  topic: string,
  partition: number,
  marker: string,
): Promise<{ login: string; produce: number | 'closed' }> {
  const connection = await TlsFrames.open(at.host, at.port, clientCa.cert);
  try {
    let correlationId = 0;
    let steps = 0;
    const produceFrame = requestFrame(
      ApiKey.Produce,
      9,
      encodeProduceRequest(
        {
          transactionalId: null,
          acks: -1,
          timeoutMs: 15_000,
          topicData: [
            { name: topic, partitionData: [{ index: partition, records: oneRecordBatch(marker) }] },
          ],
        },
        9,
      ),
      1_000,
    );
    let login = 'accepted';
    try {
      await saslAuthenticate(
        async (apiKey, apiVersion, body) => {
          const frame = requestFrame(apiKey, apiVersion, body, ++correlationId);
          // The SCRAM client-final message (the second SaslAuthenticate), then the Produce at once
          if (apiKey === 36 && ++steps === 2) connection.write(Buffer.concat([frame, produceFrame]));
          else connection.write(frame);
          const answer = await connection.next(15_000);
          if (typeof answer === 'string') throw new Error(`no SASL answer: ${answer}`);
          const { headerLength } = decodeResponseHeader(answer, responseHeaderVersion(apiKey, apiVersion)!);
          return answer.subarray(headerLength);
        },
        { mechanism: 'SCRAM-SHA-512', username: 'alice', password: new Secret(password) },
      );
    } catch (error) {
      login = (error as Error).message;
    }
    const answer = await connection.next(20_000);
    if (answer === 'timeout') throw new Error('neither an answer to the Produce nor a closed connection');
    if (answer === 'closed') return { login, produce: 'closed' };
    const { headerLength } = decodeResponseHeader(answer, responseHeaderVersion(ApiKey.Produce, 9)!);
    const response = decodeProduceResponse(answer.subarray(headerLength), 9);
    return { login, produce: response.responses[0]!.partitionResponses[0]!.errorCode };
  } finally {
    connection.close();
  }
}

/** A request frame, size prefix included, header v1 or v2 as the version needs. */
function requestFrame(apiKey: number, apiVersion: number, body: Buffer, correlationId: number): Buffer {
  const header = encodeRequestHeader({ apiKey, apiVersion, correlationId, clientId: 'walproxy-e2e-raw' });
  const size = Buffer.alloc(4);
  size.writeInt32BE(header.length + body.length, 0);
  return Buffer.concat([size, header, body]);
}

/** A magic v2 record batch of one uncompressed record whose value is `value`, no producer id. */
function oneRecordBatch(value: string): Buffer {
  const varint = (n: number) => {
    const out: number[] = [];
    let v = ((n << 1) ^ (n >> 31)) >>> 0;
    while (v >= 0x80) {
      out.push((v & 0x7f) | 0x80);
      v >>>= 7;
    }
    out.push(v);
    return Buffer.from(out);
  };
  const valueBytes = Buffer.from(value);
  // attributes, timestampDelta, offsetDelta, key length -1 (null), value, no headers
  const body = Buffer.concat([
    Buffer.from([0]),
    varint(0),
    varint(0),
    varint(-1),
    varint(valueBytes.length),
    valueBytes,
    varint(0),
  ]);
  const record = Buffer.concat([varint(body.length), body]);
  const header = Buffer.alloc(61);
  const now = BigInt(Date.now());
  header.writeBigInt64BE(0n, 0);
  header.writeInt32BE(61 - 12 + record.length, 8);
  header.writeInt32BE(-1, 12);
  header.writeInt8(2, 16);
  header.writeInt16BE(0, 21);
  header.writeInt32BE(0, 23);
  header.writeBigInt64BE(now, 27);
  header.writeBigInt64BE(now, 35);
  header.writeBigInt64BE(-1n, 43);
  header.writeInt16BE(-1, 51);
  header.writeInt32BE(-1, 53);
  header.writeInt32BE(1, 57);
  const batch = Buffer.concat([header, record]);
  batch.writeUInt32BE(crc32c(batch.subarray(CRC_START)), 17);
  return batch;
}

/** Whole response frames (size prefix removed) from a TLS connection, in order. */
class TlsFrames {
  #buffered = Buffer.alloc(0);
  readonly #frames: Buffer[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  private constructor(private readonly socket: tls.TLSSocket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffered = Buffer.concat([this.#buffered, chunk]);
      while (this.#buffered.length >= 4 && this.#buffered.length >= 4 + this.#buffered.readInt32BE(0)) {
        const size = this.#buffered.readInt32BE(0);
        this.#frames.push(this.#buffered.subarray(4, 4 + size));
        this.#buffered = this.#buffered.subarray(4 + size);
      }
      this.#wake?.();
    });
    socket.on('close', () => {
      this.#closed = true;
      this.#wake?.();
    });
  }

  static async open(host: string, port: number, ca: string): Promise<TlsFrames> {
    const socket = await new Promise<tls.TLSSocket>((resolve, reject) => {
      const s = tls.connect({ host, port, ca }, () => {
        s.on('error', () => {});
        resolve(s);
      });
      s.once('error', reject);
    });
    return new TlsFrames(socket);
  }

  write(bytes: Buffer): void {
    if (!this.#closed) this.socket.write(bytes);
  }

  /** The next frame, or `closed`, or `timeout`. */
  async next(timeoutMs: number): Promise<Buffer | 'closed' | 'timeout'> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = this.#frames.shift();
      if (frame !== undefined) return frame;
      if (this.#closed) return 'closed';
      const left = deadline - Date.now();
      if (left <= 0) return 'timeout';
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Opens a TLS connection to a local ingress, trusting `ca`. */
function openTls(port: number, ca: string, client?: { cert: string; key: string }): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, ...client }, () => {
      // Later errors (EPIPE once the far end has closed) are answered by the requests' outcome.
      socket.on('error', () => {});
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** Sends ApiVersions v0 (allowed before SASL) and says whether an answer with its correlation id came. */
function apiVersionsAnswered(socket: tls.TLSSocket, correlationId = 77): Promise<boolean> {
  return requestAnswered(socket, 18, 0, Buffer.alloc(0), correlationId);
}

/** Sends SaslHandshake v1 for SCRAM-SHA-512, the request a SASL listener expects after ApiVersions. */
function saslHandshakeAnswered(socket: tls.TLSSocket, correlationId = 78): Promise<boolean> {
  const mechanism = Buffer.from('SCRAM-SHA-512');
  const body = Buffer.alloc(2 + mechanism.length);
  body.writeInt16BE(mechanism.length, 0);
  mechanism.copy(body, 2);
  return requestAnswered(socket, 17, 1, body, correlationId);
}

/** Sends one request (header v1) and says whether a response with its correlation id came back. */
function requestAnswered(
  socket: tls.TLSSocket,
  apiKey: number,
  apiVersion: number,
  body: Buffer,
  correlationId: number,
): Promise<boolean> {
  return new Promise((resolve) => {
    const clientId = Buffer.from('walproxy-e2e');
    const header = Buffer.alloc(4 + 2 + 2 + 4 + 2 + clientId.length);
    header.writeInt32BE(header.length - 4 + body.length, 0);
    header.writeInt16BE(apiKey, 4);
    header.writeInt16BE(apiVersion, 6);
    header.writeInt32BE(correlationId, 8);
    header.writeInt16BE(clientId.length, 12);
    clientId.copy(header, 14);
    let received = Buffer.alloc(0);
    const timer = setTimeout(() => finish(false), 10_000);
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length >= 8) finish(received.readInt32BE(4) === correlationId);
    };
    const onEnd = () => finish(false);
    function finish(answered: boolean) {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onEnd);
      resolve(answered);
    }
    socket.on('data', onData);
    socket.once('close', onEnd);
    socket.write(Buffer.concat([header, body]));
  });
}

/**
 * Connects to a replication ingress as a would-be peer and asks ApiVersions: answered only if the
 * ingress let the connection through to the broker.
 */
async function tryReplicationIngress(
  port: number,
  ca: string,
  client?: { cert: string; key: string },
): Promise<{ answered: boolean; localPort: number }> {
  let socket: tls.TLSSocket;
  try {
    socket = await openTls(port, ca, client);
  } catch {
    // Refused during the handshake itself (TLS 1.2, or an alert before our side finished).
    return { answered: false, localPort: -1 };
  }
  const localPort = socket.localPort ?? -1;
  const answered = await apiVersionsAnswered(socket);
  socket.destroy();
  return { answered, localPort };
}
