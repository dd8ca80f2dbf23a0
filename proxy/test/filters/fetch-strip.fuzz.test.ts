// Mutated replica Fetch exchanges, from frames captured on a real cluster, through the leader's
// FetchStripFilter and then the follower's FetchFillFilter, the way the connection pipes call
// them (issue #12: "batches the leader side will not reference pass as the broker's bytes").
// For every case:
// - the marked request goes upstream as it came, whatever its bytes (the broker judges them);
// - the leader side never throws on the broker's answer; an answer it cannot read passes as sent;
// - every reference it sends names a stored batch equal to the broker's (the stored bytes with
//   the two fields the leader assigned are the broker's batch), and every other byte is the
//   broker's: partitions, errors, offsets, other tags;
// - the follower side then rebuilds exactly the broker's answer; when the store lost or changed
//   bytes, each partition ends at a batch of the broker's answer, and the next fetch, which asks
//   for those partitions inline, rebuilds the broker's answer whole.
// Mutations: the broker's answer anywhere (bits, bytes, ints, cuts, insertions); a records length;
// a batch's header or records in place (magic, Length, CRC, count, attributes, offsets, with and
// without a valid CRC); a partition's records re-encoded (cut, batches dropped, doubled, swapped,
// garbage); the store's copy changed, cut, gone, failing or hanging; a produced batch whose CRC
// and header collide with the broker's batch; the marked request itself.
import {
  encodeFetchResponse,
  type FetchResponsePartition,
  peekRequestKey,
  type RecordBatch,
  recordBatches,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { forceCrc32c } from '../../../shared/test/helpers/crc-forge.js';
import { FetchStripFilter } from '../../src/filters/fetch-strip.js';
import { createLogger } from '../../src/log.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import type { WalBatchIndex } from '../../src/wal/batch-index.js';
import {
  decodeFetch,
  type FuzzStore,
  fixtures,
  followerFill,
  isBatchPrefix,
  leaderIndex,
  partitionFields,
  partitionsOf,
  responseFields,
  segmentsOf,
  storeOf,
  topicNames,
  type WalBatch,
  walBatches,
} from './fetch-fuzz-support.js';
import {
  caseName,
  editRecordsLength,
  type FetchFixture,
  framed,
  fuzzCases,
  mutateBatch,
  mutateFrame,
  Rng,
} from './fuzz-support.js';

const FILE = 'fetch-strip.fuzz';
const CASES = 1_200;

function stripFilter(index: WalBatchIndex): FetchStripFilter {
  return new FetchStripFilter({
    index,
    topicNames,
    maxHoldMs: 20,
    storeUrl: fixtures.manifest.storeUrl,
    log: createLogger('silent'),
  });
}

function infoOf(request: Buffer): RequestInfo {
  return { ...peekRequestKey(request.subarray(4)) };
}

function completeBatches(records: Buffer | null): RecordBatch[] {
  const out: RecordBatch[] = [];
  try {
    for (const b of recordBatches(records ?? Buffer.alloc(0))) if (!b.partial) out.push(b);
  } catch {}
  return out;
}

/** The records a partition of the leader side's answer stands for: inline bytes and references, resolved. */
function expand(partition: FetchResponsePartition, objects: ReadonlyMap<string, Buffer>): Buffer | string {
  const segments = segmentsOf(partition);
  const records = partition.records ?? Buffer.alloc(0);
  if (segments === undefined) return records;
  const parts: Buffer[] = [];
  let cursor = 0;
  for (const s of segments) {
    if (s.kind === 'inline') {
      parts.push(records.subarray(cursor, cursor + s.length));
      cursor += s.length;
      continue;
    }
    const stored = objects.get(s.objectKey)?.subarray(s.position, s.position + s.length);
    if (stored === undefined || stored.length !== s.length)
      return `a reference to ${s.objectKey}@${s.position} that is not stored`;
    const batch = Buffer.from(stored);
    batch.writeBigInt64BE(s.baseOffset, 0);
    batch.writeInt32BE(s.partitionLeaderEpoch, 12);
    if (batch.readUInt32BE(17) !== s.crc) return `a reference whose CRC ${s.crc} is not the stored one`;
    parts.push(batch);
  }
  if (cursor !== records.length) return `${records.length - cursor} inline bytes no segment accounts for`;
  return Buffer.concat(parts);
}

interface Leader {
  /** What the leader's store holds, as its index knows it. */
  objects: Map<string, Buffer>;
  batches: WalBatch[];
  /** What the follower side's store answers (the same, unless the case changed it). */
  store: FuzzStore;
  stockResponse: Buffer;
  markedRequest: Buffer;
  what: string;
}

/** The leader's store and the exchange, with one mutation. */
function mutate(rng: Rng, base: FetchFixture): Leader & { storeIntact: boolean } {
  const objects = new Map(fixtures.objects);
  let batches = walBatches(objects);
  let stockResponse = base.stockResponse;
  let markedRequest = base.markedRequest;
  let what: string;
  let storeIntact = true;
  const decoded = decodeFetch(base.stockResponse, base.version)!;
  const withRecords = partitionsOf(decoded.body).filter((p) => (p.partition.records?.length ?? 0) > 0);
  const family = rng.int(6);
  let store: FuzzStore | undefined;
  switch (family) {
    case 0: {
      // The broker's answer, anywhere after the correlation id (the pipe pairs by it).
      const m = mutateFrame(rng, base.stockResponse, 8);
      stockResponse = m.bytes;
      what = `response: ${m.what}`;
      break;
    }
    case 1: {
      const target = rng.pick(withRecords).partition;
      if (rng.chance(0.2)) {
        const m = editRecordsLength(rng, base.stockResponse, target.records!, true);
        stockResponse = m.bytes;
        what = `partition ${target.partitionIndex}: ${m.what}`;
        break;
      }
      const batch = rng.pick(completeBatches(target.records));
      const frame = Buffer.from(base.stockResponse);
      const offset = target.records!.byteOffset - base.stockResponse.byteOffset + batch.offset;
      what = `partition ${target.partitionIndex} batch at ${batch.offset}: ${mutateBatch(rng, frame, offset, batch.size)}`;
      stockResponse = frame;
      break;
    }
    case 2: {
      const body = decodeFetch(base.stockResponse, base.version)!.body;
      const all = partitionsOf(body).map((p) => p.partition);
      const target = rng.pick(all.filter((p) => (p.records?.length ?? 0) > 0));
      const records = target.records!;
      const list = completeBatches(records).map((b) => b.bytes());
      const other = rng.pick(all).records ?? Buffer.alloc(0);
      switch (rng.int(7)) {
        case 0: {
          const cut = rng.int(records.length);
          target.records = records.subarray(0, cut);
          what = `records cut to ${cut}`;
          break;
        }
        case 1:
          list.splice(rng.int(list.length), 1);
          target.records = Buffer.concat(list);
          what = 'a batch dropped';
          break;
        case 2:
          target.records = Buffer.concat([...list, ...list]);
          what = 'the batches twice';
          break;
        case 3:
          target.records = Buffer.concat(list.reverse());
          what = 'the batches reversed';
          break;
        case 4:
          target.records = Buffer.concat([records, rng.bytes(rng.range(1, 80))]);
          what = 'garbage after the batches';
          break;
        case 5:
          target.records = Buffer.concat([other, records]);
          what = "another partition's batches first";
          break;
        default:
          target.records = Buffer.alloc(0);
          what = 'no records';
          break;
      }
      what = `partition ${target.partitionIndex}: ${what}`;
      const header = base.stockResponse.subarray(4, 4 + decoded.headerLength);
      stockResponse = framed(Buffer.concat([header, encodeFetchResponse(body, base.version)]));
      break;
    }
    case 3: {
      // The follower's store lost or changed what the leader stored.
      storeIntact = false;
      store = storeOf(objects);
      // One the answer references (the sidecar's own answer says which).
      const referenced = partitionsOf(decodeFetch(base.referencedResponse, base.version)!.body).flatMap(
        ({ partition }) => (segmentsOf(partition) ?? []).filter((s) => s.kind === 'reference'),
      );
      const batch = rng.pick(referenced);
      const object = store.objects.get(batch.objectKey)!;
      switch (rng.int(5)) {
        case 0: {
          const at = batch.position + rng.int(batch.length);
          object[at]! ^= 1 << rng.int(8);
          what = `${batch.objectKey} byte ${at} flipped`;
          break;
        }
        case 1: {
          const cut = batch.position + rng.int(batch.length);
          store.objects.set(batch.objectKey, object.subarray(0, cut));
          what = `${batch.objectKey} cut to ${cut}`;
          break;
        }
        case 2:
          store.objects.delete(batch.objectKey);
          what = `${batch.objectKey} gone`;
          break;
        case 3:
          store.failing.add(batch.objectKey);
          what = `GETs of ${batch.objectKey} fail`;
          break;
        default:
          store.hanging.add(batch.objectKey);
          what = `GETs of ${batch.objectKey} never answer`;
          break;
      }
      break;
    }
    case 4: {
      // A produced batch with the CRC and header of the broker's batch but other records, in
      // place of the stored one (a producer forging CRC-32C collisions).
      const batch = rng.pick(batches);
      const produced = Buffer.from(
        objects.get(batch.objectKey)!.subarray(batch.position, batch.position + batch.length),
      );
      const crc = produced.readUInt32BE(17);
      const at = 61 + rng.int(Math.max(1, produced.length - 65));
      produced[Math.min(produced.length - 1, at + 4)]! ^= 0x40;
      forceCrc32c(produced, 21, at, crc);
      const key = `forged/${batch.objectKey}`;
      objects.set(key, Buffer.concat([Buffer.alloc(16, 0xee), produced]));
      batches = batches.map((b) => (b === batch ? { ...b, objectKey: key, position: 16 } : b));
      what = `a forged collision of ${batch.topic}-${batch.partition} ${batch.objectKey}@${batch.position}`;
      break;
    }
    default: {
      // The marked request, after its header (another key or version goes elsewhere).
      const m = mutateFrame(rng, base.markedRequest, 12);
      markedRequest = m.bytes;
      what = `marked request: ${m.what}`;
      break;
    }
  }
  return {
    objects,
    batches,
    store: store ?? storeOf(objects),
    stockResponse,
    markedRequest,
    what,
    storeIntact,
  };
}

async function runCase(index: number): Promise<string[]> {
  const rng = Rng.forCase(FILE, index);
  const base = rng.pick(fixtures.fetch);
  const leader = mutate(rng, base);
  const name = caseName(FILE, index, `${base.name}, ${leader.what}`);
  const problems: string[] = [];
  const strip = stripFilter(await leaderIndex(leader.batches, leader.objects));
  const info = infoOf(leader.markedRequest);
  const x = leader.stockResponse;

  // The leader side: the marked request, then the broker's answer.
  try {
    const decision = strip.onRequest(info, leader.markedRequest);
    if (decision.action !== 'forward' || !decision.frame.equals(leader.markedRequest)) {
      problems.push(`${name}: the marked request was not forwarded as it came`);
    }
  } catch (error) {
    // Nothing in a Fetch request is the leader side's to refuse: the broker judges it.
    return [`${name}: onRequest threw ${(error as Error).stack}`];
  }
  let answer: Buffer;
  try {
    answer = await strip.onResponse(info, x);
  } catch (error) {
    return [`${name}: the leader side threw on the broker's answer: ${(error as Error).stack}`];
  }
  const stock = decodeFetch(x, info.apiVersion);
  if (stock === undefined) {
    if (!answer.equals(x)) problems.push(`${name}: an answer the codec cannot read was not passed as sent`);
    return problems;
  }
  const sent = decodeFetch(answer, info.apiVersion);
  if (sent === undefined) return [`${name}: the leader side's answer cannot be read`];
  if (JSON.stringify(responseFields(sent.body)) !== JSON.stringify(responseFields(stock.body))) {
    problems.push(`${name}: the leader side changed the response's fields`);
  }
  const stockPartitions = partitionsOf(stock.body);
  const sentPartitions = partitionsOf(sent.body);
  for (const [i, s] of stockPartitions.entries()) {
    const p = sentPartitions[i];
    const where = `${s.topicKey.slice(0, 8)}-${s.partition.partitionIndex}`;
    if (
      p === undefined ||
      JSON.stringify(partitionFields(p.partition)) !== JSON.stringify(partitionFields(s.partition))
    ) {
      problems.push(`${name}: partition ${where} changed beyond its records`);
      continue;
    }
    const records = expand(p.partition, leader.objects);
    if (typeof records === 'string') problems.push(`${name}: partition ${where}: ${records}`);
    else if (!records.equals(s.partition.records ?? Buffer.alloc(0))) {
      problems.push(`${name}: partition ${where}: references do not stand for the broker's batches`);
    }
  }

  // The follower side: its own request (marked by the fill), then the leader side's answer.
  const fill = followerFill(leader.store);
  const followerInfo = infoOf(base.followerRequest);
  fill.onRequest(followerInfo, base.followerRequest);
  let filled: Buffer;
  try {
    filled = await fill.onResponse(followerInfo, answer);
  } catch (error) {
    return [...problems, `${name}: the follower side threw: ${(error as Error).stack}`];
  }
  if (filled.equals(x)) return problems;
  // Not the broker's answer at once: each partition ends at one of the broker's batches...
  const got = decodeFetch(filled, info.apiVersion);
  if (got === undefined) return [...problems, `${name}: the follower got bytes it cannot read`];
  for (const [i, s] of stockPartitions.entries()) {
    const p = partitionsOf(got.body)[i]!;
    if (!isBatchPrefix(p.partition.records ?? Buffer.alloc(0), s.partition.records ?? Buffer.alloc(0))) {
      problems.push(
        `${name}: partition ${s.partition.partitionIndex} is not the broker's batches up to one of them`,
      );
    }
  }
  // ... for a reason: the store lost or changed bytes, or the broker's batches are not a log a
  // follower appends (offsets going back, bytes that are not v2 batches).
  const { malformed, ...storeFaults } = fill.stats.fallbacks;
  if (leader.storeIntact && Object.values(storeFaults).some((n) => n > 0)) {
    problems.push(
      `${name}: a fallback for a store fault with the store intact: ${JSON.stringify(fill.stats.fallbacks)}`,
    );
  }
  // And the next fetch asks for what was missing inline, and gets the broker's answer whole.
  const nextInfo = infoOf(base.followerRequest);
  const marked = fill.onRequest(nextInfo, base.followerRequest);
  if (marked.action !== 'forward') return [...problems, `${name}: the next request was not forwarded`];
  const leaderInfo = infoOf(marked.frame);
  strip.onRequest(leaderInfo, marked.frame);
  const again = await fill.onResponse(nextInfo, await strip.onResponse(leaderInfo, x));
  if (!again.equals(x)) problems.push(`${name}: the fetch after a fallback did not get the broker's answer`);
  return problems;
}

describe('FetchStripFilter and FetchFillFilter, fuzzed with mutations of captured replica Fetch exchanges', () => {
  it('answers each captured exchange as the sidecars did, and the follower rebuilds the broker’s answer', async () => {
    for (const exchange of fixtures.fetch) {
      // Given the leader's WAL as captured
      const strip = stripFilter(await leaderIndex(walBatches(fixtures.objects), fixtures.objects));
      const info = infoOf(exchange.markedRequest);
      // When the marked request and the broker's answer pass the leader side
      strip.onRequest(info, exchange.markedRequest);
      const answer = await strip.onResponse(info, exchange.stockResponse);
      // Then it references what the leader's sidecar referenced (a batch sent twice may be
      // found in another object: both copies are the same bytes), and stands for the broker's batches
      const segments = (frame: Buffer) =>
        partitionsOf(decodeFetch(frame, exchange.version)!.body).map(({ partition }) =>
          segmentsOf(partition)?.map((s) =>
            s.kind === 'inline' ? s.length : `${s.baseOffset}/${s.partitionLeaderEpoch}/${s.crc}/${s.length}`,
          ),
        );
      expect(segments(answer), exchange.name).toEqual(segments(exchange.referencedResponse));
      const stock = partitionsOf(decodeFetch(exchange.stockResponse, exchange.version)!.body);
      for (const [i, { partition }] of partitionsOf(decodeFetch(answer, exchange.version)!.body).entries()) {
        expect(expand(partition, fixtures.objects), exchange.name).toEqual(stock[i]!.partition.records);
      }
      // And the follower side turns it back into the broker's answer
      const fill = followerFill(storeOf(fixtures.objects));
      const followerInfo = infoOf(exchange.followerRequest);
      fill.onRequest(followerInfo, exchange.followerRequest);
      const filled = await fill.onResponse(followerInfo, exchange.referencedResponse);
      expect(filled.equals(exchange.stockResponse), exchange.name).toBe(true);
    }
  });

  it('references only batches equal to the broker’s, passes everything else as the broker sent it, and the follower gets the broker’s bytes', async () => {
    const problems: string[] = [];
    for (const index of fuzzCases(CASES)) problems.push(...(await runCase(index)));
    expect(problems.slice(0, 20)).toEqual([]);
  });
});
