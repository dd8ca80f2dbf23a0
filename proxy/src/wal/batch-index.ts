import { hash } from 'node:crypto';
import { CRC_START, RECORD_BATCH_HEADER_SIZE, RecordBatch } from '@walproxy/shared';
import type { WalAppendTicket, WalLocation } from './wal-writer.js';

/** Byte 17 of a batch is its CRC; 17..61 is everything the leader does not rewrite. */
const STABLE_HEADER_START = CRC_START - 4;
const STABLE_HEADER_SIZE = RECORD_BATCH_HEADER_SIZE - STABLE_HEADER_START;
const DIGEST_SIZE = 32;

/** Entries per chunk at most: 16,384 × ~140 B ≈ 2.2 MB allocated at a time. */
const MAX_CHUNK_ENTRIES = 16_384;
// Where an entry's batch is, in `object` (an id in the object table, or one of these).
const PENDING = -1;
const FAILED = -2;
/** No log batch proven equal yet (log offsets are never negative). */
const NOT_VERIFIED = -1n;

/** A produced batch the index holds, as a lookup found it. */
export interface IndexedBatch {
  /** Where the WAL holds it, once its object is stored. */
  readonly location: WalLocation | undefined;
  /** While its object is not stored yet: what to wait for. */
  readonly ticket: WalAppendTicket | undefined;
  /**
   * SHA-256 of its records section (bytes 61..end), which proved it equal to the log batch: the
   * reference carries it, so the follower side proves the object's bytes the same way.
   */
  readonly digest: Buffer;
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

export interface WalBatchIndexOptions {
  /** Entries kept at most; the oldest go first. Followers fetch within milliseconds. */
  maxEntries?: number;
  /** Entries older than this are dropped: a follower that far behind gets inline bytes. */
  maxAgeMs?: number;
  now?: () => number;
}

export interface WalBatchIndexStats {
  /** Log batches whose records were hashed to prove them equal to a produced batch. */
  logBatchesHashed: number;
  /** Candidates whose records were not the log batch's (CRC-32C collisions). */
  digestMismatches: number;
  /** Gauge: entries held. */
  entries: number;
  /** Gauge: bytes of the index's arrays (chunks and hash heads), what maxEntries bounds. */
  allocatedBytes: number;
}

/**
 * Digest of a batch's records section. SHA-256 (node:crypto, SHA-NI): a producer chooses its bytes,
 * so only a collision-resistant hash proves that two bodies are equal; CRC-32C and fast
 * non-cryptographic hashes (xxh3) can be made to collide on purpose (docs/architecture.md).
 */
export function bodyDigest(batch: Buffer): Buffer {
  return hash('sha256', batch.subarray(RECORD_BATCH_HEADER_SIZE), 'buffer');
}

/** Fixed-size records of `size` entries, each field in a typed array (no object per entry). */
class Chunk {
  readonly header: Uint8Array;
  readonly digest: Uint8Array;
  readonly crc: Uint32Array;
  readonly length: Int32Array;
  /** Interned (topic, partition). */
  readonly partition: Int32Array;
  readonly object: Int32Array;
  readonly position: Int32Array;
  /** Distance back to the previous entry of the same hash bucket (0: none). */
  readonly next: Uint32Array;
  readonly producerNext: Uint32Array;
  readonly producerId: BigInt64Array;
  readonly producerEpoch: Int16Array;
  readonly baseSequence: Int32Array;
  /** The last log batch proven equal to the entry (base offset, leader epoch). */
  readonly verifiedOffset: BigInt64Array;
  readonly verifiedEpoch: Int32Array;
  /** When the chunk's newest entry was added: chunks age out whole. */
  lastAddedAtMs = 0;

  constructor(
    readonly number: number,
    size: number,
  ) {
    this.header = new Uint8Array(size * STABLE_HEADER_SIZE);
    this.digest = new Uint8Array(size * DIGEST_SIZE);
    this.crc = new Uint32Array(size);
    this.length = new Int32Array(size);
    this.partition = new Int32Array(size);
    this.object = new Int32Array(size);
    this.position = new Int32Array(size);
    this.next = new Uint32Array(size);
    this.producerNext = new Uint32Array(size);
    this.producerId = new BigInt64Array(size);
    this.producerEpoch = new Int16Array(size);
    this.baseSequence = new Int32Array(size);
    this.verifiedOffset = new BigInt64Array(size);
    this.verifiedEpoch = new Int32Array(size);
  }

