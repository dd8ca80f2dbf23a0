import { hash } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import {
  ApiKey,
  crc32c,
  decodeFetchCapability,
  decodeFetchRequest,
  decodeFetchResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeFetchRequest,
  encodeFetchResponse,
  encodePartitionSegments,
  encodePrefetchHints,
  encodeRequestHeader,
  encodeResponseHeader,
  encodeWalTrace,
  FETCH_CAPABILITY_TAG,
  type FetchCapability,
  type FetchRequest,
  type FetchResponse,
  type FetchResponsePartition,
  type FetchResponseTopic,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
  PREFETCH_HINTS_TAG,
  type RawTaggedField,
  WAL_TRACE_TAG,
  wantsPrefetchHints,
} from '@walproxy/shared';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sampleBatch } from '../../../shared/test/helpers/record-batches.js';
import {
  FETCH_FILL_BACKOFF_MIN_MS,
  FETCH_FILL_CHANNELS,
  FETCH_FILL_PENDING_TTL_MS,
  type FetchFallbackEvent,
  type FetchFillEvent,
  FetchFillFilter,
} from '../../src/filters/fetch-fill.js';
import { createLogger } from '../../src/log.js';
import type { FilterConnection, RequestInfo } from '../../src/net/frame-filter.js';
import type { ByteRange } from '../../src/store/index.js';
import { WalRangeReader } from '../../src/wal/range-reader.js';
import { MemoryObjectStore, unreachable } from '../wal/memory-store.js';

const TOPIC_A = '0123456789abcdef0123456789abcdef';
const TOPIC_B = 'fedcba9876543210fedcba9876543210';
const NOT_LEADER_OR_FOLLOWER = 6;

/** What a version-3 reference carries: the SHA-256 of the batch's records section (bytes 61..end). */
function recordsDigest(batch: Buffer): Buffer {
  return hash('sha256', batch.subarray(61), 'buffer');
}

// ---- store, filter -----------------------------------------------------------------------------

/** A GET the test answers by hand: let it read the object, or make it fail. */
interface HeldGet {
  answer(): void;
  fail(error: Error): void;
}

/** The memory store, with objects whose GETs fail, or wait until the test answers them. */
class FlakyStore extends MemoryObjectStore {
  override readonly url: string;
  readonly failing = new Set<string>();
  readonly #held = new Map<string, Promise<void>>();
  /** GETs per object key. */
  readonly getsOf = new Map<string, number>();

  constructor(url = OWN_STORE) {
    super();
    this.url = url;
  }

  /** GETs of `key` from now on wait until the test answers them (never, if it does not). */
  hold(key: string): HeldGet {
    let held!: HeldGet;
    this.#held.set(
      key,
      new Promise<void>((resolve, reject) => {
        held = { answer: resolve, fail: reject };
      }),
    );
    return held;
  }

  override async get(key: string, range?: ByteRange): Promise<Buffer> {
    this.getsOf.set(key, (this.getsOf.get(key) ?? 0) + 1);
    await this.#held.get(key);
    if (this.failing.has(key)) throw unreachable(key);
    return super.get(key, range);
  }
}

/** The store the references in these tests name; the filter may read only it. */
const OWN_STORE = 'memory://wal-writer-test';
/** Another zone's store, for tests with two leaders writing to two stores. */
const ZONE_B_STORE = 'memory://zone-b';
/** A deadline short enough for tests whose GETs never answer. */
const SHORT_DEADLINE_MS = 20;

function setup(now?: () => number, options: { fillDeadlineMs?: number } = {}) {
  const store = new FlakyStore();
  const reader = new WalRangeReader({ store });
  const zoneB = new FlakyStore(ZONE_B_STORE);
  const zoneBReader = new WalRangeReader({ store: zoneB });
  const readers = new Map([
    [OWN_STORE, reader],
    [ZONE_B_STORE, zoneBReader],
  ]);
  const filter = new FetchFillFilter({
    readerFor: (url) => readers.get(url),
    log: createLogger('silent'),
    now,
    ...options,
  });
  return { store, reader, filter, objects: new WalObjects(store), zoneB: new WalObjects(zoneB) };
}

/** What the pipe hands a filter for one connection (so one leader). */
function connection(): FilterConnection {
  return { log: createLogger('silent') };
}

/** Lets every callback already queued run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

// ---- batches and WAL objects -------------------------------------------------------------------

/** `count` consecutive batches from offset `first`, as the leader stored them (PLE 3, real CRCs). */
function leaderBatches(first: bigint, count: number, seed = 1): Buffer[] {
  const out: Buffer[] = [];
  let offset = first;
  for (let i = 0; i < count; i++) {
    const records = 1 + ((seed + i) % 3);
    out.push(sampleBatch(offset, records, 40 + 17 * i, seed * 10 + i));
    offset += BigInt(records);
  }
  return out;
}

function baseOffsetOf(batch: Buffer): bigint {
  return batch.readBigInt64BE(0);
}

/**
 * WAL objects as the store holds them: each batch as the producer sent it (BaseOffset 0, PLE −1;
 * the leader assigns both later, outside the CRC) after some filler, so positions matter.
 */
class WalObjects {
  readonly #parts = new Map<string, Buffer[]>();

  constructor(readonly store: MemoryObjectStore) {}

  place(objectKey: string, leaderBatch: Buffer, padding = 7): { position: number; length: number } {
    let parts = this.#parts.get(objectKey);
    if (parts === undefined) {
      parts = [Buffer.alloc(32, 0xee)];
      this.#parts.set(objectKey, parts);
    }
    parts.push(Buffer.alloc(padding, 0xaa));
    const position = parts.reduce((n, p) => n + p.length, 0);
    const produced = Buffer.from(leaderBatch);
    produced.writeBigInt64BE(0n, 0);
    produced.writeInt32BE(-1, 12);
    parts.push(produced);
    this.store.objects.set(objectKey, Buffer.concat(parts));
    return { position, length: leaderBatch.length };
  }
}

// ---- responses -----------------------------------------------------------------------------------

/**
 * Where a batch travels: inline, or by reference to an object (with its header edited, maybe) of
 * the own store or of `in`.
 */
type Placement =
  | 'inline'
  | string
  | { key: string; padding?: number; editHeader?: (header: Buffer) => void; in?: WalObjects };

interface PartitionSpec {
  partitionIndex: number;
  batches: Buffer[];
  /** One per batch; absent: the partition carries no segment list (all inline, as stock Kafka). */
  placement?: Placement[];
  /** Replaces the segment list the placement would give. */
  segmentsTag?: Buffer;
  fields?: Partial<FetchResponsePartition>;
}

interface TopicSpec {
  topicId?: string;
  topic?: string;
  partitions: PartitionSpec[];
  taggedFields?: RawTaggedField[];
}

function byTag(fields: RawTaggedField[]): RawTaggedField[] {
  return [...fields].sort((a, b) => a.tag - b.tag);
}

