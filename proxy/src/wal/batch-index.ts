import { hash } from 'node:crypto';
import { CRC_START, RECORD_BATCH_HEADER_SIZE, type RecordBatch } from '@walproxy/shared';
import type { WalAppendTicket, WalLocation } from './wal-writer.js';

/** Byte 17 of a batch is its CRC; 17..61 is everything the leader does not rewrite. */
const STABLE_HEADER_START = CRC_START - 4;
// Producer state in the batch header (kafka-protocol.md §5).
const PRODUCER_ID = 43;
const PRODUCER_EPOCH = 51;
const BASE_SEQUENCE = 53;

/** One produced batch the WAL holds (or is uploading), as the leader side can find it again. */
export interface IndexedBatch {
  /** Bytes 17..61 of the produced batch: CRC, attributes, offsets delta, timestamps, producer state, count. */
  readonly stableHeader: Buffer;
  /** SHA-256 of the produced batch's records section (bytes 61..end), which the CRC alone does not prove. */
  readonly digest: Buffer;
  /** The last log batch (base offset, leader epoch) proven equal to it: a second follower's fetch skips the hash. */
  verified?: { baseOffset: bigint; partitionLeaderEpoch: number };
  readonly ticket: WalAppendTicket;
  location?: WalLocation;
  failed: boolean;
  readonly addedAtMs: number;
  /** Its key in the by-producer map, when the producer is idempotent (producer id >= 0). */
  readonly producerKey: string | undefined;
}

export interface WalBatchIndexOptions {
  /** Entries kept at most; the oldest go first. Followers fetch within milliseconds. */
  maxEntries?: number;
  /** Entries older than this are dropped: a follower that far behind gets inline bytes. */
  maxAgeMs?: number;
  now?: () => number;
}

/** What a lookup found: the WAL's copy of the log batch, or why there is none. */
export type IndexMatch =
  | { found: IndexedBatch }
  /** Nothing produced with this partition, CRC, length and header (or its upload failed). */
  | { found: undefined; digestMismatch: false }
  /**
   * A produced batch with the same partition, CRC, length and header bytes 17..61 but other
   * records: two different batches collided on CRC-32C (by chance, or forged by a producer).
   */
  | { found: undefined; digestMismatch: true };

const NOT_FOUND: IndexMatch = { found: undefined, digestMismatch: false };
const MISMATCH: IndexMatch = { found: undefined, digestMismatch: true };

/**
 * Digest of a batch's records section. SHA-256 (node:crypto, SHA-NI): a producer chooses its bytes,
 * so only a collision-resistant hash proves that two bodies are equal; CRC-32C and fast
 * non-cryptographic hashes (xxh3) can be made to collide on purpose (docs/wal-writer.md).
 */
function bodyDigest(batch: Buffer): Buffer {
  return hash('sha256', batch.subarray(RECORD_BATCH_HEADER_SIZE), 'buffer');
}

/**
 * Finds, for a batch in a Fetch response (as the leader stored it), the produced batch the WAL
 * holds. The leader rewrites only the base offset and partition leader epoch of a batch it
 * accepts unchanged (kafka-protocol.md §5), neither of which the CRC covers; so a candidate is
 * a produced batch of the same partition, CRC and length whose header bytes 17..61 are the log
 * batch's. The CRC does not prove the records equal (CRC-32C is linear: two batches with the same
 * header can be made to collide), so a candidate is returned only when the SHA-256 of its records
 * equals the log batch's; otherwise the follower gets the broker's bytes inline. A batch the
 * broker recompressed or restamped (LogAppendTime) has another CRC and is simply not found.
 */
export class WalBatchIndex {
  readonly stats = {
    /** Log batches whose records were hashed to prove them equal to a produced batch. */
    logBatchesHashed: 0,
    /** Candidates whose records were not the log batch's (CRC-32C collisions). */
    digestMismatches: 0,
  };
  private readonly entries = new Map<string, IndexedBatch>();
  /** Idempotent batches by (topic, partition, producer id, epoch, base sequence). */
  private readonly byProducer = new Map<string, string>();
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private readonly now: () => number;

