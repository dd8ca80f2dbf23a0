import { createHash } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import zlib from 'node:zlib';
import {
  ApiKey,
  decodeFetchResponse,
  decodePartitionSegments,
  decodePrefetchHints,
  decodeWalTrace,
  encodeFetchCapability,
  encodeFetchRequest,
  encodeFetchResponse,
  encodePrefetchHintsWanted,
  encodeRequestHeader,
  encodeResponseHeader,
  FETCH_CAPABILITY_TAG,
  type FetchResponse,
  PARTITION_SEGMENTS_TAG,
  PREFETCH_HINTS_TAG,
  recordBatches,
  WAL_TRACE_TAG,
} from '@walproxy/shared';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { collidingPair } from '../../../shared/test/helpers/crc-forge.js';
import { buildRecordBatch, sampleBatch } from '../../../shared/test/helpers/record-batches.js';
import {
  FETCH_STRIP_CHANNELS,
  type FetchStripEvent,
  FetchStripFilter,
  type FetchTraceContextEvent,
} from '../../src/filters/fetch-strip.js';
import { createLogger } from '../../src/log.js';
import { TopicNames } from '../../src/metadata/topic-names.js';
import type { FilterConnection, RequestInfo } from '../../src/net/frame-filter.js';
import { StoreHealth } from '../../src/store/store-health.js';
import { TopicPolicy } from '../../src/topics/topic-policy.js';
import { WalBatchIndex } from '../../src/wal/batch-index.js';
import { type WalAppendTicket, type WalLocation, WalWriter } from '../../src/wal/index.js';
import { MemoryObjectStore } from '../wal/memory-store.js';

const TOPIC_ID = 'aa'.repeat(16);

/** What a version-3 reference carries: the SHA-256 of the batch's records section. */
function recordsDigest(batch: Buffer): Buffer {
  return createHash('sha256').update(batch.subarray(61)).digest();
}
const VERSION = 17;
const STORE = 's3://walproxy--use1-az4--x-s3/wal';

function frame(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

function fetchRequest(
  inline: Array<{ partition: number }> | 'unmarked',
  capabilityVersion?: number,
  spoil: (capability: Buffer) => Buffer = (c) => c,
  /** With the follower side's ask for prefetch hints (as this build's follower side sends it). */
  asksHints = false,
): Buffer {
  const capability = (inlineRequests: Array<{ partition: number }>) => {
    const data = encodeFetchCapability({
      inlineRequests: inlineRequests.map((r) => ({
        topicId: TOPIC_ID,
        partition: r.partition,
        fromOffset: 0n,
      })),
    });
    if (capabilityVersion !== undefined) data[0] = capabilityVersion;
    return spoil(data);
  };
  const taggedFields = inline === 'unmarked' ? [] : [{ tag: FETCH_CAPABILITY_TAG, data: capability(inline) }];
  if (asksHints) taggedFields.push({ tag: PREFETCH_HINTS_TAG, data: encodePrefetchHintsWanted() });
  return frame([
    encodeRequestHeader({
      apiKey: ApiKey.Fetch,
      apiVersion: VERSION,
      correlationId: 9,
      clientId: 'broker-2-fetcher-0',
    }),
    encodeFetchRequest(
      {
        maxWaitMs: 500,
        minBytes: 1,
        maxBytes: 10 << 20,
        isolationLevel: 0,
        sessionId: 0,
        sessionEpoch: 0,
        topics: [
          { topicId: TOPIC_ID, partitions: [{ partition: 0, fetchOffset: 0n, partitionMaxBytes: 1 << 20 }] },
        ],
        forgottenTopicsData: [],
        rackId: '',
        replicaState: { replicaId: 2, replicaEpoch: 7n },
        taggedFields,
      },
      VERSION,
    ),
  ]);
}

function fetchResponse(records: Buffer): { frame: Buffer; body: FetchResponse } {
  const body: FetchResponse = {
    throttleTimeMs: 0,
    errorCode: 0,
    sessionId: 77,
    responses: [
      {
        topicId: TOPIC_ID,
        partitions: [
          {
            partitionIndex: 0,
            errorCode: 0,
            highWatermark: 100n,
            lastStableOffset: 100n,
            logStartOffset: 0n,
            abortedTransactions: null,
            preferredReadReplica: -1,
            records,
          },
        ],
      },
    ],
  };
  return {
    frame: frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]),
    body,
  };
}

function ticket(location: Promise<WalLocation>): WalAppendTicket {
  return { durable: location, confirm: () => undefined, reject: () => undefined };
}

/** A ticket whose batch is already stored at byte 28 of object o1. */
function storedTicket(length: number): WalAppendTicket {
  return ticket(Promise.resolve({ objectKey: 'o1', position: 28, length, objectSize: 999, uploadedAtMs: 1 }));
}

/** As the leader stores it: same bytes as produced except base offset and leader epoch. */
function asStored(produced: Buffer, baseOffset: bigint): Buffer {
  const stored = Buffer.from(produced);
  stored.writeBigInt64BE(baseOffset, 0);
  stored.writeInt32BE(5, 12);
  return stored;
}

function setup(maxHoldMs = 200) {
  const index = new WalBatchIndex();
  const topicNames = {
    nameOf: (id: string) => (id === TOPIC_ID ? 'wal-orders' : undefined),
  } as unknown as TopicNames;
  const filter = new FetchStripFilter({
    index,
    topicNames,
    maxHoldMs,
    storeUrl: STORE,
    log: createLogger('silent'),
  });
  return { index, filter };
}

const info = (): RequestInfo => ({ apiKey: ApiKey.Fetch, apiVersion: VERSION, correlationId: 9 });

function segmentsOf(response: Buffer) {
  const body = decodeFetchResponse(response.subarray(4 + 5), VERSION);
  const partition = body.responses[0]!.partitions[0]!;
  const tag = partition.taggedFields?.find((t) => t.tag === PARTITION_SEGMENTS_TAG);
  return { body, partition, segments: tag ? decodePartitionSegments(tag.data) : undefined };
}