/** The partition as the leader side sends it, and as the follower must receive it. */
function partitionPair(
  spec: PartitionSpec,
  objects: WalObjects,
): { wire: FetchResponsePartition; expected: FetchResponsePartition } {
  const base = (): FetchResponsePartition => ({
    partitionIndex: spec.partitionIndex,
    errorCode: 0,
    highWatermark: 10_000n,
    lastStableOffset: 9_990n,
    logStartOffset: 0n,
    abortedTransactions: [],
    preferredReadReplica: -1,
    records: Buffer.concat(spec.batches),
    ...spec.fields,
  });
  const expected = base();
  const wire = base();
  if (spec.placement === undefined) return { wire, expected };
  const segments: PartitionSegment[] = [];
  const inline: Buffer[] = [];
  spec.batches.forEach((batch, i) => {
    const placement = spec.placement![i] ?? 'inline';
    if (placement === 'inline') {
      inline.push(batch);
      const last = segments.at(-1);
      if (last?.kind === 'inline') last.length += batch.length;
      else segments.push({ kind: 'inline', length: batch.length });
      return;
    }
    const {
      key,
      padding,
      editHeader,
      in: where = objects,
    } = typeof placement === 'string' ? { key: placement } : placement;
    // A header edit lands where the follower side reads that field: base offset and leader epoch
    // in the reference, everything else in the object's copy of the produced batch.
    const header = Buffer.from(batch.subarray(0, 61));
    editHeader?.(header);
    segments.push({
      kind: 'reference',
      baseOffset: header.readBigInt64BE(0),
      partitionLeaderEpoch: header.readInt32BE(12),
      crc: header.readUInt32BE(17),
      // The leader's digest: of the records it stored, whatever the object holds.
      digest: recordsDigest(batch),
      store: where.store.url,
      objectKey: key,
      ...where.place(key, Buffer.concat([header, batch.subarray(61)]), padding),
    });
  });
  wire.records = Buffer.concat(inline);
  wire.taggedFields = byTag([
    ...(spec.fields?.taggedFields ?? []),
    { tag: PARTITION_SEGMENTS_TAG, data: spec.segmentsTag ?? encodePartitionSegments(segments) },
  ]);
  return { wire, expected };
}

interface ResponsePair {
  wire: Buffer;
  /** What the follower must get, as a message a test may still adjust, and its frame. */
  expected: FetchResponse;
  expectedFrame: () => Buffer;
}

const RESPONSE_HEADER = (correlationId: number) =>
  encodeResponseHeader({ correlationId, taggedFields: [{ tag: 3, data: Buffer.from('hdr') }] }, 1);

function responsePair(
  version: number,
  topics: TopicSpec[],
  objects: WalObjects,
  top: Partial<FetchResponse> = {},
): ResponsePair {
  const wireTopics: FetchResponseTopic[] = [];
  const expectedTopics: FetchResponseTopic[] = [];
  for (const t of topics) {
    const pairs = t.partitions.map((p) => partitionPair(p, objects));
    const name = { topicId: t.topicId, topic: t.topic, taggedFields: t.taggedFields };
    wireTopics.push({ ...name, partitions: pairs.map((p) => p.wire) });
    expectedTopics.push({ ...name, partitions: pairs.map((p) => p.expected) });
  }
  const message = (responses: FetchResponseTopic[]): FetchResponse => ({
    throttleTimeMs: 0,
    errorCode: 0,
    sessionId: 9_876,
    responses,
    ...top,
  });
  const header = RESPONSE_HEADER(42);
  const expected = message(expectedTopics);
  return {
    wire: frame([header, encodeFetchResponse(message(wireTopics), version)]),
    expected,
    expectedFrame: () => frame([header, encodeFetchResponse(expected, version)]),
  };
}

