// The WalWriter against the real backends: a directory (file://) and a real S3 API server (moto,
// directory-bucket name). Batches of many partitions go in; every ticket must resolve, and every
// batch must read back byte for byte at its location with a ranged get.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { parseWalObject } from '@walproxy/shared';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type MotoServer, startMoto } from '../../../e2e/src/s3/moto.js';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { type ObjectStore, openObjectStore } from '../../src/store/index.js';
import { parseWalObjectKey, type WalLocation, WalWriter } from '../../src/wal/index.js';

const BROKER_ID = 4;
const BATCHES = 1000;

/** mulberry32: a seeded generator, so a failure can be replayed with the seed it prints. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const TOPICS = [
  { topicName: 'orders' },
  { topicId: randomBytes(16).toString('hex') },
  { topicId: randomBytes(16).toString('hex'), topicName: 'clicks' },
];

async function writeManyAndReadBack(store: ObjectStore, keyPrefix: string): Promise<void> {
  // Given a writer with a 100 KB target and a 5 ms linger over the store
  const writer = new WalWriter({ store, brokerId: BROKER_ID, keyPrefix, targetBytes: 100_000, lingerMs: 5 });
  onTestFinished(() => writer.close());
  const seed = Date.now();
  const random = seeded(seed);

  // When 1000 batches of random size (every 200th bigger than the target) from 3 topics x 16
  // partitions are appended in bursts, with pauses that let lingers expire
  const appended: { topic: (typeof TOPICS)[number]; partition: number; batch: Buffer }[] = [];
  const tickets: Promise<WalLocation>[] = [];
  for (let i = 0; i < BATCHES; i++) {
    const topic = TOPICS[i % TOPICS.length]!;
    const partition = Math.floor(random() * 16);
    const recordsBytes = i % 200 === 199 ? 150_000 : Math.floor(random() * 8_000);
    const batch = makeBatch({ records: randomBytes(recordsBytes), producerId: BigInt(i), baseSequence: i });
    appended.push({ topic, partition, batch });
    tickets.push(writer.append({ ...topic, partition, batch }).durable);
    if (random() < 0.03) await sleep(Math.floor(random() * 10));
  }

  // Then every ticket resolves
  const locations = await Promise.all(tickets);
  await writer.close();
  const keys = [...new Set(locations.map((l) => l.objectKey))];
  const stats = writer.stats;
  expect(stats, `seed ${seed}`).toMatchObject({
    objectsUploaded: keys.length,
    batchesUploaded: BATCHES,
    uploadFailures: 0,
    pendingBytes: 0,
    uploadsInFlight: 0,
    queuedObjects: 0,
  });
  expect(stats.sealedBySize + stats.sealedByLinger + stats.sealedByFlush).toBe(keys.length);
  expect(stats.sealedBySize).toBeGreaterThan(0);

  // And every batch reads back exactly at its location
  for (let i = 0; i < BATCHES; i += 50) {
    const slice = locations.slice(i, i + 50);
    const bodies = await Promise.all(
      slice.map((l) => store.get(l.objectKey, { offset: l.position, length: l.length })),
    );
    for (const [j, body] of bodies.entries())
      expect(body.equals(appended[i + j]!.batch), `batch ${i + j}`).toBe(true);
  }

  // And every object parses, is named in the layout, and its index describes exactly its batches
  const byKey = new Map<string, number[]>();
  for (const [i, l] of locations.entries()) byKey.set(l.objectKey, [...(byKey.get(l.objectKey) ?? []), i]);
  for (const [key, indexes] of byKey) {
    const object = parseWalObject(await store.get(key));
    expect(parseWalObjectKey(key)).toMatchObject({ prefix: keyPrefix, brokerId: BROKER_ID });
    expect(object.header.writerBrokerId).toBe(BROKER_ID);
    expect(object.entries.map((e) => [e.position, e.length, e.partition, e.baseSequence])).toEqual(
      indexes.map((i) => [locations[i]!.position, locations[i]!.length, appended[i]!.partition, i]),
    );
    expect(object.entries.map((e) => e.topicName || e.topicId)).toEqual(
      indexes.map((i) => appended[i]!.topic.topicName ?? appended[i]!.topic.topicId),
    );
  }
  // And the store lists exactly these objects under the prefix
  const listed: string[] = [];
  for await (const info of store.list(keyPrefix)) listed.push(info.key);
  expect(listed.sort()).toEqual([...keys].sort());
}

describe('WalWriter on a file:// store', () => {
  it('stores 1000 random batches of many partitions, each readable at its location', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'walproxy-wal-writer-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const store = openObjectStore(pathToFileURL(dir).href);
    onTestFinished(() => store.close());
    await writeManyAndReadBack(store, 'wal/');
  });
});

describe('WalWriter on S3 (moto, directory bucket)', () => {
  const BUCKET = 'walproxy-writer--use1-az4--x-s3';
  let moto: MotoServer;

  beforeAll(async () => {
    // The first run installs moto into .cache/venv-moto, which takes a while.
    moto = await startMoto();
    await moto.createBucket(BUCKET);
  }, 300_000);

  afterAll(async () => {
    await moto?.stop();
  });

  it('stores 1000 random batches of many partitions, each readable at its location', async () => {
    const store = openObjectStore(`s3://${BUCKET}/cluster-a`, {
      region: 'us-east-1',
      endpoint: moto.endpoint,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      disableS3ExpressSessionAuth: true,
    });
    onTestFinished(() => store.close());
    await writeManyAndReadBack(store, `run-${randomBytes(4).toString('hex')}/`);
  });
});