describe('FetchStripFilter', () => {
  it('forwards a marked Fetch the codec cannot read as sent, and answers it stock', async () => {
    // Given a stored batch, and a marked Fetch whose client id is not UTF-8 (found by fuzzing:
    // the filter threw and the pipe closed a connection the broker answers; Kafka reads any
    // bytes as a string)
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, storedTicket(a.length));
    await Promise.resolve();
    const request = fetchRequest([]);
    request[4 + 10] = 0xff;
    const i = info();
    // When it passes, then it goes up as it came
    expect(filter.onRequest(i, request)).toEqual({ action: 'forward', frame: request, expectResponse: true });
    // And the broker's answer comes back as the broker sent it, without references
    const { frame: response } = fetchResponse(asStored(a, 0n));
    expect(await filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.requestsNotDecoded).toBe(1);
  });

  it('replaces stored batches by references and keeps the rest inline, in order', async () => {
    const { index, filter } = setup();
    // Given two produced batches stored in the WAL, and one the WAL never saw
    const a = sampleBatch(0n, 3, 100, 1);
    const b = sampleBatch(0n, 2, 50, 2);
    const c = sampleBatch(0n, 1, 10, 3);
    index.add('wal-orders', 0, a, storedTicket(a.length));
    index.add(
      'wal-orders',
      0,
      c,
      ticket(
        Promise.resolve({
          objectKey: 'o2',
          position: 28,
          length: c.length,
          objectSize: 999,
          uploadedAtMs: 1,
        }),
      ),
    );
    await Promise.resolve();
    const storedA = asStored(a, 0n);
    const storedB = asStored(b, 3n);
    const storedC = asStored(c, 5n);
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    // When the broker answers a marked fetch with a, b, c
    const { frame: response, body } = fetchResponse(Buffer.concat([storedA, storedB, storedC]));
    const out = await filter.onResponse(i, response);
    // Then records hold only b, and the segments say: ref(a), inline(b), ref(c) with the offsets,
    // epochs and CRCs the leader stored, and the SHA-256 of the records that proved them
    const { partition, segments, body: rewritten } = segmentsOf(out);
    expect(partition.records!.equals(storedB)).toBe(true);
    expect(segments).toEqual([
      {
        kind: 'reference',
        baseOffset: storedA.readBigInt64BE(0),
        partitionLeaderEpoch: storedA.readInt32BE(12),
        crc: storedA.readUInt32BE(17),
        digest: recordsDigest(storedA),
        store: STORE,
        objectKey: 'o1',
        position: 28,
        length: a.length,
      },
      { kind: 'inline', length: storedB.length },
      {
        kind: 'reference',
        baseOffset: storedC.readBigInt64BE(0),
        partitionLeaderEpoch: storedC.readInt32BE(12),
        crc: storedC.readUInt32BE(17),
        digest: recordsDigest(storedC),
        store: STORE,
        objectKey: 'o2',
        position: 28,
        length: c.length,
      },
    ]);
    // And nothing else changed
    expect(rewritten.sessionId).toBe(body.sessionId);
    expect(partition.highWatermark).toBe(100n);
    expect(filter.stats.referencesSent).toBe(2);
  });

  it('gives an unmarked fetch (a stock follower) the broker bytes untouched', () => {
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, storedTicket(a.length));
    const i = info();
    filter.onRequest(i, fetchRequest('unmarked'));
    const { frame: response } = fetchResponse(asStored(a, 0n));
    expect(filter.onResponse(i, response)).toBe(response);
  });

  it('answers a version-2 follower side (before digests, a rolling upgrade) with version-2 references', async () => {
    // Given a batch in the WAL, and a follower whose sidecar marks its Fetch with format version 2
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, storedTicket(a.length));
    await Promise.resolve();
    const i = info();
    filter.onRequest(i, fetchRequest([], 2));
    // When the broker answers, then the batch goes as a reference in a version-2 list: no digest
    const out = await filter.onResponse(i, fetchResponse(asStored(a, 0n)).frame);
    const body = decodeFetchResponse(out.subarray(4 + 5), VERSION);
    const tag = body.responses[0]!.partitions[0]!.taggedFields!.find(
      (t) => t.tag === PARTITION_SEGMENTS_TAG,
    )!;
    expect(tag.data[0]).toBe(2);
    expect(decodePartitionSegments(tag.data)).toEqual([
      {
        kind: 'reference',
        baseOffset: 0n,
        partitionLeaderEpoch: 5,
        crc: a.readUInt32BE(17),
        store: STORE,
        objectKey: 'o1',
        position: 28,
        length: a.length,
      },
    ]);
    expect(filter.stats.unknownCapabilityVersions).toBe(0);
  });

  it('gives a follower side that reads another reference format the broker bytes untouched', () => {
    // Given a batch in the WAL, and a follower whose sidecar marks its Fetch with format version 1
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, storedTicket(a.length));
    const i = info();
    filter.onRequest(i, fetchRequest([], 1));
    // When the broker answers, then the follower gets the stock response, and it is counted
    const { frame: response } = fetchResponse(asStored(a, 0n));
    expect(filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.unknownCapabilityVersions).toBe(1);
  });

  it('answers stock a marked request whose capability it cannot read', () => {
    // Given a capability tag cut after its inline-request count (found by fuzzing: the filter
    // threw and the pipe closed the connection, though the broker ignores the tag)
    const { filter } = setup();
    const request = fetchRequest([{ partition: 0 }], undefined, (c) => c.subarray(0, 2));
    const i = info();
    // When it passes, then it goes up as it came
    expect(filter.onRequest(i, request)).toEqual({ action: 'forward', frame: request, expectResponse: true });
    // And the answer is the broker's, unmarked
    const { frame: response } = fetchResponse(sampleBatch(0n, 1, 10, 1));
    expect(filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.unknownCapabilityVersions).toBe(1);
  });

  it('sends a partition inline when the follower side asked for it', () => {
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, storedTicket(a.length));
    const i = info();
    filter.onRequest(i, fetchRequest([{ partition: 0 }]));
    const { frame: response } = fetchResponse(asStored(a, 0n));
    expect(filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.inline.requestedInline).toBe(1);
  });

  it('holds a response for a batch still uploading, then references it', async () => {
    const { index, filter } = setup(5_000);
    const a = sampleBatch(0n, 3, 100, 1);
    let store!: (l: WalLocation) => void;
    index.add(
      'wal-orders',
      0,
      a,
      ticket(
        new Promise((r) => {
          store = r;
        }),
      ),
    );
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const pending = filter.onResponse(i, fetchResponse(asStored(a, 0n)).frame);
    expect(pending).toBeInstanceOf(Promise);
    store({ objectKey: 'o1', position: 28, length: a.length, objectSize: 999, uploadedAtMs: 1 });
    const { segments } = segmentsOf(await pending);
    expect(segments?.[0]).toMatchObject({ kind: 'reference', objectKey: 'o1' });
  });

  it('sends a batch inline when its upload outlasts the hold', async () => {
    const { index, filter } = setup(20);
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, ticket(new Promise(() => undefined)));
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const { frame: response } = fetchResponse(asStored(a, 0n));
    expect(await filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.inline.notStoredInTime).toBe(1);
  });

  it('does not reference a batch the broker rewrote (its header bytes 17..61 differ)', () => {
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, storedTicket(a.length));
    const rewritten = asStored(a, 0n);
    rewritten.writeBigInt64BE(123n, 35); // e.g. LogAppendTime restamped MaxTimestamp (same CRC by accident)
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const { frame: response } = fetchResponse(rewritten);
    expect(filter.onResponse(i, response)).toBe(response);
    // And says why: the same producer sent it, the broker changed it
    expect(filter.stats.inline.rewrittenByBroker).toBe(1);
    expect(filter.stats.inline.notInWal).toBe(0);
  });
});