function frame(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

function decodeResponseFrame(out: Buffer, version: number): FetchResponse {
  const payload = out.subarray(4);
  const { headerLength } = decodeResponseHeader(payload, 1);
  return decodeFetchResponse(payload.subarray(headerLength), version);
}

function partitionOf(response: FetchResponse, topicId: string, partition: number): FetchResponsePartition {
  const t = response.responses.find((x) => x.topicId === topicId)!;
  return t.partitions.find((p) => p.partitionIndex === partition)!;
}

/** Sets the records of one partition of `expected`. */
function expectRecords(pair: ResponsePair, topicId: string, partition: number, records: Buffer[]): void {
  partitionOf(pair.expected, topicId, partition).records = Buffer.concat(records);
}

// ---- requests ------------------------------------------------------------------------------------

/** A follower's Fetch (broker 2 fetching from its leader), with every field set. */
function fetchRequest(version: number): FetchRequest {
  const byId = version >= 13;
  return {
    replicaId: version <= 14 ? 2 : undefined,
    maxWaitMs: 500,
    minBytes: 1,
    maxBytes: 10_485_760,
    isolationLevel: 0,
    sessionId: 9_876,
    sessionEpoch: 5,
    topics: [
      {
        topicId: byId ? TOPIC_A : undefined,
        topic: byId ? undefined : 'orders',
        partitions: [
          {
            partition: 0,
            currentLeaderEpoch: 3,
            fetchOffset: 100n,
            lastFetchedEpoch: 3,
            logStartOffset: 0n,
            partitionMaxBytes: 1_048_576,
            replicaDirectoryId: version >= 17 ? 'aa'.repeat(16) : undefined,
          },
        ],
      },
    ],
    forgottenTopicsData: [
      { topicId: byId ? TOPIC_B : undefined, topic: byId ? undefined : 'gone', partitions: [4] },
    ],
    rackId: 'az-b',
    clusterId: 'walproxy-test',
    replicaState: version >= 15 ? { replicaId: 2, replicaEpoch: 42n } : undefined,
    taggedFields: version >= 12 ? [{ tag: 7, data: Buffer.from('x') }] : undefined,
  };
}

let correlation = 0;

function requestFrame(version: number, request: FetchRequest | Buffer = fetchRequest(version)) {
  const info: RequestInfo = { apiKey: ApiKey.Fetch, apiVersion: version, correlationId: ++correlation };
  const body = Buffer.isBuffer(request) ? request : encodeFetchRequest(request, version);
  const header = encodeRequestHeader({ ...info, clientId: 'broker-2-fetcher-0' });
  return { info, header, frame: frame([header, body]) };
}

/** Sends a follower Fetch through the filter: what went upstream, and the key for its answer. */
function send(filter: FetchFillFilter, version = 17, on?: FilterConnection) {
  const { info, frame: sent } = requestFrame(version);
  const decision = filter.onRequest(info, sent, on);
  if (decision.action !== 'forward') throw new Error('a Fetch is always forwarded');
  return { info, forwarded: decision.frame };
}

/** The inline requests of the forwarded request's capability, which always asks for segment-list version 3. */
function capabilityOf(
  forwarded: Buffer,
  version: number,
): Pick<FetchCapability, 'inlineRequests'> | undefined {
  const payload = forwarded.subarray(4);
  const { headerLength } = decodeRequestHeader(payload);
  const tag = decodeFetchRequest(payload.subarray(headerLength), version).taggedFields?.find(
    (f) => f.tag === FETCH_CAPABILITY_TAG,
  );
  if (tag === undefined) return undefined;
  const { version: segmentsVersion, inlineRequests } = decodeFetchCapability(tag.data);
  expect(segmentsVersion).toBe(3);
  return { inlineRequests };
}

async function answer(filter: FetchFillFilter, info: RequestInfo, response: Buffer): Promise<Buffer> {
  return await filter.onResponse(info, response);
}

function listen<T>(name: string): { events: T[]; stop: () => void } {
  const events: T[] = [];
  const onMessage = (message: unknown) => events.push(message as T);
  subscribe(name, onMessage);
  return { events, stop: () => unsubscribe(name, onMessage) };
}

// ---- tests ---------------------------------------------------------------------------------------

describe('FetchFillFilter requests', () => {
  it.each([12, 15, 17, 18])('marks Fetch v%i with the capability tag and changes nothing else', (version) => {
    // Given a follower Fetch carrying every field of its version, and a filter with no fallback pending
    const { filter } = setup();
    const { info, header, frame: sent } = requestFrame(version);

    // When it goes through the filter
    const decision = filter.onRequest(info, sent);

    // Then it goes upstream with the same header bytes and the body plus our tags (the capability,
    // and the ask for prefetch hints), in tag order
    expect(decision).toMatchObject({ action: 'forward', expectResponse: true });
    const forwarded = (decision as { frame: Buffer }).frame;
    expect(forwarded.subarray(4, 4 + header.length)).toEqual(header);
    const body = forwarded.subarray(4 + header.length);
    const original = fetchRequest(version);
    const marked = decodeFetchRequest(body, version);
    expect(marked.taggedFields?.map((f) => f.tag)).toEqual([7, FETCH_CAPABILITY_TAG, PREFETCH_HINTS_TAG]);
    expect(decodeFetchCapability(marked.taggedFields![1]!.data)).toEqual({ version: 3, inlineRequests: [] });
    expect(wantsPrefetchHints(marked.taggedFields![2]!.data)).toBe(true);
    expect(encodeFetchRequest({ ...marked, taggedFields: original.taggedFields }, version)).toEqual(
      encodeFetchRequest(original, version),
    );
    expect(forwarded.readInt32BE(0)).toBe(forwarded.length - 4);
    expect(filter.stats.requestsMarked).toBe(1);
  });

  it('passes Fetch v11 and v19 through untouched, requests and responses', () => {
    // Given a v11 Fetch (not flexible: no tag buffer) and a v19 Fetch walproxy cannot decode
    const { filter } = setup();
    const v11 = requestFrame(11);
    const v19 = requestFrame(19, Buffer.from('a future body walproxy cannot read'));

    // When they and their responses go through the filter
    const d11 = filter.onRequest(v11.info, v11.frame);
    const d19 = filter.onRequest(v19.info, v19.frame);
    const response = frame([RESPONSE_HEADER(1), Buffer.from('any bytes')]);

    // Then the very same buffers come out
    expect(d11).toEqual({ action: 'forward', frame: v11.frame, expectResponse: true });
    expect((d11 as { frame: Buffer }).frame).toBe(v11.frame);
    expect((d19 as { frame: Buffer }).frame).toBe(v19.frame);
    expect(filter.onResponse(v11.info, response)).toBe(response);
    expect(filter.onResponse(v19.info, response)).toBe(response);
    expect(filter.stats.requestsMarked).toBe(0);
  });
});

describe('FetchFillFilter responses', () => {
  it.each([17, 18])(
    'fills a v%i response back to the leader bytes and leaves every other field as it was',
    async (version) => {
      // Given a marked request, and its answer mixing inline and reference segments over two
      // objects, a partition with no tag, one with an error, and tags at every level
      const { filter, reader, objects } = setup();
      const { info } = send(filter, version);
      const a0 = leaderBatches(100n, 5, 1);
      const a1 = leaderBatches(300n, 3, 2);
      const a2 = leaderBatches(500n, 2, 3);
      const b7 = leaderBatches(700n, 3, 4);
      const pair = responsePair(
        version,
        [
          {
            topicId: TOPIC_A,
            partitions: [
              {
                partitionIndex: 0,
                batches: a0,
                placement: ['inline', 'wal/o1', 'wal/o1', 'inline', 'wal/o2'],
                fields: {
                  abortedTransactions: [{ producerId: 4001n, firstOffset: 101n }],
                  currentLeader: { leaderId: 1, leaderEpoch: 3 },
                  taggedFields: [
                    { tag: 5_000, data: Buffer.from([1, 2, 3]) },
                    { tag: 30_000, data: Buffer.from([4]) },
                  ],
                },
              },
              { partitionIndex: 1, batches: a1, placement: ['wal/o2', 'wal/o1', 'wal/o2'] },
              {
                partitionIndex: 2,
                batches: a2,
                fields: {
                  divergingEpoch: { epoch: 2, endOffset: 480n },
                  snapshotId: { endOffset: 5n, epoch: 1 },
                },
              },
              {
                partitionIndex: 3,
                batches: [],
                fields: { errorCode: NOT_LEADER_OR_FOLLOWER, highWatermark: -1n, lastStableOffset: -1n },
              },
            ],
          },
          {
            topicId: TOPIC_B,
            taggedFields: [{ tag: 4, data: Buffer.from('topic') }],
            partitions: [
              {
                partitionIndex: 7,
                batches: b7,
                placement: ['wal/o1', 'wal/o1', 'inline'],
                fields: { abortedTransactions: null, preferredReadReplica: 2 },
              },
            ],
          },
        ],
        objects,
        {
          nodeEndpoints: [{ nodeId: 1, host: 'localhost', port: 19_001, rack: 'az-a' }],
          taggedFields: [{ tag: 9, data: Buffer.from('top') }],
        },
      );
      const fills = listen<FetchFillEvent>(FETCH_FILL_CHANNELS.fill);

      // When the answer goes through the filter
      const out = await answer(filter, info, pair.wire).finally(fills.stop);

      // Then it is byte for byte the answer the broker would have sent without walproxy
      expect(out).toEqual(pair.expectedFrame());
      const filled = decodeResponseFrame(out, version);
      expect(partitionOf(filled, TOPIC_A, 0).records).toEqual(Buffer.concat(a0));
      expect(partitionOf(filled, TOPIC_A, 1).records).toEqual(Buffer.concat(a1));
      expect(partitionOf(filled, TOPIC_B, 7).records).toEqual(Buffer.concat(b7));
      expect(partitionOf(filled, TOPIC_A, 0).taggedFields?.map((f) => f.tag)).toEqual([5_000, 30_000]);
      // And each object was read with one GET, however many batches it held
      expect(reader.stats.gets).toBe(2);
      const filledBytes = [a0[1], a0[2], a0[4], ...a1, b7[0], b7[1]].reduce((n, b) => n + b!.length, 0);
      expect(filter.stats).toMatchObject({
        responsesFilled: 1,
        referencesFilled: 8,
        bytesFilled: filledBytes,
        fallbacks: {
          getFailed: 0,
          deadline: 0,
          backoff: 0,
          crcMismatch: 0,
          digestMismatch: 0,
          lengthMismatch: 0,
          malformed: 0,
        },
        pendingInline: 0,
        fillLatencyMs: { count: 1 },
      });
      expect(fills.events).toEqual([
        {
          references: 8,
          objectKeys: ['wal/o1', 'wal/o2'],
          uploads: [],
          bytes: filledBytes,
          durationMs: expect.any(Number),
          fallbacks: 0,
        },
      ]);
    },
  );

  it('returns a response with no segment list as the very same buffer', async () => {
    // Given a marked request and a stock answer
    const { filter, objects } = setup();
    const { info } = send(filter);
    const pair = responsePair(
      17,
      [{ topicId: TOPIC_A, partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 2) }] }],
      objects,
    );

    // When the answer goes through the filter
    const out = filter.onResponse(info, pair.wire);

    // Then it is the same buffer, not a copy
    expect(out).toBe(pair.wire);
    expect(filter.stats.responsesFilled).toBe(0);
  });

  it('fills every batch from the object bytes whatever the split', async () => {
    const batchArb = fc.record({
      records: fc.integer({ min: 1, max: 4 }),
      valueSize: fc.nat({ max: 300 }),
      placement: fc.constantFrom('inline', 'wal/o0', 'wal/o1', 'wal/o2'),
      padding: fc.nat({ max: 50 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(batchArb, { maxLength: 6 }), { minLength: 1, maxLength: 4 }),
        async (partitions) => {
          // Given partitions whose batches travel inline or by reference, in any order and objects
          const { filter, objects } = setup();
          const { info } = send(filter);
          let offset = 0n;
          const specs: PartitionSpec[] = partitions.map((batches, partitionIndex) => {
            const leader = batches.map((b, i) => {
              const batch = sampleBatch(offset, b.records, b.valueSize, partitionIndex * 10 + i);
              offset += BigInt(b.records) + 3n;
              return batch;
            });
            const placement = batches.map((b) =>
              b.placement === 'inline' ? ('inline' as const) : { key: b.placement, padding: b.padding },
            );
            return { partitionIndex, batches: leader, placement };
          });
          const pair = responsePair(17, [{ topicId: TOPIC_A, partitions: specs }], objects);

          // When the answer goes through the filter
          const out = await answer(filter, info, pair.wire);

          // Then every partition holds exactly the leader's bytes
          expect(out).toEqual(pair.expectedFrame());
          expect(filter.stats.pendingInline).toBe(0);
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('FetchFillFilter fallbacks', () => {
  it('ends partitions read from a failing object at their last good batch and asks for inline bytes', async () => {
    // Given object o1 whose GETs fail, and partitions using it, o2, or both
    let clock = 0;
    const { store, filter, objects } = setup(() => clock);
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 3, 1);
    const a1 = leaderBatches(300n, 3, 2);
    const b0 = leaderBatches(700n, 1, 3);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            { partitionIndex: 0, batches: a0, placement: ['inline', 'wal/o1', 'wal/o2'] },
            { partitionIndex: 1, batches: a1, placement: ['wal/o2', 'wal/o2', 'inline'] },
          ],
        },
        { topicId: TOPIC_B, partitions: [{ partitionIndex: 0, batches: b0, placement: ['wal/o1'] }] },
      ],
      objects,
    );
    store.failing.add('wal/o1');
    const fallbacks = listen<FetchFallbackEvent>(FETCH_FILL_CHANNELS.fallback);

    // When the answer goes through the filter
    const out = await answer(filter, info, pair.wire).finally(fallbacks.stop);

    // Then those partitions end before their first batch in o1 (B/0 with empty records, not
    // null), the other is whole, and nothing else changed
    expectRecords(pair, TOPIC_A, 0, [a0[0]!]);
    expectRecords(pair, TOPIC_B, 0, []);
    expect(out).toEqual(pair.expectedFrame());
    expect(partitionOf(decodeResponseFrame(out, 17), TOPIC_B, 0).records).toEqual(Buffer.alloc(0));
    expect(filter.stats.fallbacks).toEqual({
      getFailed: 2,
      deadline: 0,
      backoff: 0,
      crcMismatch: 0,
      digestMismatch: 0,
      lengthMismatch: 0,
      malformed: 0,
    });
    expect(filter.stats.pendingInline).toBe(2);
    expect(fallbacks.events.map((e) => [e.topicId, e.partition, e.fromOffset, e.reason])).toEqual([
      [TOPIC_A, 0, baseOffsetOf(a0[1]!), 'getFailed'],
      [TOPIC_B, 0, baseOffsetOf(b0[0]!), 'getFailed'],
    ]);
    // And the next requests go unmarked for a second (the leader side answers stock), then ask
    // the leader side to send those partitions inline from there
    expect(capabilityOf(send(filter).forwarded, 17)).toBeUndefined();
    clock = FETCH_FILL_BACKOFF_MIN_MS;
    expect(capabilityOf(send(filter).forwarded, 17)).toEqual({
      inlineRequests: [
        { topicId: TOPIC_A, partition: 0, fromOffset: baseOffsetOf(a0[1]!) },
        { topicId: TOPIC_B, partition: 0, fromOffset: baseOffsetOf(b0[0]!) },
      ],
    });
  });

  it('backs off from a store whose reads fail, longer each time, and comes back after a fill succeeds', async () => {
    // Given a follower side whose reads of o1 fail
    let clock = 0;
    const { store, filter, objects } = setup(() => clock);
    store.failing.add('wal/o1');
    const failingAnswer = async () => {
      const { info } = send(filter);
      const a0 = leaderBatches(100n, 1, 1);
      const pair = responsePair(
        17,
        [{ topicId: TOPIC_A, partitions: [{ partitionIndex: 0, batches: a0, placement: ['wal/o1'] }] }],
        objects,
      );
      await answer(filter, info, pair.wire);
    };

    // When a fill fails, then requests go unmarked for 1 s
    await failingAnswer();
    clock = 999;
    expect(capabilityOf(send(filter).forwarded, 17)).toBeUndefined();
    // And when the next fill fails too, for 2 s
    clock = 1_000;
    await failingAnswer();
    clock = 2_999;
    expect(capabilityOf(send(filter).forwarded, 17)).toBeUndefined();
    expect(filter.stats.requestsDuringBackoff).toBe(2);
    expect(filter.stats.backoffs).toBe(2);

    // And once a fill of references succeeds, a later failure backs off 1 s again
    clock = 3_000;
    store.failing.clear();
    const { info } = send(filter);
    const ok = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 1, 1), placement: ['wal/o9'] }],
        },
      ],
      objects,
    );
    await answer(filter, info, ok.wire);
    store.failing.add('wal/o1');
    clock = 4_000;
    await failingAnswer();
    clock = 5_000;
    expect(capabilityOf(send(filter).forwarded, 17)).toBeDefined();
  });

  it('ends a partition before a batch whose body has one flipped byte', async () => {
    // Given a partition whose third batch has one byte changed in its object
    const { store, filter, objects } = setup();
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 4, 1);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            { partitionIndex: 0, batches: a0, placement: ['inline', 'wal/o1', 'wal/o1', 'wal/o1'] },
          ],
        },
      ],
      objects,
    );
    const object = store.objects.get('wal/o1')!;
    const third = object.indexOf(a0[2]!.subarray(61));
    object[third + 5]! ^= 0x01;

    // When the answer goes through the filter
    const out = await answer(filter, info, pair.wire);

    // Then the partition ends after the second batch, counted as a CRC mismatch
    expectRecords(pair, TOPIC_A, 0, [a0[0]!, a0[1]!]);
    expect(out).toEqual(pair.expectedFrame());
    expect(filter.stats.fallbacks.crcMismatch).toBe(1);
    expect(capabilityOf(send(filter).forwarded, 17)?.inlineRequests).toEqual([
      { topicId: TOPIC_A, partition: 0, fromOffset: baseOffsetOf(a0[2]!) },
    ]);
  });

  it('ends a partition before an object batch that is whole but not the one the leader stored', async () => {
    // Given a partition whose third batch's object copy was replaced by another valid batch of the
    // same length (another first timestamp, its CRC recomputed), so only the leader's CRC tells
    const { store, filter, objects } = setup();
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 4, 1);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            { partitionIndex: 0, batches: a0, placement: ['inline', 'wal/o1', 'wal/o1', 'wal/o1'] },
          ],
        },
      ],
      objects,
    );
    const object = store.objects.get('wal/o1')!;
    const third = object.indexOf(a0[2]!.subarray(61)) - 61;
    object.writeBigInt64BE(object.readBigInt64BE(third + 27) + 1n, third + 27);
    object.writeUInt32BE(crc32c(object.subarray(third + 21, third + a0[2]!.length)), third + 17);

    // When the answer goes through the filter
    const out = await answer(filter, info, pair.wire);

    // Then the partition ends after the second batch, counted as a CRC mismatch
    expectRecords(pair, TOPIC_A, 0, [a0[0]!, a0[1]!]);
    expect(out).toEqual(pair.expectedFrame());
    expect(filter.stats.fallbacks.crcMismatch).toBe(1);
  });

  it('refuses a reference header with partition leader epoch -1, a wrong Length or an offset going back', async () => {
    // Given one partition whose second batch's header says PLE -1 (outside the CRC, so the CRC
    // still matches), one whose second batch's header has a wrong Length, and one whose second
    // batch's header starts before the first batch ends
    const { filter, objects } = setup();
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 3, 1);
    const a1 = leaderBatches(300n, 3, 2);
    const a2 = leaderBatches(500n, 3, 3);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            {
              partitionIndex: 0,
              batches: a0,
              placement: ['wal/o1', { key: 'wal/o1', editHeader: (h) => h.writeInt32BE(-1, 12) }, 'wal/o1'],
            },
            {
              partitionIndex: 1,
              batches: a1,
              placement: [
                'inline',
                { key: 'wal/o1', editHeader: (h) => h.writeInt32BE(h.readInt32BE(8) + 1, 8) },
                'inline',
              ],
            },
            {
              partitionIndex: 2,
              batches: a2,
              placement: [
                'inline',
                { key: 'wal/o2', editHeader: (h) => h.writeBigInt64BE(500n, 0) },
                'inline',
              ],
            },
          ],
        },
      ],
      objects,
    );

    // When the answer goes through the filter
    const out = await answer(filter, info, pair.wire);

    // Then the partitions end after their first batch
    expectRecords(pair, TOPIC_A, 0, [a0[0]!]);
    expectRecords(pair, TOPIC_A, 1, [a1[0]!]);
    expectRecords(pair, TOPIC_A, 2, [a2[0]!]);
    expect(out).toEqual(pair.expectedFrame());
    expect(filter.stats.fallbacks).toEqual({
      getFailed: 0,
      deadline: 0,
      backoff: 0,
      crcMismatch: 0,
      digestMismatch: 0,
      lengthMismatch: 1,
      malformed: 2,
    });
    // And the one whose header lies about its offset asks inline from where the follower goes on
    expect(capabilityOf(send(filter).forwarded, 17)?.inlineRequests).toEqual([
      { topicId: TOPIC_A, partition: 0, fromOffset: baseOffsetOf(a0[1]!) },
      { topicId: TOPIC_A, partition: 1, fromOffset: baseOffsetOf(a1[1]!) },
      { topicId: TOPIC_A, partition: 2, fromOffset: baseOffsetOf(a2[1]!) },
    ]);
  });

  it('delivers nothing from a segment list it cannot trust, and asks inline from the fetch offset', async () => {
    // Given a partition whose segment list is garbage, and one whose inline segment is longer
    // than its records
    const { filter, objects } = setup();
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 2, 1);
    const a1 = leaderBatches(300n, 2, 2);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            {
              partitionIndex: 0,
              batches: a0,
              placement: ['inline', 'inline'],
              segmentsTag: Buffer.from([1, 9, 9]),
            },
            {
              partitionIndex: 1,
              batches: a1,
              placement: ['inline', 'inline'],
              segmentsTag: encodePartitionSegments([
                { kind: 'inline', length: a1[0]!.length + a1[1]!.length + 1 },
              ]),
            },
          ],
        },
      ],
      objects,
    );

    // When the answer goes through the filter
    const out = await answer(filter, info, pair.wire);

    // Then both partitions come back empty, and ask inline from where the follower fetches
    expectRecords(pair, TOPIC_A, 0, []);
    expectRecords(pair, TOPIC_A, 1, []);
    expect(out).toEqual(pair.expectedFrame());
    expect(filter.stats.fallbacks.malformed).toBe(2);
    expect(capabilityOf(send(filter).forwarded, 17)?.inlineRequests).toEqual([
      { topicId: TOPIC_A, partition: 0, fromOffset: 100n },
      { topicId: TOPIC_A, partition: 1, fromOffset: 300n },
    ]);
  });

  it('stops asking for inline bytes once the partition comes back delivered', async () => {
    // Given a partition that fell back (and the store-read backoff over)
    let clock = 0;
    const { store, filter, objects } = setup(() => clock);
    const a0 = leaderBatches(100n, 3, 1);
    store.failing.add('wal/o1');
    const failed = send(filter);
    await answer(
      filter,
      failed.info,
      responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [{ partitionIndex: 0, batches: a0, placement: ['inline', 'wal/o1', 'inline'] }],
          },
        ],
        objects,
      ).wire,
    );

    clock = FETCH_FILL_BACKOFF_MIN_MS;

    // When the next answer leaves it out of its byte budget (empty, no references)
    const second = send(filter);
    const empty = responsePair(
      17,
      [{ topicId: TOPIC_A, partitions: [{ partitionIndex: 0, batches: [] }] }],
      objects,
    );
    expect(filter.onResponse(second.info, empty.wire)).toBe(empty.wire);

    // Then it still asks; and once an answer brings its bytes without references, it stops
    const third = send(filter);
    expect(capabilityOf(third.forwarded, 17)?.inlineRequests).toHaveLength(1);
    const inline = responsePair(
      17,
      [{ topicId: TOPIC_A, partitions: [{ partitionIndex: 0, batches: a0.slice(1) }] }],
      objects,
    );
    expect(filter.onResponse(third.info, inline.wire)).toBe(inline.wire);
    expect(filter.stats.pendingInline).toBe(0);
    expect(capabilityOf(send(filter).forwarded, 17)).toEqual({ inlineRequests: [] });
  });

  it('keeps a fallback that an answer to an older request cannot have honoured', async () => {
    // Given two requests in flight, and the first answer making a partition fall back
    const { store, filter, objects } = setup();
    const a0 = leaderBatches(100n, 2, 1);
    store.failing.add('wal/o1');
    const first = send(filter);
    const second = send(filter);
    await answer(
      filter,
      first.info,
      responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [{ partitionIndex: 0, batches: a0, placement: ['inline', 'wal/o1'] }],
          },
        ],
        objects,
      ).wire,
    );

    // When the second answer brings the partition without references
    const stock = responsePair(
      17,
      [{ topicId: TOPIC_A, partitions: [{ partitionIndex: 0, batches: a0 }] }],
      objects,
    );
    filter.onResponse(second.info, stock.wire);

    // Then the fallback stays: that request never asked for inline bytes
    expect(filter.stats.pendingInline).toBe(1);
  });

  it('drops a fallback nothing answered after the time limit', async () => {
    // Given a partition that fell back, and a clock the test moves
    let clock = 1_000;
    const { store, filter, objects } = setup(() => clock);
    store.failing.add('wal/o1');
    const { info } = send(filter);
    await answer(
      filter,
      info,
      responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 1), placement: ['wal/o1'] }],
          },
        ],
        objects,
      ).wire,
    );

    // When requests go out just before and at the limit
    clock += FETCH_FILL_PENDING_TTL_MS - 1;
    const before = capabilityOf(send(filter).forwarded, 17);
    clock += 1;
    const at = capabilityOf(send(filter).forwarded, 17);

    // Then the first still asks for inline bytes, the second no longer does
    expect(before?.inlineRequests).toHaveLength(1);
    expect(at).toEqual({ inlineRequests: [] });
    expect(filter.stats).toMatchObject({ pendingInline: 0, pendingExpired: 1 });
  });

  it('sends v12 requests unmarked while a partition named only by topic name needs inline bytes', async () => {
    // Given a v12 follower (topics by name) whose partition fell back
    let clock = 0;
    const { store, filter, objects } = setup(() => clock);
    store.failing.add('wal/o1');
    const { info } = send(filter, 12);
    await answer(
      filter,
      info,
      responsePair(
        12,
        [
          {
            topic: 'orders',
            partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 1), placement: ['wal/o1'] }],
          },
        ],
        objects,
      ).wire,
    );

    // When the next v12 requests go out (once the store-read backoff is over), before and after
    // the time limit
    clock = FETCH_FILL_BACKOFF_MIN_MS;
    const unmarked = requestFrame(12);
    const during = filter.onRequest(unmarked.info, unmarked.frame);
    clock += FETCH_FILL_PENDING_TTL_MS;
    const after = send(filter, 12);

    // Then the inline request cannot name it, so the request goes unmarked (the stock answer
    // is all inline) until the fallback expires
    expect((during as { frame: Buffer }).frame).toBe(unmarked.frame);
    // And its stock answer's bytes count as inline for that reason
    const stockAnswer = responsePair(
      12,
      [{ topic: 'orders', partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 2) }] }],
      objects,
    ).wire;
    expect(filter.onResponse(unmarked.info, stockAnswer)).toBe(stockAnswer);
    expect(filter.stats.inline.unmarkedByName).toBe(leaderBatches(100n, 2).reduce((n, b) => n + b.length, 0));
    expect(capabilityOf(after.forwarded, 12)).toEqual({ inlineRequests: [] });
    expect(filter.stats).toMatchObject({ requestsUnmarked: 1, fallbacks: { getFailed: 1 } });
  });
});

