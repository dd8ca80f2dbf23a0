// What does filling references cost the follower side, and how many GETs does an object take?
//
// 1. fill: a ~1 MiB Fetch v17 response of 6 partitions whose batches are all references into
//    three WAL objects (interleaved, as a leader's objects hold every partition it leads), filled
//    by FetchFillFilter from the memory store (whose GETs hand out views: no store-client copy is
//    measured). Prints CPU µs (user + system, process.cpuUsage) per MB filled, next to a plain
//    1 MiB Buffer copy timed in the same run.
// 2. gets: a leader's objects (400 KB, 6 partitions) reach the follower split across successive
//    Fetch responses, as they do when fetches come faster than objects seal; prints the reader's
//    GETs per object read.
// Run: npx tsx proxy/bench/fetch-fill.bench.ts

import { hash } from 'node:crypto';
import {
  ApiKey,
  encodeFetchRequest,
  encodeFetchResponse,
  encodePartitionSegments,
  encodeRequestHeader,
  encodeResponseHeader,
  type FetchResponsePartition,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
} from '@walproxy/shared';
import { sampleBatch } from '../../shared/test/helpers/record-batches.js';
import { FetchFillFilter } from '../src/filters/fetch-fill.js';
import { createLogger } from '../src/log.js';
import type { RequestInfo } from '../src/net/frame-filter.js';
import { WalRangeReader } from '../src/wal/range-reader.js';
import { MemoryObjectStore } from '../test/wal/memory-store.js';

const VERSION = 17;
const TOPIC = '0123456789abcdef0123456789abcdef';
const PARTITIONS = 6;
const STORE = 'memory://wal-writer-test';
const WARMUP_MS = 1_500;
const ROUNDS = 9;
const ROUND_MS = 500;