describe('FetchStripFilter per-topic hold', () => {
  it("holds as long as the topic's own max.hold.ms, not the global one", async () => {
    // Given a global hold of 0 ms, and 5 s for wal-orders through --topic-config
    const index = new WalBatchIndex();
    const topicNames = {
      nameOf: (id: string) => (id === TOPIC_ID ? 'wal-orders' : undefined),
    } as unknown as TopicNames;
    const policy = new TopicPolicy(
      { wal: true, lingerMs: 10, targetBytes: 400_000, durableAck: true, mode: 'wal', maxHoldMs: 0 },
      [{ pattern: 'wal-orders', settings: { maxHoldMs: 5_000 } }],
    );
    const filter = new FetchStripFilter({
      index,
      topicNames,
      maxHoldMs: 0,
      policy,
      storeUrl: STORE,
      log: createLogger('silent'),
    });
    const a = sampleBatch(0n, 3, 100, 1);
    let store!: (l: WalLocation) => void;
    index.add(
      'wal-orders',
      0,
      a,
      ticket(
        new Promise((r) => {
          store = r;
        }),
      ),
    );
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const pending = filter.onResponse(i, fetchResponse(asStored(a, 0n)).frame);
    // When the upload finishes after a few ticks
    await new Promise((r) => setTimeout(r, 20));
    store({ objectKey: 'o1', position: 28, length: a.length, objectSize: 999, uploadedAtMs: 1 });
    // Then the batch still went as a reference: the 0 ms global hold did not apply
    const { segments } = segmentsOf(await pending);
    expect(segments?.[0]).toMatchObject({ kind: 'reference', objectKey: 'o1' });
  });
});

describe('FetchStripFilter and CRC-32C collisions', () => {
  it('sends inline a log batch whose CRC, length and header match a WAL batch with other records', async () => {
    // Given batch a in the WAL, and batch b in the leader's log: same CRC-32C, length, header
    const [a, b] = collidingPair();
    const { index, filter } = setup();
    index.add('wal-orders', 0, a, storedTicket(a.length));
    await Promise.resolve();
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    // When a follower fetches b
    const { frame: response } = fetchResponse(asStored(b, 0n));
    // Then it gets the broker's bytes: b, not a reference to a's copy
    expect(await filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.referencesSent).toBe(0);
    expect(filter.stats.inline.digestMismatch).toBe(1);
  });
});

/**
 * A magic 0 or 1 message set of one message (LegacyRecord): Offset int64, MessageSize int32, CRC
 * (CRC-32 of the rest), Magic, Attributes, [Timestamp int64 from magic 1], Key bytes, Value bytes.
 */
function legacyMessage(magic: 0 | 1, offset: bigint, value: string): Buffer {
  const v = Buffer.from(value);
  const body = Buffer.alloc(1 + 1 + (magic === 1 ? 8 : 0) + 4 + 4 + v.length);
  let at = 0;
  body.writeInt8(magic, at++);
  body.writeInt8(0, at++);
  if (magic === 1) {
    body.writeBigInt64BE(1_700_000_000_000n, at);
    at += 8;
  }
  body.writeInt32BE(-1, at); // null key
  at += 4;
  body.writeInt32BE(v.length, at);
  v.copy(body, at + 4);
  const out = Buffer.alloc(12 + 4 + body.length);
  out.writeBigInt64BE(offset, 0);
  out.writeInt32BE(4 + body.length, 8);
  out.writeUInt32BE(zlib.crc32(body), 12);
  body.copy(out, 16);
  return out;
}

function twoPartitionResponse(p0: Buffer, p1: Buffer): { frame: Buffer; body: FetchResponse } {
  const { body } = fetchResponse(p0);
  const first = body.responses[0]!.partitions[0]!;
  body.responses[0]!.partitions.push({ ...first, partitionIndex: 1, records: p1 });
  return {
    frame: frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]),
    body,
  };
}

describe('FetchStripFilter and records that are not magic v2', () => {
  it.each([0, 1] as const)(
    'sends a magic %i partition exactly as the broker did and references the v2 partition',
    async (magic) => {
      // Given a v2 batch in the WAL for partition 1, and partition 0 holding an old message set
      const { index, filter } = setup();
      const a = sampleBatch(0n, 3, 100, 1);
      index.add('wal-orders', 1, a, storedTicket(a.length));
      await Promise.resolve();
      const legacy = Buffer.concat([legacyMessage(magic, 0n, 'old-1'), legacyMessage(magic, 1n, 'old-2')]);
      const i = info();
      filter.onRequest(i, fetchRequest([]));
      // When a follower's marked fetch returns both partitions
      const { frame: response } = twoPartitionResponse(legacy, asStored(a, 0n));
      const out = await filter.onResponse(i, response);
      // Then partition 0 is byte for byte the broker's, partition 1 is a reference
      const body = decodeFetchResponse(out.subarray(4 + 5), VERSION);
      const [p0, p1] = body.responses[0]!.partitions;
      expect(p0!.records!.equals(legacy)).toBe(true);
      expect(p0!.taggedFields?.some((t) => t.tag === PARTITION_SEGMENTS_TAG) ?? false).toBe(false);
      const segments = decodePartitionSegments(
        p1!.taggedFields!.find((t) => t.tag === PARTITION_SEGMENTS_TAG)!.data,
      );
      expect(segments).toMatchObject([{ kind: 'reference', objectKey: 'o1' }]);
      // And the old records are counted inline as notV2
      expect(filter.stats.inline.notV2).toBe(1);
      expect(filter.stats.inlineBytesByReason.notV2).toBe(legacy.length);
    },
  );

  it('passes on garbage records untouched without throwing', async () => {
    const { filter } = setup();
    const garbage = Buffer.alloc(300, 0xee);
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const { frame: response } = fetchResponse(garbage);
    expect(await filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.inline.notV2).toBe(1);
  });
});