describe('FetchFillFilter fill deadline and per-store backoff', () => {
  it('releases a response at the fill deadline: other partitions intact, the late one cut to its good prefix', async () => {
    // Given object o1 whose GET never answers, and an answer holding a topic not in the WAL
    // (A/0), a partition using o1 after an inline batch (A/1), and one using o2 (B/0)
    let clock = 0;
    const { store, filter, objects } = setup(() => clock, { fillDeadlineMs: SHORT_DEADLINE_MS });
    store.hold('wal/o1');
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 2, 1);
    const a1 = leaderBatches(300n, 3, 2);
    const b0 = leaderBatches(700n, 2, 3);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            { partitionIndex: 0, batches: a0 },
            { partitionIndex: 1, batches: a1, placement: ['inline', 'wal/o1', 'wal/o1'] },
          ],
        },
        {
          topicId: TOPIC_B,
          partitions: [{ partitionIndex: 0, batches: b0, placement: ['wal/o2', 'wal/o2'] }],
        },
      ],
      objects,
    );
    const fallbacks = listen<FetchFallbackEvent>(FETCH_FILL_CHANNELS.fallback);

    // When the answer goes through the filter
    const out = await answer(filter, info, pair.wire).finally(fallbacks.stop);

    // Then it leaves with A/0 as the broker sent it, B/0 filled, and A/1 ending before its first
    // batch in o1, which asks to come inline
    expectRecords(pair, TOPIC_A, 1, [a1[0]!]);
    expect(out).toEqual(pair.expectedFrame());
    expect(fallbacks.events.map((e) => [e.topicId, e.partition, e.fromOffset, e.reason])).toEqual([
      [TOPIC_A, 1, baseOffsetOf(a1[1]!), 'deadline'],
    ]);
    expect(filter.stats).toMatchObject({
      referencesFilled: 2,
      deadlineMisses: 1,
      backoffs: 1,
      fallbacks: { deadline: 1, getFailed: 0 },
      pendingInline: 1,
    });
    // And the store backs off at once: the next request goes unmarked (stock, all inline), and
    // the first one after the window asks for A/1 inline from its first missing batch
    expect(capabilityOf(send(filter).forwarded, 17)).toBeUndefined();
    clock = FETCH_FILL_BACKOFF_MIN_MS;
    expect(capabilityOf(send(filter).forwarded, 17)).toEqual({
      inlineRequests: [{ topicId: TOPIC_A, partition: 1, fromOffset: baseOffsetOf(a1[1]!) }],
    });
  });

  it('counts a GET that fails after the deadline once; one that answers late fills a later fetch from the cache', async () => {
    // Given GETs of o1 and o2 held by the test, and a fill of each that missed the deadline
    let clock = 0;
    const { store, filter, objects } = setup(() => clock, { fillDeadlineMs: SHORT_DEADLINE_MS });
    const o1 = store.hold('wal/o1');
    const o2 = store.hold('wal/o2');
    const answerFrom = (key: string, first: bigint) =>
      responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [{ partitionIndex: 0, batches: leaderBatches(first, 2, 1), placement: [key, key] }],
          },
        ],
        objects,
      );
    const fromO1 = answerFrom('wal/o1', 100n);
    const fromO2 = answerFrom('wal/o2', 200n);
    const fill = async (pair: ResponsePair) => await answer(filter, send(filter).info, pair.wire);
    await fill(fromO1);

    // When o1's GET then fails
    o1.fail(unreachable('wal/o1'));
    await settle();

    // Then nothing more is counted: the deadline already did
    expect(filter.stats).toMatchObject({
      deadlineMisses: 1,
      backoffs: 1,
      fallbacks: { deadline: 1, getFailed: 0 },
    });

    // And when o2 misses the deadline too, then answers, then a fetch after the window names it
    clock = FETCH_FILL_BACKOFF_MIN_MS;
    await fill(fromO2);
    o2.answer();
    await settle();
    clock += 2 * FETCH_FILL_BACKOFF_MIN_MS;
    const out = await fill(fromO2);

    // Then that fetch fills from the bytes the late GET brought, without another GET
    expect(out).toEqual(fromO2.expectedFrame());
    expect(store.getsOf.get('wal/o2')).toBe(1);
    expect(filter.stats).toMatchObject({ deadlineMisses: 2, backoffs: 2, referencesFilled: 2 });
  });

  it("backs off per store: while leader A's store hangs, leader B's fetches stay marked and filled", async () => {
    // Given leader A writing to the own store, whose GETs never answer, and leader B writing to
    // zone b's store, each fetched on its own connection
    let clock = 0;
    const { store, filter, objects, zoneB } = setup(() => clock, { fillDeadlineMs: SHORT_DEADLINE_MS });
    store.hold('wal/a1');
    const leaderA = connection();
    const leaderB = connection();
    const fetchB = async (key: string, first: bigint) => {
      const sent = send(filter, 17, leaderB);
      expect(capabilityOf(sent.forwarded, 17)).toBeDefined();
      const pair = responsePair(
        17,
        [
          {
            topicId: TOPIC_B,
            partitions: [
              {
                partitionIndex: 0,
                batches: leaderBatches(first, 2, 4),
                placement: [
                  { key, in: zoneB },
                  { key, in: zoneB },
                ],
              },
            ],
          },
        ],
        objects,
      );
      expect(await answer(filter, sent.info, pair.wire)).toEqual(pair.expectedFrame());
    };

    // When A's answer misses the deadline, and B's fetches go on
    const a = send(filter, 17, leaderA);
    await answer(
      filter,
      a.info,
      responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 1), placement: ['wal/a1'] }],
          },
        ],
        objects,
      ).wire,
    );
    await fetchB('wal/b1', 700n);
    clock = FETCH_FILL_BACKOFF_MIN_MS / 2;

    // Then A's next request goes unmarked, while B's stay marked and fill
    expect(capabilityOf(send(filter, 17, leaderA).forwarded, 17)).toBeUndefined();
    await fetchB('wal/b2', 800n);
    expect(filter.stats).toMatchObject({
      deadlineMisses: 1,
      backoffs: 1,
      requestsDuringBackoff: 1,
      referencesFilled: 4,
    });
  });

  it('does not hold an answer naming a store that backs off: cached objects fill, the rest end at once', async () => {
    // Given a store backing off after o1 missed the deadline (its GET still hanging) in an answer
    // whose o2 filled, on one fetcher's connection
    const { store, filter, objects } = setup(undefined, { fillDeadlineMs: SHORT_DEADLINE_MS });
    store.hold('wal/o1');
    const firstPair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            { partitionIndex: 0, batches: leaderBatches(100n, 1, 1), placement: ['wal/o1'] },
            { partitionIndex: 1, batches: leaderBatches(300n, 1, 2), placement: ['wal/o2'] },
          ],
        },
      ],
      objects,
    );
    const b0 = leaderBatches(700n, 1, 4);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [{ partitionIndex: 2, batches: leaderBatches(500n, 1, 3), placement: ['wal/o2'] }],
        },
        { topicId: TOPIC_B, partitions: [{ partitionIndex: 0, batches: b0, placement: ['wal/o1'] }] },
      ],
      objects,
    );
    await answer(filter, send(filter, 17, connection()).info, firstPair.wire);

    // When another fetcher's first answer names o2 and o1 again
    const out = await answer(filter, send(filter, 17, connection()).info, pair.wire);

    // Then o2's batch fills from the cache, B/0 ends empty at once (no deadline waited for), and
    // the store was not asked again
    expectRecords(pair, TOPIC_B, 0, []);
    expect(out).toEqual(pair.expectedFrame());
    expect(filter.stats).toMatchObject({
      deadlineMisses: 1,
      backoffs: 1,
      fallbacks: { backoff: 1, deadline: 1 },
    });
    expect(store.getsOf.get('wal/o1')).toBe(1);
    expect(store.getsOf.get('wal/o2')).toBe(1);
  });

  it('counts every inline byte reaching the follower, by why it came inline', async () => {
    // Given a filter whose store fails reads of o9
    let clock = 0;
    const { store, filter, objects } = setup(() => clock);
    store.failing.add('wal/o9');
    const bytesOf = (batches: Buffer[]) => batches.reduce((n, b) => n + b.length, 0);
    const stock = (partitions: PartitionSpec[], version = 17) =>
      responsePair(
        version,
        [
          {
            topicId: version >= 13 ? TOPIC_A : undefined,
            topic: version >= 13 ? undefined : 'orders',
            partitions,
          },
        ],
        objects,
      ).wire;

    // When a v11 fetch is answered (never marked)
    const v11 = leaderBatches(10n, 1, 9);
    const old = requestFrame(11);
    filter.onRequest(old.info, old.frame);
    const v11Answer = decodeResponseFrame(stock([{ partitionIndex: 0, batches: v11 }], 11), 11);
    filter.onResponse(
      old.info,
      frame([encodeResponseHeader({ correlationId: 1 }, 0), encodeFetchResponse(v11Answer, 11)]),
    );
    // And a marked one brings a partition without references, one with an inline segment before
    // a reference, and one whose reference fails (so reads back off)
    const unreferenced = leaderBatches(100n, 2, 1);
    const mixed = leaderBatches(300n, 2, 2);
    const marked = send(filter);
    await answer(
      filter,
      marked.info,
      stock([
        { partitionIndex: 0, batches: unreferenced },
        { partitionIndex: 1, batches: mixed, placement: ['inline', 'wal/o1'] },
        { partitionIndex: 2, batches: leaderBatches(500n, 1, 3), placement: ['wal/o9'] },
      ]),
    );
    // And one sent unmarked during the backoff is answered stock
    const during = leaderBatches(600n, 3, 4);
    const unmarked = send(filter);
    filter.onResponse(unmarked.info, stock([{ partitionIndex: 3, batches: during }]));
    // And after it, the partition asked inline comes inline
    clock = FETCH_FILL_BACKOFF_MIN_MS;
    const asked = leaderBatches(500n, 2, 3);
    const after = send(filter);
    filter.onResponse(after.info, stock([{ partitionIndex: 2, batches: asked }]));

    // Then every inline byte is counted once, under its reason
    expect(filter.stats.inline).toEqual({
      unreferenced: bytesOf(unreferenced),
      inlineSegments: bytesOf([mixed[0]!]),
      requestedInline: bytesOf(asked),
      backoff: bytesOf(during),
      unmarkedByName: 0,
      otherVersion: bytesOf(v11),
    });
    expect(filter.stats.inlineBytes).toBe(bytesOf([...unreferenced, mixed[0]!, ...asked, ...during, ...v11]));
    expect(filter.stats.bytesFilled).toBe(bytesOf([mixed[1]!]));
  });

  it('fills a partition whose records are null by re-encoding the answer', async () => {
    // Given an answer whose only partition is all references, its records null (not empty)
    const { filter, objects } = setup();
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 2, 1);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            { partitionIndex: 0, batches: a0, placement: ['wal/o1', 'wal/o1'] },
            { partitionIndex: 1, batches: leaderBatches(300n, 1, 2) },
          ],
        },
      ],
      objects,
    );
    const wire = decodeResponseFrame(pair.wire, 17);
    partitionOf(wire, TOPIC_A, 0).records = null;
    const nullRecords = frame([RESPONSE_HEADER(42), encodeFetchResponse(wire, 17)]);

    // When it goes through the filter
    const out = await answer(filter, info, nullRecords);

    // Then the follower gets the leader's bytes all the same
    expect(out).toEqual(pair.expectedFrame());
  });
});

