// `walproxy wal ls | verify | gc` against the shared cluster's S3 server and metadata topic, run
// as operators run them: the built CLI in a child process.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { groupPieces, openObjectStore, type WalLocation, type WalPiece, WalWriter } from '@walproxy/proxy';
import { crc32c } from '@walproxy/shared';
import { describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';
import { walSidecarEnv } from '../src/cluster/wal-settings.js';

// The CLI as the image runs it: bundled into one file (proxy/bundle.mjs).
const MAIN = fileURLToPath(new URL('../../proxy/dist/cli/walproxy.mjs', import.meta.url));

type Cluster = ReturnType<typeof inject<'cluster'>>;

function walproxy(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...process.env, ...walSidecarEnv() },
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

function storeFlags(cluster: Cluster, prefix: string): string[] {
  return [
    `--store-url=s3://${cluster.s3.bucket}/${prefix.replace(/\/$/, '')}`,
    `--s3-endpoint=${cluster.s3.endpoint}`,
    '--s3-force-path-style=true',
  ];
}

/**
 * Waits until no sidecar has WAL bytes left to upload or metadata pieces left to publish (the
 * publisher sends every 2 s: `wal verify` would find the newest objects without records).
 */
async function walSettled(cluster: Cluster): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const all = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));
    if (
      all.every(
        (c) =>
          c.wal?.writer.pendingBytes === 0 && c.wal.metadata.queued === 0 && c.wal.metadata.inFlight === 0,
      )
    )
      return;
    if (Date.now() > deadline) throw new Error('WAL uploads and metadata did not settle in 30 s');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A magic v2 batch as a producer sends it (the WAL never looks inside the records). */
function makeBatch(records: string, recordCount = 1): Buffer {
  const body = Buffer.from(records);
  const b = Buffer.alloc(61 + body.length);
  b.writeInt32BE(b.length - 12, 8);
  b.writeInt32BE(-1, 12);
  b.writeInt8(2, 16);
  b.writeInt32BE(recordCount - 1, 23);
  b.writeBigInt64BE(-1n, 43);
  b.writeInt16BE(-1, 51);
  b.writeInt32BE(-1, 53);
  b.writeInt32BE(recordCount, 57);
  body.copy(b, 61);
  b.writeUInt32BE(crc32c(b.subarray(21)), 17);
  return b;
}

