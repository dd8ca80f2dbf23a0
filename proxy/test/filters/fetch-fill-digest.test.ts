// The follower side proves a referenced batch by the leader's digest, not only by its CRC
// (issue #24 item 3): a WAL object overwritten with a same-header batch whose records differ and
// whose CRC-32C still holds (CRC-32C is linear, so anyone who can write the bucket can forge one)
// is refused before its broker sees a byte of it. Both sides run as the sidecars do: the leader's
// FetchStripFilter over a real WalWriter and batch index, a FileObjectStore on disk, and the
// follower's FetchFillFilter reading that store.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ApiKey,
  crc32c,
  decodeFetchCapability,
  decodeFetchRequest,
  decodeFetchResponse,
  decodePartitionSegments,
  decodeRequestHeader,
  encodeFetchRequest,
  encodeFetchResponse,
  encodeRequestHeader,
  encodeResponseHeader,
  FETCH_CAPABILITY_TAG,
  type FetchResponse,
  PARTITION_SEGMENTS_TAG,
  peekRequestKey,
} from '@walproxy/shared';
import { afterEach, describe, expect, it } from 'vitest';
import { forceCrc32c } from '../../../shared/test/helpers/crc-forge.js';
import { sampleBatch } from '../../../shared/test/helpers/record-batches.js';
import { FetchFillFilter } from '../../src/filters/fetch-fill.js';
import { FetchStripFilter } from '../../src/filters/fetch-strip.js';
import type { Logger } from '../../src/log.js';
import { createLogger } from '../../src/log.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import { FileObjectStore } from '../../src/store/file-store.js';
import { WalBatchIndex } from '../../src/wal/batch-index.js';
import { WalWriter } from '../../src/wal/index.js';
import { WalRangeReader } from '../../src/wal/range-reader.js';

const TOPIC_ID = 'cd'.repeat(16);
const VERSION = 17;

function frame(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

/** A replica Fetch as the follower broker sends it (no walproxy tag). */
function followerRequest(fetchOffset: bigint): Buffer {
  return frame([
    encodeRequestHeader({
      apiKey: ApiKey.Fetch,
      apiVersion: VERSION,
      correlationId: 5,
      clientId: 'replica-2',
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
          { topicId: TOPIC_ID, partitions: [{ partition: 0, fetchOffset, partitionMaxBytes: 1 << 20 }] },
        ],
        forgottenTopicsData: [],
        rackId: '',
        replicaState: { replicaId: 2, replicaEpoch: 7n },
      },
      VERSION,
    ),
  ]);
}

