import { createHash } from 'node:crypto';
import { crc32c, recordBatchAt } from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { collidingPair } from '../../../shared/test/helpers/crc-forge.js';
import { sampleBatch } from '../../../shared/test/helpers/record-batches.js';
import { WalBatchIndex } from '../../src/wal/batch-index.js';
import type { WalAppendTicket, WalLocation } from '../../src/wal/index.js';

function stored(objectKey: string, length: number): WalAppendTicket {
  const location: WalLocation = { objectKey, position: 28, length, objectSize: 999, uploadedAtMs: 1 };
  return { durable: Promise.resolve(location) } as WalAppendTicket;
}

/** As the leader's log holds it: base offset and leader epoch assigned, the rest as produced. */
function inLog(produced: Buffer, baseOffset: bigint, epoch = 5) {
  const bytes = Buffer.from(produced);
  bytes.writeBigInt64BE(baseOffset, 0);
  bytes.writeInt32BE(epoch, 12);
  const batch = recordBatchAt(bytes, 0);
  if (batch.partial) throw new Error('partial');
  return batch;
}

describe('WalBatchIndex', () => {
  it('never returns the location of another batch that has the same CRC-32C, length and header', async () => {
    // Given two different batches with the same CRC-32C, length and header bytes 17..61
    const [a, b] = collidingPair();
    expect(a.equals(b)).toBe(false);
    expect(a.subarray(17, 61).equals(b.subarray(17, 61))).toBe(true);
    expect(a.length).toBe(b.length);
    // And only a is in the WAL
    const index = new WalBatchIndex();
    index.add('t', 0, a, stored('o-a', a.length));
    await Promise.resolve();
    // When the leader's log holds b, then the index does not offer a's copy, and says why
    const match = index.lookup('t', 0, inLog(b, 10n));
    expect(match.found).toBeUndefined();
    expect(match).toMatchObject({ digestMismatch: true });
    // And a itself is still found, with the digest that proved it (the reference carries it)
    expect(index.lookup('t', 0, inLog(a, 11n)).found?.location?.objectKey).toBe('o-a');
    expect(index.lookup('t', 0, inLog(a, 11n)).found?.digest).toEqual(
      createHash('sha256').update(a.subarray(61)).digest(),
    );
  });

  it('finds a batch again at another offset and epoch only after proving its records equal', async () => {
    const a = sampleBatch(0n, 3, 100, 1);
    const index = new WalBatchIndex();
    index.add('t', 0, a, stored('o-a', a.length));
    await Promise.resolve();
    expect(index.lookup('t', 0, inLog(a, 7n, 5)).found).toBeDefined();
    // A second follower fetching the same log batch: found without hashing again
    expect(index.lookup('t', 0, inLog(a, 7n, 5)).found).toBeDefined();
    expect(index.stats.logBatchesHashed).toBe(1);
    // A different log batch (another offset) is hashed again
    expect(index.lookup('t', 0, inLog(a, 8n, 5)).found).toBeDefined();
    expect(index.stats.logBatchesHashed).toBe(2);
  });
});

describe('WalBatchIndex bounds', () => {
  const distinct = (n: number) => {
    const b = sampleBatch(0n, 1, 20, 1);
    b.writeBigInt64BE(BigInt(1000 + n), 43); // another producer id, so another CRC
    b.writeUInt32BE(crc32c(b.subarray(21)), 17);
    return b;
  };

  it('holds at most maxEntries, dropping the oldest', async () => {
    const index = new WalBatchIndex({ maxEntries: 100 });
    const batches = Array.from({ length: 1_000 }, (_, n) => distinct(n));
    for (const b of batches) index.add('t', 0, b, stored('o', b.length));
    await Promise.resolve();
    expect(index.size).toBeLessThanOrEqual(100);
    expect(index.size).toBeGreaterThanOrEqual(75);
    expect(index.lookup('t', 0, inLog(batches.at(-1)!, 5n)).found?.location).toBeDefined();
    expect(index.lookup('t', 0, inLog(batches[0]!, 5n)).found).toBeUndefined();
    // And the producer lookups follow the same bound
    expect(index.rewrittenByBroker('t', 0, inLog(batches.at(-1)!, 5n))).toBe(true);
    expect(index.rewrittenByBroker('t', 0, inLog(batches[0]!, 5n))).toBe(false);
  });

  it('says whether it may hold a batch of a partition: never for one it never held, nor once its newest left the ring', async () => {
    // Given an index of at most 100 entries holding a batch of partition 0 only
    const index = new WalBatchIndex({ maxEntries: 100 });
    index.add('t', 0, distinct(0), stored('o', 100));
    // Then it may hold partition 0, and holds nothing of partition 1 or of another topic
    expect(index.mayHold('t', 0)).toBe(true);
    expect(index.mayHold('t', 1)).toBe(false);
    expect(index.mayHold('u', 0)).toBe(false);
    // When 1,000 batches of partition 1 push partition 0's out of the ring
    for (let n = 1; n <= 1_000; n++) index.add('t', 1, distinct(n), stored('o', 100));
    // Then partition 0 is held no more, partition 1 is
    expect(index.mayHold('t', 0)).toBe(false);
    expect(index.mayHold('t', 1)).toBe(true);
  });

  it('drops entries older than maxAgeMs: a follower that far behind gets inline bytes', async () => {
    let now = 0;
    const index = new WalBatchIndex({ maxAgeMs: 1_000, now: () => now });
    const a = distinct(1);
    index.add('t', 0, a, stored('o', a.length));
    await Promise.resolve();
    now = 500;
    expect(index.lookup('t', 0, inLog(a, 5n)).found).toBeDefined();
    now = 1_001;
    expect(index.lookup('t', 0, inLog(a, 6n)).found).toBeUndefined();
    const b = distinct(2);
    index.add('t', 0, b, stored('o', b.length));
    expect(index.size).toBe(1);
  });

  it('does not offer a batch whose upload failed, and shows one still uploading with its ticket', async () => {
    const index = new WalBatchIndex();
    const a = distinct(1);
    const b = distinct(2);
    const failed = Promise.reject(new Error('not stored'));
    failed.catch(() => undefined);
    index.add('t', 0, a, { durable: failed } as WalAppendTicket);
    const uploading = { durable: new Promise<WalLocation>(() => undefined) } as WalAppendTicket;
    index.add('t', 0, b, uploading);
    await new Promise((r) => setTimeout(r, 0));
    expect(index.lookup('t', 0, inLog(a, 1n)).found).toBeUndefined();
    expect(index.lookup('t', 0, inLog(b, 2n)).found).toMatchObject({
      location: undefined,
      ticket: uploading,
    });
  });

  it('finds the newest copy of a batch produced twice (an idempotent retry)', async () => {
    const index = new WalBatchIndex();
    const a = distinct(1);
    index.add('t', 0, a, stored('first', a.length));
    index.add('t', 0, a, stored('retry', a.length));
    await Promise.resolve();
    expect(index.lookup('t', 0, inLog(a, 1n)).found?.location?.objectKey).toBe('retry');
  });
});