describe('FetchFillFilter and the trace context', () => {
  const upload = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };

  /** An answer referencing one object, with the leader side's trace tag and one more top-level tag. */
  function tracedPair(objects: WalObjects, traceData: Buffer, top: Partial<FetchResponse> = {}) {
    const batches = leaderBatches(100n, 3, 1);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [{ partitionIndex: 0, batches, placement: ['wal/o1', 'inline', 'wal/o1'] }],
        },
      ],
      objects,
      {
        ...top,
        taggedFields: [
          { tag: 9, data: Buffer.from('top') },
          { tag: WAL_TRACE_TAG, data: traceData },
        ],
      },
    );
    // What the follower's broker must get: the broker's tags, none of walproxy's
    pair.expected.taggedFields = [{ tag: 9, data: Buffer.from('top') }];
    return pair;
  }

  it.each([
    ['spliced', {}],
    [
      're-encoded (a NodeEndpoints tag)',
      { nodeEndpoints: [{ nodeId: 1, host: 'localhost', port: 19_001, rack: 'az-a' }] },
    ],
  ] as const)(
    'drops the tag before the broker and puts its upload context on the fill event (%s)',
    async (_, top) => {
      // Given a marked request, and its answer carrying the upload span context of its object
      const { filter, objects } = setup();
      const { info } = send(filter);
      const pair = tracedPair(objects, encodeWalTrace([upload]), top);
      const fills = listen<FetchFillEvent>(FETCH_FILL_CHANNELS.fill);

      // When the answer goes through the filter
      const out = await answer(filter, info, pair.wire).finally(fills.stop);

      // Then the follower's broker gets the stock bytes, and the fill event the context
      expect(out).toEqual(pair.expectedFrame());
      expect(fills.events).toMatchObject([{ references: 2, objectKeys: ['wal/o1'], uploads: [upload] }]);
    },
  );

  it('drops a tag of a version it does not read, and fills all the same', async () => {
    const { filter, objects } = setup();
    const { info } = send(filter);
    const later = encodeWalTrace([upload]);
    later[0] = 2;
    const pair = tracedPair(objects, later);
    const fills = listen<FetchFillEvent>(FETCH_FILL_CHANNELS.fill);
    const out = await answer(filter, info, pair.wire).finally(fills.stop);
    expect(out).toEqual(pair.expectedFrame());
    expect(fills.events).toMatchObject([{ references: 2, uploads: [] }]);
  });

  it('drops the tag from an answer without references too', async () => {
    // Given an answer with no segment list but a trace tag (a leader side never sends that)
    const { filter, objects } = setup();
    const { info } = send(filter);
    const pair = responsePair(
      17,
      [{ topicId: TOPIC_A, partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 2) }] }],
      objects,
      { taggedFields: [{ tag: WAL_TRACE_TAG, data: encodeWalTrace([upload]) }] },
    );
    pair.expected.taggedFields = undefined;
    // Then the broker does not get it
    expect(await answer(filter, info, pair.wire)).toEqual(pair.expectedFrame());
  });
});