  static bytesPerEntry = STABLE_HEADER_SIZE + DIGEST_SIZE + 4 * 9 + 8 * 2 + 2;
}

/** A stored object many entries point at: one record per object, not one promise per batch. */
interface ObjectRecord {
  /** The store holding it when it is not this sidecar's own (a zone-local produce's object). */
  store: string | undefined;
  key: string;
  size: number;
  uploadedAtMs: number;
  /** The newest entry in it: the record goes when that entry has aged out. */
  lastSeq: number;
  /** Its place in the order objects were stored in (storedSince's cursor). */
  storedOrder: number;
  /** The interned partitions it holds batches of. */
  partitions: Set<number>;
}

/** A stored object as storedSince gives it: what a follower side needs to read it whole. */
export interface StoredObjectHint {
  readonly store: string | undefined;
  readonly objectKey: string;
  readonly size: number;
}

/** How many of the newest stored objects storedSince looks back over. */
const STORED_LOG_SIZE = 256;

/**
 * Finds, for a batch in a Fetch response (as the leader stored it), the produced batch the WAL
 * holds. The leader rewrites only the base offset and partition leader epoch of a batch it accepts
 * unchanged (docs/kafka-protocol.md, "Record batch v2"), neither of which the CRC covers; so a
 * candidate is a produced batch of the same partition, CRC and length whose header bytes 17..61 are
 * the log batch's. The CRC does not prove the records equal (CRC-32C is linear: two batches with
 * the same header can be made to collide), so a candidate is returned only when the SHA-256 of its
 * records equals the log batch's; otherwise the follower gets the broker's bytes inline. A batch
 * the broker recompressed or restamped (LogAppendTime) has another CRC and is simply not found.
 *
 * Memory (issue #12): entries are fixed-size records in a ring of typed-array chunks (~140 B an
 * entry, docs/benchmarks.md), found through two chained hash tables whose chains run newest to
 * oldest, so dropping the oldest chunk needs no unlinking: a chain ends where it reaches an entry
 * older than the ring. Bounded by `maxEntries` and, per chunk, `maxAgeMs`.
 */
export class WalBatchIndex {
  readonly #chunkSize: number;
  readonly #maxChunks: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  readonly #chunks: Array<Chunk | undefined>;
  /** Per bucket, 1 + the sequence number of its newest entry (0: empty). */
  readonly #heads: Float64Array;
  readonly #producerHeads: Float64Array;
  readonly #mask: number;
  /** The next entry's sequence number, and the oldest one still held. */
  #nextSeq = 0;
  #oldestSeq = 0;
  readonly #partitions = new Map<string, Map<number, number>>();
  #partitionCount = 0;
  /** Per interned partition, the sequence number of its newest entry. */
  readonly #newestOfPartition: number[] = [];
  readonly #objects = new Map<number, ObjectRecord>();
  readonly #objectIds = new Map<string, number>();
  #nextObjectId = 0;
  /** The ids of the newest stored objects, oldest first (at most STORED_LOG_SIZE). */
  readonly #storedLog: number[] = [];
  #nextStoredOrder = 1;
  /** Tickets of entries whose object is not stored yet, by sequence number. */
  readonly #pending = new Map<number, WalAppendTicket>();
  readonly #counters = { logBatchesHashed: 0, digestMismatches: 0 };

  constructor(options: WalBatchIndexOptions = {}) {
    const maxEntries = Math.max(1, Math.floor(options.maxEntries ?? 1_000_000));
    // At least four chunks, so that dropping the oldest keeps three quarters of the entries.
    this.#chunkSize = Math.min(MAX_CHUNK_ENTRIES, Math.max(1, Math.ceil(maxEntries / 4)));
    this.#maxChunks = Math.max(1, Math.floor(maxEntries / this.#chunkSize));
    this.#chunks = new Array(this.#maxChunks).fill(undefined);
    this.#maxAgeMs = options.maxAgeMs ?? 120_000;
    this.#now = options.now ?? Date.now;
    // About two entries a bucket when full.
    let buckets = 16;
    while (buckets * 2 < maxEntries) buckets *= 2;
    this.#heads = new Float64Array(buckets);
    this.#producerHeads = new Float64Array(buckets);
    this.#mask = buckets - 1;
  }

  get size(): number {
    return this.#nextSeq - this.#oldestSeq;
  }

  get stats(): WalBatchIndexStats {
    const chunks = this.#chunks.filter((c) => c !== undefined).length;
    return {
      ...this.#counters,
      entries: this.size,
      allocatedBytes:
        chunks * this.#chunkSize * Chunk.bytesPerEntry +
        this.#heads.byteLength +
        this.#producerHeads.byteLength,
    };
  }