/** The leader broker's answer: `records` for partition 0. */
function brokerAnswer(records: Buffer): Buffer {
  const body: FetchResponse = {
    throttleTimeMs: 0,
    errorCode: 0,
    sessionId: 0,
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
  return frame([encodeResponseHeader({ correlationId: 5 }, 1), encodeFetchResponse(body, VERSION)]);
}

/** As the leader appends it: the producer's bytes with the base offset and leader epoch assigned. */
function asStored(produced: Buffer, baseOffset: bigint): Buffer {
  const stored = Buffer.from(produced);
  stored.writeBigInt64BE(baseOffset, 0);
  stored.writeInt32BE(4, 12);
  return stored;
}

function recordsOf(response: Buffer): Buffer {
  const body = decodeFetchResponse(response.subarray(4 + 5), VERSION);
  return body.responses[0]!.partitions[0]!.records ?? Buffer.alloc(0);
}

function inlineRequestsOf(request: Buffer) {
  const payload = request.subarray(4);
  const { headerLength } = decodeRequestHeader(payload);
  const tag = decodeFetchRequest(payload.subarray(headerLength), VERSION).taggedFields?.find(
    (t) => t.tag === FETCH_CAPABILITY_TAG,
  );
  return tag === undefined ? undefined : decodeFetchCapability(tag.data).inlineRequests;
}

function recordingLogger(): { log: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const log = createLogger('silent');
  return {
    warnings,
    log: new Proxy(log, {
      get(target, key, receiver) {
        if (key === 'warn') return (_fields: unknown, message: string) => warnings.push(message);
        return Reflect.get(target, key, receiver);
      },
    }),
  };
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function cluster() {
  const dir = mkdtempSync(path.join(tmpdir(), 'walproxy-digest-'));
  dirs.push(dir);
  const store = new FileObjectStore(`file://${dir}`, dir);
  const writer = new WalWriter({ store, brokerId: 1, lingerMs: 1 });
  const index = new WalBatchIndex();
  // Two batches of one producer, stored in the WAL and appended by the leader at offsets 0 and 3.
  const a = sampleBatch(0n, 3, 200, 1);
  const b = sampleBatch(0n, 3, 200, 2);
  for (const batch of [a, b]) {
    const ticket = writer.append({ topicName: 'wal-orders', partition: 0, batch });
    index.add('wal-orders', 0, batch, ticket);
    await ticket.durable;
  }
  await writer.close();
  const strip = new FetchStripFilter({
    index,
    topicNames: {
      nameOf: (id: string) => (id === TOPIC_ID ? 'wal-orders' : undefined),
    } as unknown as TopicNames,
    maxHoldMs: 0,
    storeUrl: store.url,
    log: createLogger('silent'),
  });
  const { log, warnings } = recordingLogger();
  const reader = new WalRangeReader({ store });
  const fill = new FetchFillFilter({ readerFor: (url) => (url === store.url ? reader : undefined), log });
  /** One replica fetch through both sidecars: what the follower's broker gets, and what went across. */
  const fetch = async (fetchOffset: bigint, brokerRecords: Buffer) => {
    const request = followerRequest(fetchOffset);
    const info: RequestInfo = { ...peekRequestKey(request.subarray(4)) };
    const decision = fill.onRequest(info, request);
    if (decision.action !== 'forward') throw new Error('not forwarded');
    const leaderInfo: RequestInfo = { ...peekRequestKey(decision.frame.subarray(4)) };
    strip.onRequest(leaderInfo, decision.frame);
    const answer = await strip.onResponse(leaderInfo, brokerAnswer(brokerRecords));
    return { marked: decision.frame, answer, delivered: await fill.onResponse(info, answer) };
  };
  return { dir, store, a: asStored(a, 0n), b: asStored(b, 3n), fetch, fill, warnings };
}

describe('FetchFillFilter proves referenced batches by the leader digest', () => {
  it('fills the leader bytes when the object holds them', async () => {
    const { a, b, fetch, fill } = await cluster();
    const { answer, delivered } = await fetch(0n, Buffer.concat([a, b]));
    // Both batches crossed as references carrying the leader's digest
    const body = decodeFetchResponse(answer.subarray(4 + 5), VERSION);
    const tag = body.responses[0]!.partitions[0]!.taggedFields!.find(
      (t) => t.tag === PARTITION_SEGMENTS_TAG,
    )!;
    const segments = decodePartitionSegments(tag.data);
    expect(segments.map((s) => s.kind === 'reference' && s.digest?.length)).toEqual([32, 32]);
    expect(recordsOf(delivered)).toEqual(Buffer.concat([a, b]));
    expect(fill.stats.referencesFilled).toBe(2);
    expect(fill.stats.fallbacks.digestMismatch).toBe(0);
  });

  it('refuses an object overwritten with a same-header batch whose forged CRC holds: counted, the partition goes inline, no forged byte reaches the broker', async () => {
    // Given the leader's two batches stored in a WAL object on disk
    const { dir, store, a, b, fetch, fill, warnings } = await cluster();
    const files: string[] = [];
    for await (const info of store.list('')) files.push(path.join(dir, ...info.key.split('/')));
    const file = files.find((f) => readFileSync(f).includes(b.subarray(61)))!;
    const object = readFileSync(file);
    const at = object.indexOf(b.subarray(61));
    expect(at).toBeGreaterThan(61);
    // And someone who can write the bucket overwrites b's records in place, then forges four of
    // its bytes so that the CRC-32C of the batch is still the one its header says
    const position = at - 61;
    const forged = object.subarray(position, position + b.length);
    forged.write('FORGED', 61 + 40, 'latin1');
    forceCrc32c(forged, 21, 61 + 60, b.readUInt32BE(17));
    expect(crc32c(forged.subarray(21))).toBe(b.readUInt32BE(17));
    expect(forged.subarray(16, 61).equals(b.subarray(16, 61))).toBe(true);
    expect(forged.subarray(61).equals(b.subarray(61))).toBe(false);
    writeFileSync(file, object);

    // When the follower fetches both batches as references
    const first = await fetch(0n, Buffer.concat([a, b]));

    // Then its broker gets a, and nothing of the forged batch: the partition ends before b
    expect(recordsOf(first.delivered)).toEqual(a);
    expect(first.delivered.indexOf(Buffer.from('FORGED', 'latin1'))).toBe(-1);
    // And the refusal is counted and logged
    expect(fill.stats.fallbacks.digestMismatch).toBe(1);
    expect(fill.stats.referencesFilled).toBe(1);
    expect(warnings.some((w) => /not the ones the leader stored/.test(w))).toBe(true);

    // When the follower fetches on from b's offset
    const second = await fetch(3n, b);
    // Then it asks for the partition inline from b, and gets the leader's own b across the link
    expect(inlineRequestsOf(second.marked)).toEqual([{ topicId: TOPIC_ID, partition: 0, fromOffset: 3n }]);
    expect(recordsOf(second.delivered)).toEqual(b);
    expect(second.delivered.equals(brokerAnswer(b))).toBe(true);
  });
});