describe('FetchFillFilter and prefetch hints', () => {
  const upload = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };

  it.each([
    ['spliced', {}],
    [
      're-encoded (a NodeEndpoints tag)',
      { nodeEndpoints: [{ nodeId: 1, host: 'localhost', port: 19_001, rack: 'az-a' }] },
    ],
  ] as const)(
    'reads a hinted object ahead, so its references a fetch later are cache hits, and drops the tag before the broker (%s)',
    async (_, top) => {
      // Given an answer referencing wal/o1 that hints wal/o2 (stored ahead: its batches are not in
      // the leader's log yet), beside the trace tag and a tag of the broker's
      const { filter, objects, store, reader } = setup();
      // (the answer a fetch later, built first: building places its batches in wal/o2)
      const later = responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [
              { partitionIndex: 0, batches: leaderBatches(103n, 2, 2), placement: ['wal/o2', 'wal/o2'] },
            ],
          },
        ],
        objects,
      );
      const { info } = send(filter);
      const hints = encodePrefetchHints([
        { store: OWN_STORE, objectKey: 'wal/o2', size: store.objects.get('wal/o2')!.length },
      ]);
      const pair = responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [
              {
                partitionIndex: 0,
                batches: leaderBatches(100n, 3, 1),
                placement: ['wal/o1', 'inline', 'wal/o1'],
              },
            ],
          },
        ],
        objects,
        {
          ...top,
          taggedFields: [
            { tag: 9, data: Buffer.from('top') },
            { tag: WAL_TRACE_TAG, data: encodeWalTrace([upload]) },
            { tag: PREFETCH_HINTS_TAG, data: hints },
          ],
        },
      );
      pair.expected.taggedFields = [{ tag: 9, data: Buffer.from('top') }];

      // When it goes through the filter
      const out = await answer(filter, info, pair.wire);

      // Then the follower's broker gets the stock bytes, and wal/o2 was read without a reference
      expect(out).toEqual(pair.expectedFrame());
      await settle();
      expect(store.getsOf.get('wal/o2')).toBe(1);
      expect(filter.stats).toMatchObject({ prefetchHints: 1, prefetchesStarted: 1 });
      expect(reader.stats.prefetches).toBe(1);

      // And the next answer, referencing wal/o2, fills from the cache: no second GET
      const second = send(filter);
      expect(await answer(filter, second.info, later.wire)).toEqual(later.expectedFrame());
      expect(store.getsOf.get('wal/o2')).toBe(1);
    },
  );

  it('reads nothing ahead for hints it cannot read or of a store it may not read', async () => {
    const { filter, objects, store } = setup();
    objects.place('wal/o2', leaderBatches(103n, 1, 2)[0]!);
    const unreadable = encodePrefetchHints([{ store: OWN_STORE, objectKey: 'wal/o2', size: 100 }]);
    unreadable[0] = 2;
    const foreign = encodePrefetchHints([{ store: 'memory://not-mine', objectKey: 'wal/o2', size: 100 }]);
    for (const [i, data] of [unreadable, foreign].entries()) {
      const { info } = send(filter);
      const pair = responsePair(
        17,
        [
          {
            topicId: TOPIC_A,
            partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 1, 1), placement: [`wal/r${i}`] }],
          },
        ],
        objects,
        { taggedFields: [{ tag: PREFETCH_HINTS_TAG, data }] },
      );
      pair.expected.taggedFields = undefined;
      expect(await answer(filter, info, pair.wire)).toEqual(pair.expectedFrame());
    }
    await settle();
    expect(store.getsOf.get('wal/o2')).toBeUndefined();
    expect(filter.stats.prefetchesStarted).toBe(0);
  });
});