describe('FetchStripFilter inline byte counts', () => {
  it('counts every inline byte of every partition, also of partitions without any WAL batch', async () => {
    // Given a marked response: partition 0 with two batches the WAL never saw, partition 1 with a
    // WAL batch followed by one the WAL never saw and an incomplete batch cut by size
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    const b = asStored(sampleBatch(0n, 2, 50, 2), 0n);
    const c = asStored(sampleBatch(0n, 2, 70, 3), 2n);
    const d = asStored(sampleBatch(0n, 1, 30, 4), 3n);
    const partial = asStored(sampleBatch(0n, 5, 40, 5), 10n).subarray(0, 80);
    index.add('wal-orders', 1, a, storedTicket(a.length));
    await Promise.resolve();
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const { frame: response } = twoPartitionResponse(
      Buffer.concat([b, c]),
      Buffer.concat([asStored(a, 0n), d, partial]),
    );
    await filter.onResponse(i, response);
    // Then every inline byte is counted, by reason
    const inlineBytes = b.length + c.length + d.length + partial.length;
    expect(filter.stats.inlineBytes).toBe(inlineBytes);
    expect(filter.stats.inlineBytesByReason).toMatchObject({
      notInWal: b.length + c.length + d.length,
      partialBatch: 80,
    });
    expect(filter.stats.bytesReferenced).toBe(a.length);
  });

  it('counts the inline bytes of a response none of whose batches are in the WAL', async () => {
    const { filter } = setup();
    const b = asStored(sampleBatch(0n, 2, 50, 2), 0n);
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const { frame: response } = fetchResponse(b);
    expect(await filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.inlineBytes).toBe(b.length);
  });
});