  add(topic: string, partition: number, batch: Buffer, ticket: WalAppendTicket): void {
    const now = this.#now();
    this.#expire(now);
    const seq = this.#nextSeq;
    const chunk = this.#chunkForNew(seq);
    const i = seq - chunk.number * this.#chunkSize;
    chunk.lastAddedAtMs = now;
    const tp = this.#internPartition(topic, partition);
    this.#newestOfPartition[tp] = seq;
    const crc = batch.readUInt32BE(STABLE_HEADER_START);
    chunk.header.set(batch.subarray(STABLE_HEADER_START, RECORD_BATCH_HEADER_SIZE), i * STABLE_HEADER_SIZE);
    chunk.digest.set(bodyDigest(batch), i * DIGEST_SIZE);
    chunk.crc[i] = crc;
    chunk.length[i] = batch.length;
    chunk.partition[i] = tp;
    chunk.object[i] = PENDING;
    chunk.position[i] = 0;
    chunk.verifiedOffset[i] = NOT_VERIFIED;
    chunk.verifiedEpoch[i] = 0;
    // Producer state from shared's view of the header, which owns the batch layout.
    const view = new RecordBatch(batch, 0, batch.length);
    const producerId = view.producerId;
    const epoch = view.producerEpoch;
    const baseSequence = view.baseSequence;
    chunk.producerId[i] = producerId;
    chunk.producerEpoch[i] = epoch;
    chunk.baseSequence[i] = baseSequence;
    chunk.next[i] = this.#link(this.#heads, keyHash(tp, crc, batch.length) & this.#mask, seq);
    chunk.producerNext[i] =
      producerId >= 0n
        ? this.#link(this.#producerHeads, producerHash(tp, producerId, epoch, baseSequence) & this.#mask, seq)
        : 0;
    this.#nextSeq = seq + 1;

    this.#pending.set(seq, ticket);
    ticket.durable.then(
      (location) => this.#stored(seq, location),
      () => this.#failed(seq),
    );
  }

  /**
   * Whether an idempotent producer sent this batch (same producer, epoch and base sequence)
   * although its bytes are not the WAL's: the broker rewrote it (LogAppendTime, recompression).
   */
  rewrittenByBroker(topic: string, partition: number, batch: RecordBatch): boolean {
    if (batch.producerId < 0n) return false;
    const tp = this.#partitionId(topic, partition);
    if (tp === undefined) return false;
    const { producerId, producerEpoch, baseSequence } = batch;
    const bucket = producerHash(tp, producerId, producerEpoch, baseSequence) & this.#mask;
    for (let seq = this.#producerHeads[bucket]! - 1; seq >= this.#oldestSeq; ) {
      const chunk = this.#live(seq);
      if (chunk === undefined) return false;
      const i = seq - chunk.number * this.#chunkSize;
      if (
        chunk.partition[i] === tp &&
        chunk.producerId[i] === producerId &&
        chunk.producerEpoch[i] === producerEpoch &&
        chunk.baseSequence[i] === baseSequence
      )
        return true;
      const back = chunk.producerNext[i]!;
      if (back === 0) return false;
      seq -= back;
    }
    return false;
  }

  /**
   * Whether the index may hold a batch of this partition: false when it never held one, or its
   * newest has left the ring — every lookup of the partition would miss. O(1), so that a caller
   * can skip walking batches it would only look up in vain (entries past their age may still
   * answer true).
   */
  mayHold(topic: string, partition: number): boolean {
    const tp = this.#partitionId(topic, partition);
    return tp !== undefined && this.#newestOfPartition[tp]! >= this.#oldestSeq;
  }

  /** The partition's interned id, for storedSince's filter; undefined when no batch of it was added. */
  partitionIdOf(topic: string, partition: number): number | undefined {
    return this.#partitionId(topic, partition);
  }

