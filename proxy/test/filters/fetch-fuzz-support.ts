// What the fetch-strip and fetch-fill fuzz tests share: the leader's WAL (objects and batch
// index) rebuilt from the captured objects, a follower-side fill over a memory store, and the
// checks that a follower gets the leader's bytes.
import { hash } from 'node:crypto';
import {
  ApiKey,
  CRC_START,
  crc32c,
  decodeFetchCapability,
  decodeFetchRequest,
  decodeFetchResponse,
  decodePartitionSegments,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeFetchCapability,
  encodeFetchRequest,
  encodeFetchResponse,
  encodePartitionSegments,
  FETCH_CAPABILITY_TAG,
  type FetchResponse,
  type FetchResponsePartition,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
  parseWalObject,
  RECORD_BATCH_HEADER_SIZE,
  recordBatches,
  responseHeaderVersion,
} from '@walproxy/shared';
import { FetchFillFilter } from '../../src/filters/fetch-fill.js';
import { createLogger } from '../../src/log.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import type { ByteRange } from '../../src/store/index.js';
import { WalBatchIndex } from '../../src/wal/batch-index.js';
import type { WalAppendTicket } from '../../src/wal/index.js';
import { WalRangeReader } from '../../src/wal/range-reader.js';
import { MemoryObjectStore, unreachable } from '../wal/memory-store.js';
import { type FetchFixture, type FuzzFixtures, framed, fuzzFixtures, plain } from './fuzz-support.js';

/** SHA-256 of a batch's records section: the digest a version-3 reference carries. */
export function recordsDigest(batch: Buffer): Buffer {
  return hash('sha256', batch.subarray(RECORD_BATCH_HEADER_SIZE), 'buffer');
}

/**
 * A captured exchange as sidecars of this build make it: the captured frames speak segment-list
 * version 2 (before digests), so the marked request's capability is rewritten to version 3 and
 * each reference of the sidecar's answer gets the digest of the batch it names in the captured
 * objects. Everything else is the captured bytes through the codec, which re-encodes them unchanged.
 */
function withDigests(fixture: FetchFixture, objects: ReadonlyMap<string, Buffer>): FetchFixture {
  const request = fixture.markedRequest.subarray(4);
  const requestHeader = decodeRequestHeader(request);
  const marked = decodeFetchRequest(request.subarray(requestHeader.headerLength), fixture.version);
  marked.taggedFields = marked.taggedFields?.map((t) =>
    t.tag === FETCH_CAPABILITY_TAG
      ? { tag: t.tag, data: encodeFetchCapability({ ...decodeFetchCapability(t.data), version: 3 }) }
      : t,
  );
  const answer = decodeFetch(fixture.referencedResponse, fixture.version)!;
  for (const { partition } of partitionsOf(answer.body)) {
    partition.taggedFields = partition.taggedFields?.map((t) => {
      if (t.tag !== PARTITION_SEGMENTS_TAG) return t;
      const segments = decodePartitionSegments(t.data).map((s) =>
        s.kind === 'inline'
          ? s
          : {
              ...s,
              digest: recordsDigest(objects.get(s.objectKey)!.subarray(s.position, s.position + s.length)),
            },
      );
      return { tag: t.tag, data: encodePartitionSegments(segments, 3) };
    });
  }
  const responseHeader = fixture.referencedResponse.subarray(4, 4 + answer.headerLength);
  return {
    ...fixture,
    markedRequest: framed(
      Buffer.concat([
        request.subarray(0, requestHeader.headerLength),
        encodeFetchRequest(marked, fixture.version),
      ]),
    ),
    referencedResponse: framed(
      Buffer.concat([responseHeader, encodeFetchResponse(answer.body, fixture.version)]),
    ),
  };
}

const captured: FuzzFixtures = fuzzFixtures();
/** The captured frames, as a version-2 follower side (before digests) exchanged them. */
export const capturedV2Fetch: readonly FetchFixture[] = captured.fetch;
export const fixtures: FuzzFixtures = {
  ...captured,
  fetch: captured.fetch.map((f) => withDigests(f, captured.objects)),
};
export const namesById = new Map(Object.entries(fixtures.manifest.topics).map(([name, id]) => [id, name]));

export const topicNames = {
  nameOf: (id: string) => namesById.get(id),
  isUnknown: (id: string) => !namesById.has(id),
  resolve: async (id: string) => namesById.get(id),
} as unknown as TopicNames;

/** A produced batch the leader's WAL holds: where, and its bytes as stored. */
export interface WalBatch {
  topic: string;
  partition: number;
  objectKey: string;
  position: number;
  length: number;
}

/** Every batch of the captured WAL objects. */
export function walBatches(objects: ReadonlyMap<string, Buffer>): WalBatch[] {
  const out: WalBatch[] = [];
  for (const [objectKey, object] of objects) {
    for (const e of parseWalObject(object).entries) {
      out.push({
        topic: e.topicName || namesById.get(e.topicId)!,
        partition: e.partition,
        objectKey,
        position: e.position,
        length: e.length,
      });
    }
  }
  return out;
}