describe('FetchStripFilter on mutated real responses', () => {
  const golden = readFileSync(
    new URL('../../../shared/test/fixtures/golden/Fetch-v18-response-replica-2.bin', import.meta.url),
  );
  const real = Buffer.concat([Buffer.alloc(4), golden]);
  real.writeInt32BE(golden.length, 0);

  it('never throws and never changes a byte of partitions it does not reference', async () => {
    const decoded = decodeFetchResponse(golden.subarray(5), 18);
    const allRecords = decoded.responses
      .flatMap((t) => t.partitions.map((p) => p.records))
      .filter((r) => r !== null);
    expect(allRecords.some((r) => r.length > 0)).toBe(true);
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({ at: fc.nat({ max: real.length - 5 }), value: fc.integer({ min: 0, max: 255 }) }),
          {
            minLength: 1,
            maxLength: 8,
          },
        ),
        async (mutations) => {
          const mutated = Buffer.from(real);
          for (const m of mutations) mutated[4 + 1 + m.at] = m.value;
          // Every complete batch of the original is in the WAL (the strip may reference it)
          const index = new WalBatchIndex();
          const topicNames = { nameOf: () => 'wal-orders' } as unknown as TopicNames;
          for (const t of decoded.responses) {
            for (const p of t.partitions) {
              for (const batch of recordBatches(p.records ?? Buffer.alloc(0))) {
                if (!batch.partial)
                  index.add(
                    'wal-orders',
                    p.partitionIndex,
                    Buffer.from(batch.bytes()),
                    storedTicket(batch.size),
                  );
              }
            }
          }
          await Promise.resolve();
          const filter = new FetchStripFilter({
            index,
            topicNames,
            maxHoldMs: 0,
            storeUrl: STORE,
            log: createLogger('silent'),
          });
          const i: RequestInfo = { apiKey: ApiKey.Fetch, apiVersion: 18, correlationId: 1 };
          filter.onRequest(i, fetchRequestV18());
          const out = await filter.onResponse(i, mutated);
          if (out === mutated) return;
          // A rewritten response: every partition without segments is byte for byte the input's
          const before = decodeFetchResponse(mutated.subarray(4 + 5), 18);
          const after = decodeFetchResponse(out.subarray(4 + 5), 18);
          for (const [t, topic] of after.responses.entries()) {
            for (const [p, partition] of topic.partitions.entries()) {
              const original = before.responses[t]!.partitions[p]!;
              const segmentsTag = partition.taggedFields?.find((x) => x.tag === PARTITION_SEGMENTS_TAG);
              if (segmentsTag === undefined) {
                expect(partition).toEqual(original);
                continue;
              }
              // A referenced partition: its inline segments are the input's bytes, in order
              const segments = decodePartitionSegments(segmentsTag.data);
              const inlineLength = segments
                .filter((s) => s.kind === 'inline')
                .reduce((n, s) => n + s.length, 0);
              expect(partition.records!.length).toBe(inlineLength);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

function fetchRequestV18(): Buffer {
  return frame([
    encodeRequestHeader({
      apiKey: ApiKey.Fetch,
      apiVersion: 18,
      correlationId: 1,
      clientId: 'broker-2-fetcher-0',
    }),
    encodeFetchRequest(
      {
        maxWaitMs: 500,
        minBytes: 1,
        maxBytes: 10 << 20,
        isolationLevel: 0,
        sessionId: 0,
        sessionEpoch: 0,
        topics: [],
        forgottenTopicsData: [],
        rackId: '',
        replicaState: { replicaId: 2, replicaEpoch: 7n },
        taggedFields: [{ tag: FETCH_CAPABILITY_TAG, data: encodeFetchCapability({ inlineRequests: [] }) }],
      },
      18,
    ),
  ]);
}

describe('FetchStripFilter while the store is degraded', () => {
  it('sends a batch still uploading inline at once instead of holding the response', async () => {
    // Given a degraded store and a batch whose upload never ends
    const health = new StoreHealth({ store: STORE, probe: async () => {}, log: createLogger('silent') });
    health.markDegraded('test');
    const index = new WalBatchIndex();
    const topicNames = { nameOf: () => 'wal-orders' } as unknown as TopicNames;
    const filter = new FetchStripFilter({
      index,
      topicNames,
      maxHoldMs: 60_000,
      storeUrl: STORE,
      health,
      log: createLogger('silent'),
    });
    const a = sampleBatch(0n, 3, 100, 1);
    index.add('wal-orders', 0, a, ticket(new Promise(() => undefined)));
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    // When a follower fetches it, then the broker's bytes go at once: no hold
    const { frame: response } = fetchResponse(asStored(a, 0n));
    expect(filter.onResponse(i, response)).toBe(response);
    expect(filter.stats.holds).toBe(0);
    expect(filter.stats.inline.storeDegraded).toBe(1);
  });
});

describe('FetchStripFilter confirms what the leader appended', () => {
  it('confirms a tentative batch it finds in the leader log, and references it once stored', async () => {
    // Given an acks=0 batch, tentative in the writer: no Produce answer will ever confirm it
    const store = new MemoryObjectStore();
    const writer = new WalWriter({ store, brokerId: 1, lingerMs: 1 });
    const { index, filter } = setup(5_000);
    const a = sampleBatch(0n, 3, 100, 1);
    const t = writer.append({ topicName: 'wal-orders', partition: 0, batch: a }, { tentative: true });
    index.add('wal-orders', 0, a, t);
    // When a follower's fetch finds it in the leader's log
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const out = await filter.onResponse(i, fetchResponse(asStored(a, 0n)).frame);
    // Then the writer stored it and the follower got a reference
    expect(store.objects.size).toBe(1);
    expect(segmentsOf(out).segments?.[0]).toMatchObject({ kind: 'reference' });
    await writer.close();
  });
});

describe('FetchStripFilter and a topic created a moment ago', () => {
  it('waits (within the hold) for its name, so its first batches are referenced and confirmed', async () => {
    // Given a topic the sidecar's id map does not name yet, and its first batch, tentative
    const topicNames = new TopicNames({ host: '127.0.0.1', port: 1 }, createLogger('silent'), {
      fetchNames: async () => new Map([[TOPIC_ID, 'wal-orders']]),
    });
    const store = new MemoryObjectStore();
    const writer = new WalWriter({ store, brokerId: 1, lingerMs: 1 });
    const index = new WalBatchIndex();
    const filter = new FetchStripFilter({
      index,
      topicNames,
      maxHoldMs: 2_000,
      storeUrl: STORE,
      log: createLogger('silent'),
    });
    const a = sampleBatch(0n, 3, 100, 1);
    index.add(
      'wal-orders',
      0,
      a,
      writer.append({ topicName: 'wal-orders', partition: 0, batch: a }, { tentative: true }),
    );
    // When a follower fetches it
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    const out = await filter.onResponse(i, fetchResponse(asStored(a, 0n)).frame);
    // Then it went as a reference, and the WAL stored it
    expect(segmentsOf(out).segments?.[0]).toMatchObject({ kind: 'reference' });
    expect(store.objects.size).toBe(1);
    expect(filter.stats.inline.unknownTopic).toBe(0);
    await writer.close();
  });
});

/**
 * A filter whose policy puts wal-* on the WAL and sets wal-audit to mode=inline, naming the
 * topics `ids` gives (name → id).
 */
function auditPolicyFilter(ids: Record<string, string>, index: WalBatchIndex): FetchStripFilter {
  const names = new Map(Object.entries(ids).map(([name, id]) => [id, name]));
  const policy = new TopicPolicy(
    { wal: false, lingerMs: 10, targetBytes: 400_000, durableAck: false, mode: 'wal', maxHoldMs: 0 },
    [
      { pattern: 'wal-*', settings: { wal: true } },
      { pattern: 'wal-audit', settings: { mode: 'inline' } },
    ],
  );
  return new FetchStripFilter({
    index,
    topicNames: { nameOf: (id: string) => names.get(id), isUnknown: () => false } as unknown as TopicNames,
    maxHoldMs: 0,
    policy,
    storeUrl: STORE,
    log: createLogger('silent'),
  });
}

describe('FetchStripFilter inline reasons by topic', () => {
  it('counts batches of a topic off the WAL as topicNotInWal, of a mode=inline topic as modeInline, a WAL topic missing from the index as notInWal', async () => {
    // Given a policy putting wal-* on the WAL, wal-audit set to mode=inline, and three topics:
    // wal-orders (a WAL topic), wal-audit, and plain (no WAL)
    const ids = { 'wal-orders': TOPIC_ID, 'wal-audit': 'bb'.repeat(16), plain: 'cc'.repeat(16) };
    const index = new WalBatchIndex();
    const filter = auditPolicyFilter(ids, index);
    const referenced = sampleBatch(0n, 1, 40, 9);
    index.add('wal-orders', 0, referenced, storedTicket(referenced.length));
    await Promise.resolve();
    const batches = (seed: number) =>
      Buffer.concat([
        asStored(sampleBatch(0n, 2, 50, seed), 0n),
        asStored(sampleBatch(0n, 1, 30, seed + 1), 2n),
      ]);
    const missing = asStored(sampleBatch(0n, 2, 60, 20), 1n);
    const { body } = fetchResponse(Buffer.concat([asStored(referenced, 0n), missing]));
    const template = body.responses[0]!.partitions[0]!;
    body.responses.push(
      { topicId: ids['wal-audit'], partitions: [{ ...template, records: batches(30) }] },
      { topicId: ids.plain, partitions: [{ ...template, records: batches(40) }] },
    );
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    // When the broker answers a marked fetch with all three
    await filter.onResponse(
      i,
      frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]),
    );
    // Then only the WAL topic's batch the index does not have is a notInWal fallback
    expect(filter.stats.inline).toMatchObject({ notInWal: 1, modeInline: 2, topicNotInWal: 2 });
    expect(filter.stats.inlineBytesByReason).toMatchObject({
      notInWal: missing.length,
      modeInline: batches(30).length,
      topicNotInWal: batches(40).length,
    });
    expect(filter.stats.referencesSent).toBe(1);
  });
});

describe('FetchStripFilter, topics the index never holds', () => {
  it('counts a non-WAL and a mode=inline topic’s batches from their headers, control and partial ones as the walk does, and never looks them up', async () => {
    // Given a policy putting wal-* on the WAL with wal-audit set to mode=inline, and plain off it
    const ids = { 'wal-audit': 'bb'.repeat(16), plain: 'cc'.repeat(16) };
    const index = new WalBatchIndex();
    const lookups: string[] = [];
    const lookup = index.lookup.bind(index);
    index.lookup = (topic, partition, batch) => {
      lookups.push(topic);
      return lookup(topic, partition, batch);
    };
    const filter = auditPolicyFilter(ids, index);
    // Each partition: two batches, a transaction marker (control) and a batch cut short by size
    const marker = buildRecordBatch({
      baseOffset: 3n,
      attributes: 0x30,
      producerId: 7n,
      producerEpoch: 0,
      records: [{ key: Buffer.from([0, 0, 0, 1]), value: Buffer.from([0, 0, 0, 0, 0, 0]) }],
    });
    const records = (seed: number) =>
      Buffer.concat([
        asStored(sampleBatch(0n, 2, 50, seed), 0n),
        asStored(sampleBatch(0n, 1, 30, seed + 1), 2n),
        marker,
        asStored(sampleBatch(0n, 3, 40, seed + 2), 4n).subarray(0, 70),
      ]);
    const { body } = fetchResponse(records(30));
    const template = body.responses[0]!.partitions[0]!;
    body.responses = [
      { topicId: ids['wal-audit'], partitions: [{ ...template, records: records(30) }] },
      { topicId: ids.plain, partitions: [{ ...template, records: records(40) }] },
    ];
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    // When the broker answers a marked fetch with both
    const sent = frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]);
    const out = await filter.onResponse(i, sent);
    // Then the answer is the broker's, every batch is counted under its reason, the marker as
    // control and the cut batch with its topic's, and the index was never asked
    expect(out).toBe(sent);
    expect(filter.stats.inline).toMatchObject({
      control: 2,
      modeInline: 3,
      topicNotInWal: 3,
      partialBatch: 0,
    });
    expect(filter.stats.inlineBytesByReason).toMatchObject({
      control: 2 * marker.length,
      modeInline: records(30).length - marker.length,
      topicNotInWal: records(40).length - marker.length,
    });
    expect(lookups).toEqual([]);
  });
});

/** Topics as `rules` say, mode=auto with a 50 ms budget unless a rule says otherwise. */
function autoPolicy(rules: ConstructorParameters<typeof TopicPolicy>[1]): TopicPolicy {
  return new TopicPolicy(
    {
      wal: false,
      latencyBudgetMs: 50,
      targetBytes: 400_000,
      durableAck: false,
      mode: 'auto',
      maxHoldMs: 0,
      zoneLocal: false,
    },
    rules,
  );
}

/** A strip whose sealing policy keeps each budget group in `modeOf(budgetMs)`. */
function sealingStrip(
  index: WalBatchIndex,
  names: ReadonlyMap<string, string>,
  policy: TopicPolicy,
  modeOf: (budgetMs: number) => 'wal' | 'inline' | undefined,
): FetchStripFilter {
  return new FetchStripFilter({
    index,
    topicNames: { nameOf: (id: string) => names.get(id), isUnknown: () => false } as unknown as TopicNames,
    maxHoldMs: 0,
    policy,
    sealing: { currentMode: modeOf },
    storeUrl: STORE,
    log: createLogger('silent'),
  });
}

describe('FetchStripFilter inline reasons under the sealing policy', () => {
  it('counts a mode=auto topic’s missing batches as groupInline while its budget group replicates inline, as notInWal while it goes through the WAL', async () => {
    // Given wal-auto (mode=auto, budget 50 ms), wal-acked (mode=auto, durable ack, budget 25 ms)
    // and wal-busy (mode=auto, budget 100 ms); groups 50 and 25 inline, group 100 in the WAL
    const ids = { 'wal-auto': TOPIC_ID, 'wal-acked': 'bb'.repeat(16), 'wal-busy': 'cc'.repeat(16) };
    const names = new Map(Object.entries(ids).map(([name, id]) => [id, name]));
    const policy = autoPolicy([
      { pattern: 'wal-*', settings: { wal: true } },
      { pattern: 'wal-acked', settings: { durableAck: true, latencyBudgetMs: 25 } },
      { pattern: 'wal-busy', settings: { latencyBudgetMs: 100 } },
    ]);
    const modes = new Map<number, 'wal' | 'inline'>([
      [50, 'inline'],
      [25, 'inline'],
      [100, 'wal'],
    ]);
    const filter = sealingStrip(new WalBatchIndex(), names, policy, (budgetMs) => modes.get(budgetMs));
    const batchOf = (seed: number) => asStored(sampleBatch(0n, 2, 50, seed), 0n);
    const { body } = fetchResponse(batchOf(1));
    const template = body.responses[0]!.partitions[0]!;
    body.responses.push(
      { topicId: ids['wal-acked'], partitions: [{ ...template, records: batchOf(2) }] },
      { topicId: ids['wal-busy'], partitions: [{ ...template, records: batchOf(3) }] },
    );
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    // When a marked fetch gets one batch of each, none of them in the index
    await filter.onResponse(
      i,
      frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]),
    );
    // Then the inline group's batch is by design; the durable-ack topic's (always copied) and the
    // WAL group's are fallbacks
    expect(filter.stats.inline).toMatchObject({ groupInline: 1, notInWal: 2 });
    expect(filter.stats.inlineBytesByReason.groupInline).toBe(batchOf(1).length);
  });
});