describe('WalBatchIndex stored objects (prefetch hints)', () => {
  function storedIn(objectKey: string, objectSize: number, store?: string): WalAppendTicket {
    const location: WalLocation = {
      ...(store !== undefined ? { store } : {}),
      objectKey,
      position: 28,
      length: 100,
      objectSize,
      uploadedAtMs: 1,
    };
    return { durable: Promise.resolve(location) } as WalAppendTicket;
  }

  it('names the objects stored since a cursor that hold a wanted partition, oldest first, and moves the cursor past them', async () => {
    // Given objects stored in the order o1 (t/0), o2 (t/1), o3 (t/0 and t/1), o4 (u/0)
    const index = new WalBatchIndex();
    index.add('t', 0, sampleBatch(0n, 1, 10, 1), storedIn('o1', 1000));
    await Promise.resolve();
    index.add('t', 1, sampleBatch(0n, 1, 10, 2), storedIn('o2', 2000));
    await Promise.resolve();
    index.add('t', 0, sampleBatch(0n, 1, 10, 3), storedIn('o3', 3000));
    index.add('t', 1, sampleBatch(0n, 1, 10, 4), storedIn('o3', 3000));
    await Promise.resolve();
    index.add('u', 0, sampleBatch(0n, 1, 10, 5), storedIn('o4', 4000, 's3://peer'));
    await Promise.resolve();
    const t0 = index.partitionIdOf('t', 0)!;
    expect(index.partitionIdOf('nope', 0)).toBeUndefined();

    // When a follower fetching t/0 asks from the start, then it gets o1 and o3 (not o2, o4), in order
    const first = index.storedSince(0, (id) => id === t0, 8);
    expect(first.objects).toEqual([
      { store: undefined, objectKey: 'o1', size: 1000 },
      { store: undefined, objectKey: 'o3', size: 3000 },
    ]);
    // And asked again from the cursor it got, nothing: each object is named once
    expect(index.storedSince(first.cursor, (id) => id === t0, 8).objects).toEqual([]);

    // And at most `max` a time, the rest next time from the cursor
    const any = () => true;
    const two = index.storedSince(0, any, 2);
    expect(two.objects.map((o) => o.objectKey)).toEqual(['o1', 'o2']);
    const rest = index.storedSince(two.cursor, any, 2);
    expect(rest.objects).toEqual([
      { store: undefined, objectKey: 'o3', size: 3000 },
      { store: 's3://peer', objectKey: 'o4', size: 4000 },
    ]);

    // And an object stored later comes after the cursor
    index.add('t', 0, sampleBatch(0n, 1, 10, 6), storedIn('o5', 5000));
    await Promise.resolve();
    expect(index.storedSince(first.cursor, (id) => id === t0, 8).objects.map((o) => o.objectKey)).toEqual([
      'o5',
    ]);
  });

  it('never names an object still uploading or one whose upload failed', async () => {
    const index = new WalBatchIndex();
    let resolve!: (l: WalLocation) => void;
    const uploading = { durable: new Promise<WalLocation>((r) => (resolve = r)) } as WalAppendTicket;
    const failed = { durable: Promise.reject(new Error('put failed')) } as WalAppendTicket;
    failed.durable.catch(() => {});
    index.add('t', 0, sampleBatch(0n, 1, 10, 1), uploading);
    index.add('t', 0, sampleBatch(0n, 1, 10, 2), failed);
    await Promise.resolve();
    expect(index.storedSince(0, () => true, 8).objects).toEqual([]);
    resolve({ objectKey: 'late', position: 28, length: 100, objectSize: 700, uploadedAtMs: 2 });
    await Promise.resolve();
    expect(index.storedSince(0, () => true, 8).objects.map((o) => o.objectKey)).toEqual(['late']);
  });
});