/** The leader's batch index holding `batches`, stored in `objects`: as after their uploads. */
export async function leaderIndex(
  batches: readonly WalBatch[],
  objects: ReadonlyMap<string, Buffer>,
): Promise<WalBatchIndex> {
  // Small: a default index allocates for a million entries, too slow to build per case.
  const index = new WalBatchIndex({ maxEntries: 256 });
  for (const b of batches) {
    const object = objects.get(b.objectKey)!;
    const ticket: WalAppendTicket = {
      durable: Promise.resolve({
        objectKey: b.objectKey,
        position: b.position,
        length: b.length,
        objectSize: object.length,
        uploadedAtMs: 0,
      }),
      confirm: () => undefined,
      reject: () => undefined,
    };
    index.add(b.topic, b.partition, object.subarray(b.position, b.position + b.length), ticket);
  }
  // The index learns each location when its ticket settles.
  await Promise.resolve();
  await Promise.resolve();
  return index;
}

/** The memory store of the follower side, whose GETs of `failing` keys fail and of `hanging` keys never answer. */
export class FuzzStore extends MemoryObjectStore {
  override readonly url = fixtures.manifest.storeUrl;
  readonly failing = new Set<string>();
  readonly hanging = new Set<string>();

  override async get(key: string, range?: ByteRange): Promise<Buffer> {
    if (this.hanging.has(key)) return new Promise<Buffer>(() => undefined);
    if (this.failing.has(key)) throw unreachable(key);
    return super.get(key, range);
  }
}

export function storeOf(objects: ReadonlyMap<string, Buffer>): FuzzStore {
  const store = new FuzzStore();
  for (const [key, object] of objects) store.objects.set(key, Buffer.from(object));
  return store;
}

/** A follower-side fill reading the leader's store through `store`. */
export function followerFill(store: FuzzStore, fillDeadlineMs = 20): FetchFillFilter {
  const reader = new WalRangeReader({ store });
  return new FetchFillFilter({
    readerFor: (url) => {
      if (url === fixtures.manifest.storeUrl) return reader;
      // As PeerStoreReaders does for a listed name it cannot open: a malformed URL throws.
      new URL(url);
      return undefined;
    },
    log: createLogger('silent'),
    fillDeadlineMs,
  });
}

export interface DecodedFetch {
  headerLength: number;
  body: FetchResponse;
}

/** The response as the codec reads it, or undefined for bytes it cannot read. */
export function decodeFetch(frame: Buffer, version: number): DecodedFetch | undefined {
  try {
    const payload = frame.subarray(4);
    const { headerLength } = decodeResponseHeader(payload, responseHeaderVersion(ApiKey.Fetch, version)!);
    return { headerLength, body: decodeFetchResponse(payload.subarray(headerLength), version) };
  } catch {
    return undefined;
  }
}

export interface Located {
  topicKey: string;
  partition: FetchResponsePartition;
}

export function partitionsOf(body: FetchResponse): Located[] {
  return body.responses.flatMap((t) =>
    t.partitions.map((partition) => ({ topicKey: t.topicId ?? t.topic ?? '', partition })),
  );
}

export function segmentsOf(partition: FetchResponsePartition): PartitionSegment[] | undefined {
  const tag = partition.taggedFields?.find((t) => t.tag === PARTITION_SEGMENTS_TAG);
  return tag ? decodePartitionSegments(tag.data) : undefined;
}

/** Everything of a partition but its records and our tag: what no walproxy hop may change. */
export function partitionFields(partition: FetchResponsePartition): unknown {
  const { records: _records, taggedFields, ...rest } = partition;
  const others = taggedFields?.filter((t) => t.tag !== PARTITION_SEGMENTS_TAG) ?? [];
  return plain({ ...rest, taggedFields: others.length === 0 ? undefined : others });
}

export function responseFields(body: FetchResponse): unknown {
  const { responses, ...rest } = body;
  return plain({
    ...rest,
    topics: responses.map((t) => ({
      id: t.topicId ?? t.topic,
      tags: t.taggedFields,
      n: t.partitions.length,
    })),
  });
}

/** Where each complete batch of `records` ends. */
export function batchEnds(records: Buffer): Set<number> {
  const ends = new Set<number>([0]);
  try {
    for (const batch of recordBatches(records)) {
      if (batch.partial) break;
      ends.add(batch.offset + batch.size);
    }
  } catch {}
  return ends;
}

/** Whether `part` is `whole` cut after one of its complete batches (or all of it). */
export function isBatchPrefix(part: Buffer, whole: Buffer): boolean {
  if (part.length > whole.length || !whole.subarray(0, part.length).equals(part)) return false;
  return part.length === whole.length || batchEnds(whole).has(part.length);
}

/**
 * Whether a follower may get this batch: its CRC-32C holds, and from its Magic byte on it is
 * the produced batch the WAL stores where one of the partition's references points (the leader
 * assigned the first twelve bytes and the leader epoch, outside the CRC), whose records have the
 * reference's digest. `objects` are the leader's: a store changed since cannot make a batch fit.
 */
export function isStoredBatch(
  batch: Buffer,
  references: readonly PartitionSegment[],
  objects: ReadonlyMap<string, Buffer>,
): boolean {
  if (batch.length < 61 || crc32c(batch.subarray(CRC_START)) !== batch.readUInt32BE(17)) return false;
  return references.some((s) => {
    if (s.kind !== 'reference' || s.length !== batch.length) return false;
    const stored = objects.get(s.objectKey)?.subarray(s.position, s.position + s.length);
    return (
      stored !== undefined &&
      stored.length === batch.length &&
      s.crc === batch.readUInt32BE(17) &&
      s.digest !== undefined &&
      recordsDigest(batch).equals(s.digest) &&
      stored.subarray(16).equals(batch.subarray(16)) &&
      stored.subarray(8, 12).equals(batch.subarray(8, 12))
    );
  });
}