describe('FetchStripFilter, a mode=auto topic whose group replicates inline', () => {
  it('never looks up a partition of which the index holds nothing, and still references what it holds', async () => {
    // Given wal-auto (mode=auto, budget 50 ms) whose budget group replicates inline, and an index
    // holding one stored batch of its partition 0 and nothing of partition 1
    const names = new Map([[TOPIC_ID, 'wal-auto']]);
    const policy = autoPolicy([{ pattern: 'wal-*', settings: { wal: true } }]);
    const index = new WalBatchIndex();
    const lookedUp: number[] = [];
    const lookup = index.lookup.bind(index);
    index.lookup = (topic, partition, batch) => {
      lookedUp.push(partition);
      return lookup(topic, partition, batch);
    };
    const held = sampleBatch(0n, 2, 50, 1);
    index.add('wal-auto', 0, held, storedTicket(held.length));
    await Promise.resolve();
    const filter = sealingStrip(index, names, policy, () => 'inline');
    const quiet = Buffer.concat([
      asStored(sampleBatch(0n, 2, 50, 2), 0n),
      asStored(sampleBatch(0n, 1, 30, 3), 2n),
    ]);
    const { body } = fetchResponse(asStored(held, 0n));
    const template = body.responses[0]!.partitions[0]!;
    body.responses[0]!.partitions.push({ ...template, partitionIndex: 1, records: quiet });
    const i = info();
    filter.onRequest(i, fetchRequest([]));
    // When a marked fetch gets the held batch of partition 0 and two batches of partition 1
    await filter.onResponse(
      i,
      frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]),
    );
    // Then partition 0's batch is referenced, partition 1's are counted as groupInline from their
    // headers, and only partition 0 was looked up
    expect(filter.stats.referencesSent).toBe(1);
    expect(filter.stats.inline).toMatchObject({ groupInline: 2 });
    expect(filter.stats.inlineBytesByReason.groupInline).toBe(quiet.length);
    expect(lookedUp).toEqual([0]);
  });
});