  /**
   * The objects stored after `cursor` (0: any of the newest STORED_LOG_SIZE) that hold a batch of a
   * partition `wants`, oldest first (a broker appends in order: the oldest is referenced first), at
   * most `max`; and the cursor to pass next time (past the last object looked at, so the rest come
   * next time). What a leader side hints to a follower side (prefetch-hints.ts): objects it will
   * be referenced to once its broker appends their batches.
   */
  storedSince(
    cursor: number,
    wants: (partitionId: number) => boolean,
    max: number,
  ): { objects: StoredObjectHint[]; cursor: number } {
    const objects: StoredObjectHint[] = [];
    let k = this.#storedLog.length;
    while (k > 0 && (this.#objects.get(this.#storedLog[k - 1]!)?.storedOrder ?? 0) > cursor) k--;
    let next = cursor;
    for (; k < this.#storedLog.length && objects.length < max; k++) {
      const object = this.#objects.get(this.#storedLog[k]!);
      if (object === undefined || object.storedOrder <= cursor) continue;
      next = object.storedOrder;
      for (const tp of object.partitions) {
        if (!wants(tp)) continue;
        objects.push({ store: object.store, objectKey: object.key, size: object.size });
        break;
      }
    }
    return { objects, cursor: next };
  }

  lookup(topic: string, partition: number, batch: RecordBatch): IndexMatch {
    const tp = this.#partitionId(topic, partition);
    if (tp === undefined) return NOT_FOUND;
    const crc = batch.crc;
    const length = batch.size;
    const header = batch.buffer.subarray(
      batch.offset + STABLE_HEADER_START,
      batch.offset + RECORD_BATCH_HEADER_SIZE,
    );
    let digest: Buffer | undefined;
    let mismatch = false;
    const bucket = keyHash(tp, crc, length) & this.#mask;
    // Newest first: an idempotent retry of the same batch is found at its latest copy.
    for (let seq = this.#heads[bucket]! - 1; seq >= this.#oldestSeq; ) {
      const chunk = this.#live(seq);
      if (chunk === undefined) break;
      const i = seq - chunk.number * this.#chunkSize;
      if (
        chunk.partition[i] === tp &&
        chunk.crc[i] === crc &&
        chunk.length[i] === length &&
        chunk.object[i] !== FAILED &&
        equalBytes(chunk.header, i * STABLE_HEADER_SIZE, header)
      ) {
        const baseOffset = batch.baseOffset;
        const epoch = batch.partitionLeaderEpoch;
        // The same log batch (same offset, epoch and CRC in this partition) was proven equal already.
        if (chunk.verifiedOffset[i] === baseOffset && chunk.verifiedEpoch[i] === epoch) {
          return { found: this.#view(seq, chunk, i) };
        }
        if (digest === undefined) {
          this.#counters.logBatchesHashed++;
          digest = bodyDigest(batch.bytes());
        }
        if (equalBytes(chunk.digest, i * DIGEST_SIZE, digest)) {
          chunk.verifiedOffset[i] = baseOffset;
          chunk.verifiedEpoch[i] = epoch;
          return { found: this.#view(seq, chunk, i) };
        }
        mismatch = true;
      }
      const back = chunk.next[i]!;
      if (back === 0) break;
      seq -= back;
    }
    if (mismatch) {
      this.#counters.digestMismatches++;
      return MISMATCH;
    }
    return NOT_FOUND;
  }

  #view(seq: number, chunk: Chunk, i: number): IndexedBatch {
    // A copy: the chunk's slot is reused once the entry ages out.
    const digest = Buffer.from(chunk.digest.subarray(i * DIGEST_SIZE, (i + 1) * DIGEST_SIZE));
    const objectId = chunk.object[i]!;
    if (objectId < 0) return { location: undefined, ticket: this.#pending.get(seq), digest };
    const object = this.#objects.get(objectId);
    if (object === undefined) return { location: undefined, ticket: undefined, digest };
    return {
      location: {
        ...(object.store !== undefined ? { store: object.store } : {}),
        objectKey: object.key,
        position: chunk.position[i]!,
        length: chunk.length[i]!,
        objectSize: object.size,
        uploadedAtMs: object.uploadedAtMs,
      },
      ticket: undefined,
      digest,
    };
  }

  #stored(seq: number, location: WalLocation): void {
    this.#pending.delete(seq);
    const chunk = this.#live(seq);
    if (chunk === undefined) return;
    const i = seq - chunk.number * this.#chunkSize;
    const objectName = objectNameOf(location.store, location.objectKey);
    let id = this.#objectIds.get(objectName);
    if (id === undefined) {
      id = this.#nextObjectId++;
      this.#objectIds.set(objectName, id);
      this.#objects.set(id, {
        store: location.store,
        key: location.objectKey,
        size: location.objectSize,
        uploadedAtMs: location.uploadedAtMs,
        lastSeq: seq,
        storedOrder: this.#nextStoredOrder++,
        partitions: new Set([chunk.partition[i]!]),
      });
      this.#storedLog.push(id);
      if (this.#storedLog.length > STORED_LOG_SIZE) this.#storedLog.shift();
    } else {
      const object = this.#objects.get(id)!;
      object.lastSeq = Math.max(object.lastSeq, seq);
      object.partitions.add(chunk.partition[i]!);
    }
    chunk.object[i] = id;
    chunk.position[i] = location.position;
  }

  #failed(seq: number): void {
    this.#pending.delete(seq);
    const chunk = this.#live(seq);
    if (chunk !== undefined) chunk.object[seq - chunk.number * this.#chunkSize] = FAILED;
  }

  /** The chunk holding a live entry, or undefined when it aged out or was dropped. */
  #live(seq: number): Chunk | undefined {
    if (seq < this.#oldestSeq || seq >= this.#nextSeq) return undefined;
    const number = Math.floor(seq / this.#chunkSize);
    const chunk = this.#chunks[number % this.#maxChunks];
    if (chunk?.number !== number) return undefined;
    if (chunk.lastAddedAtMs < this.#now() - this.#maxAgeMs) return undefined;
    return chunk;
  }

  #chunkForNew(seq: number): Chunk {
    const number = Math.floor(seq / this.#chunkSize);
    const slot = number % this.#maxChunks;
    const current = this.#chunks[slot];
    if (current?.number === number) return current;
    // Opening a new chunk: the one in its slot (the oldest) goes, whole.
    if (current !== undefined) this.#dropOldest();
    const chunk = new Chunk(number, this.#chunkSize);
    this.#chunks[slot] = chunk;
    return chunk;
  }

  /** Drops whole chunks whose newest entry is older than maxAgeMs. */
  #expire(now: number): void {
    while (this.#oldestSeq < this.#nextSeq) {
      const number = Math.floor(this.#oldestSeq / this.#chunkSize);
      const chunk = this.#chunks[number % this.#maxChunks];
      if (chunk !== undefined && chunk.lastAddedAtMs >= now - this.#maxAgeMs) return;
      this.#dropOldest();
    }
  }

  #dropOldest(): void {
    const number = Math.floor(this.#oldestSeq / this.#chunkSize);
    const slot = number % this.#maxChunks;
    if (this.#chunks[slot]?.number === number) this.#chunks[slot] = undefined;
    const end = Math.min(this.#nextSeq, (number + 1) * this.#chunkSize);
    for (let seq = this.#oldestSeq; seq < end; seq++) this.#pending.delete(seq);
    this.#oldestSeq = end;
    // Object records whose newest entry is gone (objects are stored roughly in order).
    for (const [id, object] of this.#objects) {
      if (object.lastSeq >= this.#oldestSeq) break;
      this.#objects.delete(id);
      this.#objectIds.delete(objectNameOf(object.store, object.key));
    }
  }

  /** Makes `seq` the bucket's head; returns the distance back to the previous head (0: none). */
  #link(heads: Float64Array, bucket: number, seq: number): number {
    const previous = heads[bucket]! - 1;
    heads[bucket] = seq + 1;
    if (previous < this.#oldestSeq) return 0;
    return Math.min(seq - previous, 0xffff_ffff);
  }

  #internPartition(topic: string, partition: number): number {
    let partitions = this.#partitions.get(topic);
    if (partitions === undefined) {
      partitions = new Map();
      this.#partitions.set(topic, partitions);
    }
    let id = partitions.get(partition);
    if (id === undefined) {
      id = this.#partitionCount++;
      partitions.set(partition, id);
    }
    return id;
  }

  #partitionId(topic: string, partition: number): number | undefined {
    return this.#partitions.get(topic)?.get(partition);
  }
}

function equalBytes(store: Uint8Array, at: number, bytes: Uint8Array): boolean {
  for (let k = 0; k < bytes.length; k++) if (store[at + k] !== bytes[k]) return false;
  return true;
}

function mix(h: number, v: number): number {
  h = Math.imul(h ^ v, 0x85eb_ca6b);
  return (h ^ (h >>> 13)) >>> 0;
}

function keyHash(tp: number, crc: number, length: number): number {
  return mix(mix(mix(0x9e37_79b9, tp), crc), length);
}

function producerHash(tp: number, producerId: bigint, epoch: number, baseSequence: number): number {
  const low = Number(producerId & 0xffff_ffffn);
  const high = Number(producerId >> 32n);
  return mix(mix(mix(mix(mix(0x7f4a_7c15, tp), low), high), epoch), baseSequence);
}

/** An object's name across stores: keys are unique in one store only. */
function objectNameOf(store: string | undefined, objectKey: string): string {
  return store === undefined ? objectKey : `${store}\u0000${objectKey}`;
}