  constructor(options: WalBatchIndexOptions = {}) {
    this.maxEntries = options.maxEntries ?? 1_000_000;
    this.maxAgeMs = options.maxAgeMs ?? 120_000;
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  add(topic: string, partition: number, batch: Buffer, ticket: WalAppendTicket): void {
    const crc = batch.readUInt32BE(STABLE_HEADER_START);
    const key = keyOf(topic, partition, crc, batch.length);
    const producerId = batch.readBigInt64BE(PRODUCER_ID);
    const producerKey =
      producerId >= 0n
        ? producerKeyOf(
            topic,
            partition,
            producerId,
            batch.readInt16BE(PRODUCER_EPOCH),
            batch.readInt32BE(BASE_SEQUENCE),
          )
        : undefined;
    const entry: IndexedBatch = {
      stableHeader: Buffer.from(batch.subarray(STABLE_HEADER_START, RECORD_BATCH_HEADER_SIZE)),
      digest: bodyDigest(batch),
      ticket,
      failed: false,
      addedAtMs: this.now(),
      producerKey,
    };
    ticket.durable.then(
      (location) => {
        entry.location = location;
      },
      () => {
        entry.failed = true;
      },
    );
    // Re-insert so the Map's order stays the age order (an idempotent retry of the same batch).
    this.entries.delete(key);
    this.entries.set(key, entry);
    if (producerKey !== undefined) this.byProducer.set(producerKey, key);
    this.evict();
  }

  /**
   * Whether an idempotent producer sent this batch (same producer, epoch and base sequence)
   * although its bytes are not the WAL's: the broker rewrote it (LogAppendTime, recompression).
   */
  rewrittenByBroker(topic: string, partition: number, batch: RecordBatch): boolean {
    if (batch.producerId < 0n) return false;
    return this.byProducer.has(
      producerKeyOf(topic, partition, batch.producerId, batch.producerEpoch, batch.baseSequence),
    );
  }

  lookup(topic: string, partition: number, batch: RecordBatch): IndexMatch {
    const entry = this.entries.get(keyOf(topic, partition, batch.crc, batch.size));
    if (!entry || entry.failed) return NOT_FOUND;
    const stored = batch.buffer.subarray(
      batch.offset + STABLE_HEADER_START,
      batch.offset + RECORD_BATCH_HEADER_SIZE,
    );
    if (!stored.equals(entry.stableHeader)) return NOT_FOUND;
    const baseOffset = batch.baseOffset;
    const partitionLeaderEpoch = batch.partitionLeaderEpoch;
    const verified = entry.verified;
    // The same log batch (same offset, epoch and CRC in this partition) was proven equal already.
    if (verified?.baseOffset === baseOffset && verified.partitionLeaderEpoch === partitionLeaderEpoch) {
      return { found: entry };
    }
    this.stats.logBatchesHashed++;
    if (!bodyDigest(batch.bytes()).equals(entry.digest)) {
      this.stats.digestMismatches++;
      return MISMATCH;
    }
    entry.verified = { baseOffset, partitionLeaderEpoch };
    return { found: entry };
  }

  private evict(): void {
    const oldest = this.now() - this.maxAgeMs;
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && entry.addedAtMs >= oldest) break;
      this.entries.delete(key);
      if (entry.producerKey !== undefined && this.byProducer.get(entry.producerKey) === key) {
        this.byProducer.delete(entry.producerKey);
      }
    }
  }
}

function producerKeyOf(
  topic: string,
  partition: number,
  producerId: bigint,
  epoch: number,
  baseSequence: number,
): string {
  return `${topic}\u0000${partition}\u0000${producerId}\u0000${epoch}\u0000${baseSequence}`;
}

function keyOf(topic: string, partition: number, crc: number, length: number): string {
  return `${topic}\u0000${partition}\u0000${crc}\u0000${length}`;
}