describe('FetchStripFilter and tracing', () => {
  const upload = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };

  /** A response referencing two objects (o1, o2); the strip events published while answering it. */
  async function answer() {
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    const c = sampleBatch(0n, 1, 10, 3);
    const at = (objectKey: string, length: number) =>
      ticket(Promise.resolve({ objectKey, position: 28, length, objectSize: 999, uploadedAtMs: 1 }));
    index.add('wal-orders', 0, a, at('o1', a.length));
    index.add('wal-orders', 0, c, at('o2', c.length));
    await Promise.resolve();
    const events: FetchStripEvent[] = [];
    const onStrip = (e: unknown) => events.push(e as FetchStripEvent);
    subscribe(FETCH_STRIP_CHANNELS.strip, onStrip);
    try {
      const i = info();
      filter.onRequest(i, fetchRequest([]));
      const response = fetchResponse(Buffer.concat([asStored(a, 0n), asStored(c, 3n)])).frame;
      const out = await filter.onResponse(i, response);
      return { out, events, body: decodeFetchResponse(out.subarray(4 + 5), VERSION) };
    } finally {
      unsubscribe(FETCH_STRIP_CHANNELS.strip, onStrip);
    }
  }

  async function answerWith(give: (e: FetchTraceContextEvent) => void) {
    const asked: FetchTraceContextEvent[] = [];
    const handler = (e: unknown) => {
      asked.push(e as FetchTraceContextEvent);
      give(e as FetchTraceContextEvent);
    };
    subscribe(FETCH_STRIP_CHANNELS.traceContext, handler);
    try {
      return { ...(await answer()), asked };
    } finally {
      unsubscribe(FETCH_STRIP_CHANNELS.traceContext, handler);
    }
  }

  it('names the objects it referenced on its strip event, each once', async () => {
    const { events } = await answer();
    expect(events.map((e) => e.objectKeys)).toEqual([['o1', 'o2']]);
  });

  it('carries the upload contexts tracing gives in a top-level tag, 31 bytes for one', async () => {
    // Given tracing that knows the sampled upload span of o2 only
    const { out, body, asked } = await answerWith((e) => {
      if (e.objectKeys.includes('o2')) e.uploads.push(upload);
    });
    // Then tracing was asked about both objects, and the response carries o2's upload context
    expect(asked.map((e) => e.objectKeys)).toEqual([['o1', 'o2']]);
    const tag = body.taggedFields?.find((t) => t.tag === WAL_TRACE_TAG);
    expect(decodeWalTrace(tag!.data)).toEqual([upload]);
    // And it costs 31 bytes against the same response without tracing
    const { out: plain } = await answer();
    expect(out.length - plain.length).toBe(31);
    console.log(
      `trace context in a Fetch response: +${out.length - plain.length} bytes (${plain.length} → ${out.length})`,
    );
  });

  it('adds no byte when tracing listens but has no sampled upload, nor when nothing listens', async () => {
    const { out: untraced, body } = await answer();
    expect(body.taggedFields).toBeUndefined();
    const { out: unsampled, asked } = await answerWith(() => undefined);
    expect(asked).toHaveLength(1);
    expect(unsampled.equals(untraced)).toBe(true);
  });
});

