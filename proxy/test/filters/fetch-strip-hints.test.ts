// The leader side's prefetch hints (shared/src/replication/prefetch-hints.ts): a follower side that
// asks gets, in a response it references, the objects stored ahead for partitions it fetches.
import {
  ApiKey,
  decodeFetchResponse,
  decodePrefetchHints,
  encodeFetchCapability,
  encodeFetchRequest,
  encodeFetchResponse,
  encodePrefetchHintsWanted,
  encodeRequestHeader,
  encodeResponseHeader,
  FETCH_CAPABILITY_TAG,
  type FetchResponse,
  PREFETCH_HINTS_TAG,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { sampleBatch } from '../../../shared/test/helpers/record-batches.js';
import { FetchStripFilter } from '../../src/filters/fetch-strip.js';
import { createLogger } from '../../src/log.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import type { FilterConnection, RequestInfo } from '../../src/net/frame-filter.js';
import { WalBatchIndex } from '../../src/wal/batch-index.js';
import type { WalAppendTicket } from '../../src/wal/index.js';

const TOPIC_ID = 'aa'.repeat(16);
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

function fetchRequest(wantsHints: boolean): Buffer {
  const taggedFields = [{ tag: FETCH_CAPABILITY_TAG, data: encodeFetchCapability({ inlineRequests: [] }) }];
  if (wantsHints) taggedFields.push({ tag: PREFETCH_HINTS_TAG, data: encodePrefetchHintsWanted() });
  return frame([
    encodeRequestHeader({ apiKey: ApiKey.Fetch, apiVersion: VERSION, correlationId: 9, clientId: 'f' }),
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

function fetchResponse(records: Buffer): Buffer {
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
  return frame([encodeResponseHeader({ correlationId: 9 }, 1), encodeFetchResponse(body, VERSION)]);
}

function storedIn(objectKey: string, length: number, objectSize = 999): WalAppendTicket {
  return {
    durable: Promise.resolve({ objectKey, position: 28, length, objectSize, uploadedAtMs: 1 }),
    confirm: () => undefined,
    reject: () => undefined,
  } as WalAppendTicket;
}

function asStored(produced: Buffer, baseOffset: bigint): Buffer {
  const stored = Buffer.from(produced);
  stored.writeBigInt64BE(baseOffset, 0);
  stored.writeInt32BE(5, 12);
  return stored;
}

function setup() {
  const index = new WalBatchIndex();
  const topicNames = {
    nameOf: (id: string) => (id === TOPIC_ID ? 'wal-orders' : undefined),
  } as unknown as TopicNames;
  const filter = new FetchStripFilter({
    index,
    topicNames,
    maxHoldMs: 200,
    storeUrl: STORE,
    log: createLogger('silent'),
  });
  return { index, filter };
}

const info = (correlationId: number): RequestInfo => ({
  apiKey: ApiKey.Fetch,
  apiVersion: VERSION,
  correlationId,
});
const connection = (): FilterConnection => ({ log: createLogger('silent') });

function hintsOf(response: Buffer) {
  const body = decodeFetchResponse(response.subarray(4 + 5), VERSION);
  const tag = body.taggedFields?.find((t) => t.tag === PREFETCH_HINTS_TAG);
  return tag === undefined ? undefined : decodePrefetchHints(tag.data);
}

describe('FetchStripFilter prefetch hints', () => {
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
    const follower = connection();

    // When a follower side that asks for hints fetches a
    const first = info(1);
    filter.onRequest(first, fetchRequest(true), follower);
    const out = (await filter.onResponse(first, fetchResponse(asStored(a, 0n)))) as Buffer;

    // Then the response references o1 and hints o2 and o3, oldest first, with their sizes
    expect(hintsOf(out)).toEqual([
      { store: STORE, objectKey: 'o2', size: 2000 },
      { store: STORE, objectKey: 'o3', size: 3000 },
    ]);
    expect(filter.stats.prefetchHintsSent).toBe(2);

    // And when it fetches b, nothing is hinted again (no object stored since)
    const second = info(2);
    filter.onRequest(second, fetchRequest(true), follower);
    expect(
      hintsOf((await filter.onResponse(second, fetchResponse(asStored(b, 3n)))) as Buffer),
    ).toBeUndefined();
  });

  it('hints nothing to a follower side that does not ask (an older walproxy), nor in a response it does not rewrite', async () => {
    const { index, filter } = setup();
    const a = sampleBatch(0n, 3, 100, 1);
    const b = sampleBatch(0n, 2, 100, 2);
    index.add('wal-orders', 0, a, storedIn('o1', a.length));
    index.add('wal-orders', 0, b, storedIn('o2', b.length));
    await Promise.resolve();
    const follower = connection();
    // An older follower side: the capability, no ask
    const old = info(1);
    filter.onRequest(old, fetchRequest(false), follower);
    const out = (await filter.onResponse(old, fetchResponse(asStored(a, 0n)))) as Buffer;
    expect(hintsOf(out)).toBeUndefined();
    // A response with no batch of the WAL (nothing to reference) passes as the broker sent it
    const empty = info(2);
    filter.onRequest(empty, fetchRequest(true), follower);
    const stock = fetchResponse(Buffer.alloc(0));
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
    for (const follower of [connection(), connection()]) {
      const i = info(1);
      filter.onRequest(i, fetchRequest(true), follower);
      const out = (await filter.onResponse(i, fetchResponse(asStored(a, 0n)))) as Buffer;
      expect(hintsOf(out)?.map((h) => h.objectKey)).toEqual(['o2']);
      filter.onClose(follower);
    }
  });
});
