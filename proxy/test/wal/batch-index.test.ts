import { recordBatchAt } from '@walproxy/shared';
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
    // And a itself is still found
    expect(index.lookup('t', 0, inLog(a, 11n)).found?.location?.objectKey).toBe('o-a');
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