describe('FetchStripFilter holds a response no longer than the smallest hold of its topics (issue #24)', () => {
  const FAST_ID = 'bb'.repeat(16);

  /** wal-orders holds up to 5 s (the default), wal-fast 30 ms (--topic-config). */
  function twoTopics() {
    const index = new WalBatchIndex();
    const names = new Map([
      [TOPIC_ID, 'wal-orders'],
      [FAST_ID, 'wal-fast'],
    ]);
    const topicNames = { nameOf: (id: string) => names.get(id) } as unknown as TopicNames;
    const policy = new TopicPolicy(
      { wal: true, lingerMs: 10, targetBytes: 400_000, durableAck: true, mode: 'wal', maxHoldMs: 5_000 },
      [{ pattern: 'wal-fast', settings: { maxHoldMs: 30 } }],
    );
    const filter = new FetchStripFilter({
      index,
      topicNames,
      maxHoldMs: 5_000,
      policy,
      storeUrl: STORE,
      log: createLogger('silent'),
    });
    return { index, filter };
  }

  function answerOf(orders: Buffer, fast: Buffer): Buffer {
    const partition = (records: Buffer) => ({
      partitionIndex: 0,
      errorCode: 0,
      highWatermark: 100n,
      lastStableOffset: 100n,
      logStartOffset: 0n,
      abortedTransactions: null,
      preferredReadReplica: -1,
      records,
    });
    const body: FetchResponse = {
      throttleTimeMs: 0,
      errorCode: 0,
      sessionId: 77,
      responses: [
        { topicId: TOPIC_ID, partitions: [partition(orders)] },
        { topicId: FAST_ID, partitions: [partition(fast)] },
      ],
    };
    return frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]);
  }

  const uploadingForever = () => ticket(new Promise<WalLocation>(() => undefined));

  it('sends the response when the shortest hold is up, every batch still uploading inline', async () => {
    vi.useFakeTimers();
    try {
      // Given a batch of each topic still uploading, and uploads that never finish
      const { index, filter } = twoTopics();
      const a = sampleBatch(0n, 3, 100, 1);
      const f = sampleBatch(0n, 2, 100, 2);
      index.add('wal-orders', 0, a, uploadingForever());
      index.add('wal-fast', 0, f, uploadingForever());
      const i = info();
      filter.onRequest(i, fetchRequest([]));
      const response = answerOf(asStored(a, 0n), asStored(f, 0n));
      // When a follower fetches both
      let sent: Buffer | undefined;
      void (filter.onResponse(i, response) as Promise<Buffer>).then((out) => {
        sent = out;
      });
      // Then the response waits for wal-fast's 30 ms, not for wal-orders' 5 s
      await vi.advanceTimersByTimeAsync(20);
      expect(sent).toBeUndefined();
      await vi.advanceTimersByTimeAsync(11);
      // And goes as the broker sent it: both batches inline, not stored in time
      expect(sent).toBe(response);
      expect(filter.stats.inline.notStoredInTime).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('does not hold a topic whose batches are stored longer than its own hold for another topic still uploading', async () => {
    vi.useFakeTimers();
    try {
      // Given wal-fast's batch stored and wal-orders' still uploading
      const { index, filter } = twoTopics();
      const a = sampleBatch(0n, 3, 100, 1);
      const f = sampleBatch(0n, 2, 100, 2);
      index.add('wal-orders', 0, a, uploadingForever());
      index.add('wal-fast', 0, f, storedTicket(f.length));
      await Promise.resolve();
      const i = info();
      filter.onRequest(i, fetchRequest([]));
      let sent: Buffer | undefined;
      void (filter.onResponse(i, answerOf(asStored(a, 0n), asStored(f, 0n))) as Promise<Buffer>).then(
        (out) => {
          sent = out;
        },
      );
      // When wal-fast's 30 ms are up
      await vi.advanceTimersByTimeAsync(31);
      // Then the response went: wal-fast's batch as a reference, wal-orders' inline
      expect(sent).toBeDefined();
      const body = decodeFetchResponse(sent!.subarray(4 + 5), VERSION);
      const segments = (t: number) => {
        const tag = body.responses[t]!.partitions[0]!.taggedFields?.find(
          (x) => x.tag === PARTITION_SEGMENTS_TAG,
        );
        return tag && decodePartitionSegments(tag.data).map((s) => s.kind);
      };
      expect(segments(0)).toEqual(['inline']);
      expect(segments(1)).toEqual(['reference']);
      expect(body.responses[0]!.partitions[0]!.records).toEqual(asStored(a, 0n));
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('FetchStripFilter prefetch hints', () => {
  /** A ticket whose batch is already stored at byte 28 of `objectKey`, an object of `objectSize` bytes. */
  const storedIn = (objectKey: string, length: number, objectSize = 999) =>
    ticket(Promise.resolve({ objectKey, position: 28, length, objectSize, uploadedAtMs: 1 }));
  const follower = (): FilterConnection => ({ log: createLogger('silent') });
  const hintsOf = (response: Buffer) => {
    const tag = decodeFetchResponse(response.subarray(4 + 5), VERSION).taggedFields?.find(
      (t) => t.tag === PREFETCH_HINTS_TAG,
    );
    return tag === undefined ? undefined : decodePrefetchHints(tag.data);
  };
  const hinted = async (
    filter: FetchStripFilter,
    connection: FilterConnection,
    records: Buffer,
    asksHints = true,
  ) => {
    const i = info();
    filter.onRequest(i, fetchRequest([], undefined, undefined, asksHints), connection);
    return hintsOf((await filter.onResponse(i, fetchResponse(records).frame)) as Buffer);
  };

  it('names the objects stored ahead for a partition the follower fetches, once each, never the ones it references', async () => {
    // Given batch a stored in o1 (in the leader's log), and b and c stored ahead in o2 and o3
    // (their Produce requests wait behind a's at the broker)
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    const b = sampleBatch(0n, 2, 100, 2);
    const c = sampleBatch(0n, 2, 100, 3);
    index.add('wal-orders', 0, a, storedIn('o1', a.length));
    index.add('wal-orders', 0, b, storedIn('o2', b.length, 2000));
    index.add('wal-orders', 0, c, storedIn('o3', c.length, 3000));
    await Promise.resolve();
    const connection = follower();

    // When a follower side that asks for hints fetches a, then the response references o1 and
    // hints o2 and o3, oldest first, with their sizes
    expect(await hinted(filter, connection, asStored(a, 0n))).toEqual([
      { store: STORE, objectKey: 'o2', size: 2000 },
      { store: STORE, objectKey: 'o3', size: 3000 },
    ]);
    expect(filter.stats.prefetchHintsSent).toBe(2);
    // And when it fetches b, nothing is hinted again (no object stored since)
    expect(await hinted(filter, connection, asStored(b, 3n))).toBeUndefined();
  });

  it('hints nothing to a follower side that does not ask (an older walproxy), nor in a response it does not rewrite', async () => {
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    const b = sampleBatch(0n, 2, 100, 2);
    index.add('wal-orders', 0, a, storedIn('o1', a.length));
    index.add('wal-orders', 0, b, storedIn('o2', b.length));
    await Promise.resolve();
    const connection = follower();
    // An older follower side: the capability, no ask
    expect(await hinted(filter, connection, asStored(a, 0n), false)).toBeUndefined();
    // A response with no batch of the WAL (nothing to reference) passes as the broker sent it
    const empty = info();
    filter.onRequest(empty, fetchRequest([], undefined, undefined, true), connection);
    const stock = fetchResponse(Buffer.alloc(0)).frame;
    expect(await filter.onResponse(empty, stock)).toBe(stock);
    expect(filter.stats.prefetchHintsSent).toBe(0);
  });

  it('forgets a closed connection: a new one from the same follower is hinted afresh', async () => {
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    const b = sampleBatch(0n, 2, 100, 2);
    index.add('wal-orders', 0, a, storedIn('o1', a.length));
    index.add('wal-orders', 0, b, storedIn('o2', b.length));
    await Promise.resolve();
    for (const connection of [follower(), follower()]) {
      expect((await hinted(filter, connection, asStored(a, 0n)))?.map((h) => h.objectKey)).toEqual(['o2']);
      filter.onClose(connection);
    }
  });
});