describe('FetchFillFilter and what it cannot read (issue #24)', () => {
  it('passes an answer the codec cannot read on unchanged, instead of closing the connection into the same answer', async () => {
    // Given a marked request, and an answer the codec cannot read: the leader side passes the
    // broker's bytes on unmarked when its own codec cannot read them (here: cut short)
    const { filter, objects } = setup();
    const { info } = send(filter);
    const pair = responsePair(
      17,
      [{ topicId: TOPIC_A, partitions: [{ partitionIndex: 0, batches: leaderBatches(100n, 2) }] }],
      objects,
    );
    const wire = pair.wire;
    const cut = frame([wire.subarray(4, wire.length - 3)]);

    // When it goes through the filter, then it reaches the follower's broker as it came
    await expect(answer(filter, info, cut)).resolves.toBe(cut);
    expect(filter.stats.responsesNotDecoded).toBe(1);
    // And the next request is marked as before, asking nothing inline
    expect(capabilityOf(send(filter).forwarded, 17)).toEqual({ inlineRequests: [] });
    expect(filter.stats.pendingInline).toBe(0);
  });

  it('forwards a request the codec cannot read unmarked, as the broker sent it, and passes its answer on', async () => {
    // Given a follower Fetch cut short: the leader's broker, not this codec, judges it
    const { filter } = setup();
    const { info, frame: whole } = requestFrame(17);
    const cut = frame([whole.subarray(4, whole.length - 5)]);

    // When it goes through the filter, then it goes upstream as it came
    const decision = filter.onRequest(info, cut);
    expect(decision).toEqual({ action: 'forward', frame: cut, expectResponse: true });
    expect(filter.stats.requestsNotDecoded).toBe(1);
    // And whatever answers it reaches the broker unread
    const reply = frame([Buffer.from([0, 0, 0, 0, 0, 1, 2, 3])]);
    reply.writeInt32BE(info.correlationId, 4);
    expect(await answer(filter, info, reply)).toBe(reply);
  });

  it('treats a store name its reader factory throws on as one it may not read: the partition ends there and asks inline', async () => {
    // Given a reader factory that throws on a malformed store name (as opening a store for a URL
    // that matches a --wal-read-store-url glob but does not parse does)
    const store = new FlakyStore();
    const reader = new WalRangeReader({ store });
    const filter = new FetchFillFilter({
      readerFor: (url) => {
        if (url === OWN_STORE) return reader;
        throw new TypeError(`Invalid URL: ${url}`);
      },
      log: createLogger('silent'),
    });
    const own = new WalObjects(store);
    const malformed = new WalObjects(new FlakyStore('s3://bad bucket'));
    const { info } = send(filter);
    const a0 = leaderBatches(100n, 3);
    const pair = responsePair(
      17,
      [
        {
          topicId: TOPIC_A,
          partitions: [
            {
              partitionIndex: 0,
              batches: a0,
              placement: ['wal/o1', { key: 'wal/x', in: malformed }, 'wal/o1'],
            },
          ],
        },
      ],
      own,
    );

    // When the answer goes through the filter, then it does not throw: the partition ends before
    // the batch in the unreadable store, counted as a read that failed
    const out = await answer(filter, info, pair.wire);
    expectRecords(pair, TOPIC_A, 0, [a0[0]!]);
    expect(out).toEqual(pair.expectedFrame());
    expect(filter.stats.fallbacks.getFailed).toBe(1);
    // And it asks for inline bytes from that batch; this leader's next fetches go unmarked for a
    // while (stock, all inline), as for any store whose reads fail
    expect(filter.stats.pendingInline).toBe(1);
    expect(filter.stats.backoffs).toBe(1);
    expect(capabilityOf(send(filter).forwarded, 17)).toBeUndefined();
    expect(filter.stats.requestsDuringBackoff).toBe(1);
  });
});