function frame(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

interface Placed {
  partition: number;
  batch: Buffer;
  objectKey: string;
  position: number;
}

/** Objects of about `objectBytes` holding `batches` in order (each as the producer sent it). */
function placeInObjects(store: MemoryObjectStore, batches: Placed[], objectBytes: number, prefix: string) {
  let parts: Buffer[] = [];
  let size = 0;
  let index = 0;
  const seal = () => {
    if (parts.length === 0) return;
    store.objects.set(`${prefix}/${index}`, Buffer.concat(parts));
    parts = [];
    size = 0;
    index++;
  };
  for (const placed of batches) {
    if (size + placed.batch.length > objectBytes) seal();
    const produced = Buffer.from(placed.batch);
    produced.writeBigInt64BE(0n, 0);
    produced.writeInt32BE(-1, 12);
    placed.objectKey = `${prefix}/${index}`;
    placed.position = size;
    parts.push(produced);
    size += produced.length;
  }
  seal();
  return index;
}

/** `batches` per partition, ~16 KiB each, consecutive offsets, interleaved across partitions. */
function leaderBatches(perPartition: number, valueSize = 160): Placed[] {
  const next = Array.from({ length: PARTITIONS }, (_, p) => BigInt(p * 1_000_000));
  const out: Placed[] = [];
  for (let i = 0; i < perPartition; i++) {
    for (let p = 0; p < PARTITIONS; p++) {
      const count = 90 + ((i * 7 + p) % 20);
      out.push({
        partition: p,
        batch: sampleBatch(next[p]!, count, valueSize, p * 100 + i),
        objectKey: '',
        position: 0,
      });
      next[p]! += BigInt(count);
    }
  }
  return out;
}

/** The leader side's answer carrying `batches` as references only. */
function referenceResponse(batches: readonly Placed[], correlationId: number): Buffer {
  const partitions: FetchResponsePartition[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const segments: PartitionSegment[] = batches
      .filter((b) => b.partition === p)
      .map((b) => ({
        kind: 'reference',
        baseOffset: b.batch.readBigInt64BE(0),
        partitionLeaderEpoch: b.batch.readInt32BE(12),
        crc: b.batch.readUInt32BE(17),
        digest: hash('sha256', b.batch.subarray(61), 'buffer'),
        store: STORE,
        objectKey: b.objectKey,
        position: b.position,
        length: b.batch.length,
      }));
    partitions.push({
      partitionIndex: p,
      errorCode: 0,
      highWatermark: 1n << 40n,
      lastStableOffset: 1n << 40n,
      logStartOffset: 0n,
      abortedTransactions: null,
      preferredReadReplica: -1,
      records: Buffer.alloc(0),
      taggedFields:
        segments.length === 0
          ? undefined
          : [{ tag: PARTITION_SEGMENTS_TAG, data: encodePartitionSegments(segments) }],
    });
  }
  const body = encodeFetchResponse(
    { throttleTimeMs: 0, errorCode: 0, sessionId: 7, responses: [{ topicId: TOPIC, partitions }] },
    VERSION,
  );
  return frame([encodeResponseHeader({ correlationId, taggedFields: [] }, 1), body]);
}

let correlation = 0;
const requestBody = encodeFetchRequest(
  {
    replicaId: undefined,
    maxWaitMs: 500,
    minBytes: 1,
    maxBytes: 10_485_760,
    isolationLevel: 0,
    sessionId: 7,
    sessionEpoch: 1,
    topics: [
      {
        topicId: TOPIC,
        partitions: Array.from({ length: PARTITIONS }, (_, p) => ({
          partition: p,
          currentLeaderEpoch: 3,
          fetchOffset: 0n,
          lastFetchedEpoch: 3,
          logStartOffset: 0n,
          partitionMaxBytes: 1_048_576,
        })),
      },
    ],
    forgottenTopicsData: [],
    rackId: 'zone-b',
    replicaState: { replicaId: 2, replicaEpoch: 1n },
  },
  VERSION,
);

/** Marks a follower request, then fills `response` as its answer. */
async function fetchThrough(filter: FetchFillFilter, response: Buffer): Promise<Buffer> {
  const info: RequestInfo = { apiKey: ApiKey.Fetch, apiVersion: VERSION, correlationId: ++correlation };
  const header = encodeRequestHeader({ ...info, clientId: 'broker-2-fetcher-0' });
  filter.onRequest(info, frame([header, requestBody]));
  return await filter.onResponse(info, response);
}

function newFilter(reader: WalRangeReader): FetchFillFilter {
  return new FetchFillFilter({ readerFor: () => reader, log: createLogger('silent') });
}

// ---- 1. fill -------------------------------------------------------------------------------------

async function fillBench(): Promise<void> {
  const store = new MemoryObjectStore();
  const batches = leaderBatches(10);
  const objects = placeInObjects(store, batches, 360_000, 'wal/fill');
  const response = referenceResponse(batches, 1);
  const reader = new WalRangeReader({ store });
  const filter = newFilter(reader);
  const first = await fetchThrough(filter, response);
  const filledBytes = filter.stats.bytesFilled;
  if (filter.stats.referencesFilled !== batches.length || first.length < filledBytes)
    throw new Error('the bench response did not fill');
  const copySource = Buffer.allocUnsafe(filledBytes);
  let sink = 0;

  const measure = async (ms: number) => {
    let fills = 0;
    let copies = 0;
    let fillCpu = 0;
    let copyNs = 0;
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      const c0 = process.cpuUsage();
      for (let i = 0; i < 10; i++) sink += (await fetchThrough(filter, response)).length;
      const c1 = process.cpuUsage(c0);
      fillCpu += c1.user + c1.system;
      fills += 10;
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < 10; i++) {
        const out = Buffer.allocUnsafe(copySource.length);
        copySource.copy(out);
        sink += out[out.length - 1]!;
      }
      copyNs += Number(process.hrtime.bigint() - t0);
      copies += 10;
    }
    const mb = filledBytes / 1e6;
    return { fillUsPerMb: fillCpu / fills / mb, copyUsPerMb: copyNs / 1_000 / copies / mb };
  };

  await measure(WARMUP_MS);
  console.log(
    `fill: ${PARTITIONS} partitions, ${batches.length} reference batches in ${objects} objects, ${filledBytes} bytes filled per response (${response.length} bytes on the wire, ${first.length} out)`,
  );
  console.log('round  fill CPU µs/MB  1 MiB copy µs/MB  fill/copy');
  const results: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const { fillUsPerMb, copyUsPerMb } = await measure(ROUND_MS);
    results.push(fillUsPerMb);
    console.log(
      `${String(r + 1).padStart(5)}  ${fillUsPerMb.toFixed(0).padStart(14)}  ${copyUsPerMb.toFixed(0).padStart(16)}  ${(fillUsPerMb / copyUsPerMb).toFixed(1).padStart(9)}`,
    );
  }
  results.sort((a, b) => a - b);
  console.log(
    `fill CPU µs per MB filled: median ${results[ROUNDS >> 1]!.toFixed(0)} (min ${results[0]!.toFixed(0)})`,
  );
  if (sink === 0) console.log('');
}

// ---- 2. GETs per object --------------------------------------------------------------------------

async function getsBench(): Promise<void> {
  const store = new MemoryObjectStore();
  // About 400 KB per object: 24 batches of ~16 KiB, 4 per partition.
  const batches = leaderBatches(40);
  const objects = placeInObjects(store, batches, 400_000, 'wal/gets');
  console.log(`gets: ${batches.length} batches in ${objects} objects of ~400 KB`);
  console.log('batches per response  GETs  objects  GETs per object');
  for (const perResponse of [7, 13, 24, 50]) {
    const reader = new WalRangeReader({ store });
    const filter = newFilter(reader);
    for (let at = 0; at < batches.length; at += perResponse) {
      await fetchThrough(filter, referenceResponse(batches.slice(at, at + perResponse), ++correlation));
    }
    if (filter.stats.referencesFilled !== batches.length) throw new Error('the gets bench did not fill');
    console.log(
      `${String(perResponse).padStart(20)}  ${String(reader.stats.gets).padStart(4)}  ${String(objects).padStart(7)}  ${(reader.stats.gets / objects).toFixed(2).padStart(15)}`,
    );
  }
}

await fillBench();
await getsBench();