describe('walproxy wal tools on the shared cluster', () => {
  it('wal ls lists what the sidecars wrote, and wal verify passes against metadata and broker logs', async () => {
    const cluster = inject('cluster');
    const topic = `wal-tools-${Date.now()}`;
    const since = new Date(Date.now() - 1000).toISOString();
    await createTopic(cluster.bootstrap, topic, { partitions: 3 });
    const producer = kafkaClient(cluster.bootstrap).producer();
    await producer.connect();
    for (let i = 0; i < 20; i++) {
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: 50 }, (_, k) => ({ key: `k${k}`, value: `value-${i}-${k}` })),
      });
    }
    await producer.disconnect();
    await walSettled(cluster);

    const ls = await walproxy([
      'wal',
      'ls',
      ...storeFlags(cluster, cluster.s3.prefix),
      `--since=${since}`,
      '--json',
    ]);
    expect(ls.code, ls.stderr).toBe(0);
    const listed = JSON.parse(ls.stdout) as {
      objects: Array<{ key: string; size: number; batches: number; partitions: string }>;
      totals: { objects: number; batches: number; records: number };
    };
    const ours = listed.objects.filter((o) => o.partitions.includes(topic));
    expect(ours.length).toBeGreaterThan(0);
    expect(listed.totals.records).toBeGreaterThanOrEqual(1000);
    const text = await walproxy(['wal', 'ls', ...storeFlags(cluster, cluster.s3.prefix), `--since=${since}`]);
    expect(text.stdout).toContain(ours[0]!.key);
    expect(text.stdout).toMatch(/\d+ objects, [\d,]+ bytes, [\d,]+ batches, [\d,]+ records; created /);

    // Give the sidecars' metadata publishers (50 ms flush) a moment after the last upload
    await new Promise((r) => setTimeout(r, 1000));
    const verify = await walproxy([
      'wal',
      'verify',
      ...storeFlags(cluster, cluster.s3.prefix),
      `--bootstrap=${cluster.bootstrap}`,
      `--since=${since}`,
      ...Object.values(cluster.dataDirs).map((d) => `--data-dir=${d}`),
    ]);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    expect(verify.stdout).toMatch(
      /objects \([\d,]+ bytes\), [\d,]+ metadata records, 3 broker data dir\(s\): OK/,
    );
  });

  it('wal verify names a deleted object, a truncated object and a record past an object end; gc deletes only old objects', async () => {
    const cluster = inject('cluster');
    const run = Date.now();
    // Our own prefix and metadata topic: the other e2e files read everything under wal/.
    const prefix = `tools-test-${run}/`;
    const metadataTopic = `__tools_test_metadata_${run}`;
    await createTopic(cluster.bootstrap, metadataTopic, { partitions: 1 });
    const store = openObjectStore(`s3://${cluster.s3.bucket}/${prefix.replace(/\/$/, '')}`, {
      endpoint: cluster.s3.endpoint,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const flags = storeFlags(cluster, prefix);
    const kafkaFlags = [`--bootstrap=${cluster.bootstrap}`, `--metadata-topic=${metadataTopic}`];
    const producer = kafkaClient(cluster.bootstrap).producer();
    await producer.connect();
    try {
      // Four objects of three batches each (partitions 0 and 1), indexed as a sidecar would index them
      const pieces: WalPiece[] = [];
      const writeObject = async (writer: WalWriter, tag: string): Promise<WalLocation[]> => {
        const tickets = [0, 1, 2].map((i) =>
          writer.append({ topicName: 'tools', partition: i % 2, batch: makeBatch(`${tag}-${i}`, 2) }),
        );
        await writer.flush();
        const locations = await Promise.all(tickets.map((t) => t.durable));
        locations.forEach((at, i) => {
          const base = BigInt(pieces.length * 2);
          pieces.push({
            ...at,
            topic: 'tools',
            topicId: undefined,
            partition: i % 2,
            baseOffset: base,
            lastOffset: base + 1n,
            crc: makeBatch(`${tag}-${i}`, 2).readUInt32BE(17),
            recordCount: 2,
          });
        });
        return locations;
      };
      const writer = new WalWriter({ store, brokerId: 7, keyPrefix: '', lingerMs: 1000 });
      const [deleted, truncated, pastEnd, intact] = [
        (await writeObject(writer, 'a'))[0]!,
        (await writeObject(writer, 'b'))[0]!,
        (await writeObject(writer, 'c'))[0]!,
        (await writeObject(writer, 'd'))[0]!,
      ];
      await writer.close();
      const publish = (records: unknown[]) =>
        producer.send({
          topic: metadataTopic,
          acks: -1,
          messages: records.map((r) => ({ value: JSON.stringify(r) })),
        });
      await publish(groupPieces(pieces, 7));

      const clean = await walproxy(['wal', 'verify', ...flags, ...kafkaFlags]);
      expect(clean.code, clean.stdout + clean.stderr).toBe(0);
      expect(clean.stdout).toMatch(/^4 objects \([\d,]+ bytes\), 8 metadata records: OK$/m);

      // Break three things: delete one object, replace another with its first half (never-overwrite
      // stores need the delete first), and index a batch that runs past a third object's end
      await store.delete([deleted.objectKey]);
      const whole = await store.get(truncated.objectKey);
      await store.delete([truncated.objectKey]);
      await store.put(truncated.objectKey, whole.subarray(0, Math.floor(whole.length / 2)));
      await publish([
        {
          v: 1,
          broker: 7,
          object: pastEnd.objectKey,
          objectSize: pastEnd.objectSize,
          topic: 'tools',
          topicId: null,
          partition: 0,
          baseOffset: 1000,
          lastOffset: 1001,
          createdAtMs: Date.now(),
          batches: [
            {
              position: pastEnd.objectSize - 10,
              length: 100,
              baseOffset: 1000,
              lastOffset: 1001,
              crc: 1,
              records: 2,
            },
          ],
        },
      ]);

      const broken = await walproxy(['wal', 'verify', ...flags, ...kafkaFlags]);
      expect(broken.code, broken.stdout + broken.stderr).toBe(1);
      const errors = broken.stdout.split('\n').filter((l) => l.startsWith('ERROR'));
      expect(
        errors.some((l) => l.startsWith(`ERROR missing ${deleted.objectKey}: object does not exist`)),
      ).toBe(true);
      expect(errors.some((l) => l.startsWith(`ERROR corrupt ${truncated.objectKey}:`))).toBe(true);
      expect(
        errors.some(
          (l) => l.startsWith(`ERROR past-end ${pastEnd.objectKey}:`) && l.includes("past the object's end"),
        ),
      ).toBe(true);
      expect(errors.some((l) => l.includes(intact.objectKey))).toBe(false);
      expect(broken.stdout).toMatch(/problem\(s\)/);

      // gc: one more object, written with a clock three hours back
      const oldWriter = new WalWriter({
        store,
        brokerId: 7,
        keyPrefix: '',
        lingerMs: 1000,
        now: () => Date.now() - 3 * 3_600_000,
      });
      const [old] = await writeObject(oldWriter, 'old');
      await oldWriter.close();
      const dry = await walproxy(['wal', 'gc', ...flags, '--older-than=2h']);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toContain(`would delete ${old!.objectKey}`);
      expect(dry.stdout).toMatch(/would delete 1 objects \([\d,]+ bytes\) created before .*; kept 3/);
      expect(await store.head(old!.objectKey)).toBeDefined();

      const gc = await walproxy(['wal', 'gc', ...flags, '--older-than=2h', '--delete']);
      expect(gc.code, gc.stderr).toBe(0);
      expect(gc.stdout).toMatch(/^deleted 1 objects .*; kept 3$/m);
      expect(await store.head(old!.objectKey)).toBeUndefined();
      expect(await store.head(intact.objectKey)).toBeDefined();

      const everything = await walproxy(['wal', 'gc', ...flags, '--older-than=0s', '--json']);
      expect(JSON.parse(everything.stdout).objects).toHaveLength(3);
    } finally {
      await producer.disconnect();
      const keys: string[] = [];
      for await (const o of store.list('')) keys.push(o.key);
      await store.delete(keys);
      await store.close();
    }
  });
});
