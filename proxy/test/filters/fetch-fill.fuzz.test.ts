// Mutated leader-side answers with references, from frames captured on a real cluster, through
// the follower's FetchFillFilter the way the egress pipe calls it (issue #12: "a follower never
// receives a batch whose bytes differ from what the leader stored"). For every case:
// - the filter never throws: an answer the codec cannot read reaches the follower's broker as it
//   came (issue #24: closing would bring it back after a reconnect, a loop; Kafka frames that are
//   not even frames are the pipe's to close on);
// - everything but the referencing partitions' records and segment lists reaches the follower as
//   the leader side sent it;
// - each referencing partition's records are batches the leader side sent inline, or batches the
//   leader stored where its references point, whose CRC-32C holds and is the one the reference
//   names, and whose records have the reference's SHA-256 (a store overwritten with a same-CRC
//   batch delivers nothing of it);
// - when only the store or where a reference points is wrong (the leader side tells the truth
//   about its log), each partition is the broker's answer cut after one of its batches, and the
//   next fetch, asking for those partitions inline, gets the broker's answer whole.
// Mutations: the store's copy (bits, cuts, gone, failing GETs, GETs that never answer, records
// changed with the CRC forged to hold); a reference's position, length, CRC, digest, object key
// or store (a name the reader factory throws on included); the segment list itself (lengths,
// segments dropped, repeated, swapped, offsets); the list's bytes; inline records; the whole frame.
import {
  decodeFetchRequest,
  decodeRequestHeader,
  encodeFetchResponse,
  encodePartitionSegments,
  FETCH_CAPABILITY_TAG,
  type FetchResponsePartition,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
  PREFETCH_HINTS_TAG,
  peekRequestKey,
  recordBatches,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { forceCrc32c } from '../../../shared/test/helpers/crc-forge.js';
import { FetchStripFilter } from '../../src/filters/fetch-strip.js';
import { createLogger } from '../../src/log.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import {
  decodeFetch,
  type FuzzStore,
  fixtures,
  followerFill,
  isBatchPrefix,
  isStoredBatch,
  leaderIndex,
  partitionFields,
  partitionsOf,
  responseFields,
  segmentsOf,
  storeOf,
  topicNames,
  walBatches,
} from './fetch-fuzz-support.js';
import {
  caseName,
  type FetchFixture,
  framed,
  fuzzCases,
  mutateBatch,
  mutateFrame,
  Rng,
} from './fuzz-support.js';

const FILE = 'fetch-fill.fuzz';
const CASES = 1_200;

function infoOf(request: Buffer): RequestInfo {
  return { ...peekRequestKey(request.subarray(4)) };
}

interface Case {
  answer: Buffer;
  store: FuzzStore;
  /** Whether the leader side's answer still tells the truth about its log (only where bytes are was changed). */
  honest: boolean;
  what: string;
}

function tagged(partitions: FetchResponsePartition[]): FetchResponsePartition[] {
  return partitions.filter((p) => segmentsOf(p) !== undefined);
}

function withSegments(
  partition: FetchResponsePartition,
  segments: PartitionSegment[],
  version: 2 | 3 = 3,
): void {
  partition.taggedFields = partition.taggedFields!.map((t) =>
    t.tag === PARTITION_SEGMENTS_TAG ? { tag: t.tag, data: encodePartitionSegments(segments, version) } : t,
  );
}

function mutate(rng: Rng, base: FetchFixture): Case {
  const store = storeOf(fixtures.objects);
  const decoded = decodeFetch(base.referencedResponse, base.version)!;
  const reencoded = () =>
    framed(
      Buffer.concat([
        base.referencedResponse.subarray(4, 4 + decoded.headerLength),
        encodeFetchResponse(decoded.body, base.version),
      ]),
    );
  const partitions = partitionsOf(decoded.body).map((p) => p.partition);
  const target = rng.pick(tagged(partitions));
  const segments = segmentsOf(target)!;
  const refs = segments.filter((s) => s.kind === 'reference');
  const ref = rng.pick(refs);
  const where = `partition ${target.partitionIndex}`;
  switch (rng.int(7)) {
    case 0: {
      const object = store.objects.get(ref.objectKey)!;
      let what: string;
      switch (rng.int(6)) {
        case 0: {
          const at = ref.position + rng.int(ref.length);
          object[at]! ^= 1 << rng.int(8);
          what = `byte ${at} flipped`;
          break;
        }
        case 1: {
          const cut = ref.position + rng.int(ref.length);
          store.objects.set(ref.objectKey, object.subarray(0, cut));
          what = `cut to ${cut}`;
          break;
        }
        case 2:
          store.objects.delete(ref.objectKey);
          what = 'gone';
          break;
        case 3:
          store.failing.add(ref.objectKey);
          what = 'GETs fail';
          break;
        case 4: {
          // Overwritten with a batch of the same header whose records differ and whose CRC still
          // holds (CRC-32C is linear): only the digest tells it from the leader's.
          const at = ref.position + 61 + rng.int(ref.length - 61);
          object[at]! ^= 1 << rng.int(8);
          const fix = Math.min(Math.max(ref.position + 61, at - 2), ref.position + ref.length - 4);
          forceCrc32c(
            object.subarray(ref.position, ref.position + ref.length),
            21,
            fix - ref.position,
            ref.crc,
          );
          what = `records byte ${at} changed, CRC forged to hold`;
          break;
        }
        default:
          store.hanging.add(ref.objectKey);
          what = 'GETs never answer';
          break;
      }
      return {
        answer: base.referencedResponse,
        store,
        honest: true,
        what: `store: ${ref.objectKey} ${what}`,
      };
    }
    case 1: {
      // Where the reference points, or what it says the batch's CRC is.
      const keys = [...fixtures.objects.keys()];
      const edits: Array<[string, () => void]> = [
        ['position + 1', () => (ref.position += 1)],
        ['position - 1', () => (ref.position = Math.max(0, ref.position - 1))],
        ['position 0', () => (ref.position = 0)],
        ['position past the object', () => (ref.position += 100_000)],
        ['length + 1', () => (ref.length += 1)],
        ['length - 1', () => (ref.length -= 1)],
        ['length + 12', () => (ref.length += 12)],
        ['a CRC bit', () => (ref.crc = (ref.crc ^ (1 << rng.int(32))) >>> 0)],
        [
          'a digest bit',
          () => {
            const digest = Buffer.from(ref.digest!);
            digest[rng.int(digest.length)]! ^= 1 << rng.int(8);
            ref.digest = digest;
          },
        ],
        ['no digest (a version-2 list)', () => delete ref.digest],
        ['another object', () => (ref.objectKey = rng.pick(keys.filter((k) => k !== ref.objectKey)) ?? 'x')],
        ['no such object', () => (ref.objectKey = `${ref.objectKey}.missing`)],
        ['another store', () => (ref.store = 's3://walproxy-elsewhere/wal')],
        ['a store name the reader factory throws on', () => (ref.store = 'not a url')],
      ];
      const [what, edit] = rng.pick(edits);
      edit();
      // A reference without its digest: the list a leader side writes for a version-2 follower side.
      withSegments(target, segments, ref.digest === undefined ? 2 : 3);
      return { answer: reencoded(), store, honest: true, what: `${where}: reference ${what}` };
    }
    case 2: {
      // The segment list no longer describes the log: only what a follower may get is checked.
      const edits: Array<[string, () => PartitionSegment[]]> = [
        ['a segment dropped', () => segments.filter((_, i) => i !== rng.int(segments.length))],
        ['a reference repeated', () => [...segments, ref]],
        ['segments reversed', () => [...segments].reverse()],
        ['an inline segment of 61 bytes first', () => [{ kind: 'inline', length: 61 }, ...segments]],
        [
          'a base offset moved back',
          () => segments.map((s) => (s === ref ? { ...s, baseOffset: s.baseOffset - 1_000n } : s)),
        ],
        ['leader epoch -1', () => segments.map((s) => (s === ref ? { ...s, partitionLeaderEpoch: -1 } : s))],
        ['no segments', () => []],
      ];
      const [what, edit] = rng.pick(edits);
      withSegments(target, edit());
      return { answer: reencoded(), store, honest: false, what: `${where}: ${what}` };
    }
    case 3: {
      // The segment list's bytes.
      const tag = target.taggedFields!.find((t) => t.tag === PARTITION_SEGMENTS_TAG)!;
      const m = mutateFrame(rng, framed(tag.data), 4);
      target.taggedFields = target.taggedFields!.map((t) =>
        t.tag === PARTITION_SEGMENTS_TAG ? { tag: t.tag, data: m.bytes.subarray(4) } : t,
      );
      return { answer: reencoded(), store, honest: false, what: `${where}: segment list ${m.what}` };
    }
    case 4: {
      // Records the leader side sent inline (a partition without references, or inline segments).
      const withRecords = partitions.filter((p) => (p.records?.length ?? 0) > 0);
      if (withRecords.length === 0) break;
      const p = rng.pick(withRecords);
      const batches = [...recordBatches(p.records!)].filter((b) => !b.partial);
      const batch = rng.pick(batches);
      if (batch === undefined || batch.partial) break;
      const frame = Buffer.from(base.referencedResponse);
      const offset = p.records!.byteOffset - base.referencedResponse.byteOffset + batch.offset;
      const what = mutateBatch(rng, frame, offset, batch.size);
      return { answer: frame, store, honest: false, what: `partition ${p.partitionIndex} inline: ${what}` };
    }
    case 5: {
      // The inline records of a referencing partition, cut or extended: the list no longer fits.
      target.records = Buffer.concat([target.records ?? Buffer.alloc(0), rng.bytes(rng.range(1, 70))]);
      return { answer: reencoded(), store, honest: false, what: `${where}: bytes after its inline records` };
    }
    default:
      break;
  }
  const m = mutateFrame(rng, base.referencedResponse, 8);
  return { answer: m.bytes, store, honest: false, what: `frame: ${m.what}` };
}

/** What the leader side answers the follower's next request with (its inline requests honoured). */
async function leaderAnswer(marked: Buffer, stock: Buffer): Promise<Buffer> {
  const strip = new FetchStripFilter({
    index: await leaderIndex(walBatches(fixtures.objects), fixtures.objects),
    topicNames,
    maxHoldMs: 20,
    storeUrl: fixtures.manifest.storeUrl,
    log: createLogger('silent'),
  });
  const info = infoOf(marked);
  strip.onRequest(info, marked);
  return strip.onResponse(info, stock);
}

async function runCase(index: number): Promise<string[]> {
  const rng = Rng.forCase(FILE, index);
  const base = rng.pick(fixtures.fetch);
  const c = mutate(rng, base);
  const name = caseName(FILE, index, `${base.name}, ${c.what}`);
  const problems: string[] = [];
  const fill = followerFill(c.store);
  const info = infoOf(base.followerRequest);
  fill.onRequest(info, base.followerRequest);
  const sent = decodeFetch(c.answer, base.version);
  let out: Buffer;
  try {
    out = await fill.onResponse(info, c.answer);
  } catch (error) {
    return [`${name}: onResponse threw (the pipe would close the connection): ${(error as Error).stack}`];
  }
  if (sent === undefined) {
    // Not ours to judge: the follower's broker gets the answer as it came, as without walproxy.
    return out.equals(c.answer) ? [] : [`${name}: changed an answer the codec cannot read`];
  }
  const got = decodeFetch(out, base.version);
  if (got === undefined) return [`${name}: the follower got bytes it cannot read`];
  if (JSON.stringify(responseFields(got.body)) !== JSON.stringify(responseFields(sent.body))) {
    problems.push(`${name}: the response's fields changed`);
  }
  const stock = partitionsOf(decodeFetch(base.stockResponse, base.version)!.body);
  const gotPartitions = partitionsOf(got.body);
  for (const [i, s] of partitionsOf(sent.body).entries()) {
    const p = gotPartitions[i]?.partition;
    const at = `partition ${s.partition.partitionIndex}`;
    if (
      p === undefined ||
      JSON.stringify(partitionFields(p)) !== JSON.stringify(partitionFields(s.partition))
    ) {
      problems.push(`${name}: ${at} changed beyond its records`);
      continue;
    }
    const records = p.records ?? Buffer.alloc(0);
    const from = s.partition.records ?? Buffer.alloc(0);
    let segments: PartitionSegment[] | undefined;
    try {
      segments = segmentsOf(s.partition);
    } catch {
      segments = [];
    }
    if (p.taggedFields?.some((t) => t.tag === PARTITION_SEGMENTS_TAG))
      problems.push(`${name}: ${at} kept its segment list`);
    if (segments === undefined) {
      if (!records.equals(from)) problems.push(`${name}: ${at} without references changed its records`);
      continue;
    }
    // Every batch delivered is one the leader side sent inline or one the store holds as referenced.
    const delivered = recordBatchesOf(records);
    if (delivered === undefined) {
      problems.push(`${name}: ${at} got records that are not v2 batches`);
      continue;
    }
    for (const batch of delivered) {
      if (batch.partial) continue;
      const bytes = batch.bytes;
      if (from.indexOf(bytes) < 0 && !isStoredBatch(bytes, segments, fixtures.objects)) {
        problems.push(
          `${name}: ${at} got a batch at offset ${bytes.readBigInt64BE(0)} that is neither inline nor stored`,
        );
      }
    }
    if (c.honest && !isBatchPrefix(records, stock[i]!.partition.records ?? Buffer.alloc(0))) {
      problems.push(`${name}: ${at} is not the broker's batches up to one of them`);
    }
  }
  if (!c.honest || out.equals(base.stockResponse)) return problems;
  // The next fetch asks for what was missing inline, and gets the broker's answer whole.
  const nextInfo = infoOf(base.followerRequest);
  const marked = fill.onRequest(nextInfo, base.followerRequest);
  if (marked.action !== 'forward') return [...problems, `${name}: the next request was not forwarded`];
  const again = await fill.onResponse(nextInfo, await leaderAnswer(marked.frame, base.stockResponse));
  if (!again.equals(base.stockResponse))
    problems.push(`${name}: the fetch after a fallback did not get the broker's answer`);
  return problems;
}

/** The request as the codec reads it, without our tags (capability, prefetch hints); undefined for bytes it cannot read. */
function requestFields(frame: Buffer, version: number): string | undefined {
  try {
    const payload = frame.subarray(4);
    const header = decodeRequestHeader(payload);
    const request = decodeFetchRequest(payload.subarray(header.headerLength), version);
    const tags =
      request.taggedFields?.filter((t) => t.tag !== FETCH_CAPABILITY_TAG && t.tag !== PREFETCH_HINTS_TAG) ??
      [];
    return JSON.stringify(
      plainOf({ header, request: { ...request, taggedFields: tags.length ? tags : undefined } }),
    );
  } catch {
    return undefined;
  }
}

function plainOf(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (_k, v) =>
      typeof v === 'bigint' ? `${v}n` : v?.type === 'Buffer' ? Buffer.from(v.data).toString('hex') : v,
    ),
  );
}

/**
 * A follower's request mutated past its api key, version and correlation id (what the pipe reads
 * to route it): the filter never throws; a request the codec reads goes up marked and otherwise
 * unchanged; one it cannot read goes up as it came, and its answer comes back as it came.
 */
async function runRequestCase(index: number): Promise<string[]> {
  const rng = Rng.forCase(`${FILE}.request`, index);
  const base = rng.pick(fixtures.fetch);
  const m = mutateFrame(rng, base.followerRequest, 12);
  const name = caseName(`${FILE}.request`, index, `${base.name}, ${m.what}`);
  const fill = followerFill(storeOf(fixtures.objects));
  const info = infoOf(base.followerRequest);
  let forwarded: Buffer;
  try {
    const decision = fill.onRequest(info, m.bytes);
    if (decision.action !== 'forward') return [`${name}: not forwarded`];
    forwarded = decision.frame;
  } catch (error) {
    return [`${name}: onRequest threw (the pipe would close the connection): ${(error as Error).stack}`];
  }
  const read = requestFields(m.bytes, base.version);
  if (read === undefined) {
    if (!forwarded.equals(m.bytes)) return [`${name}: changed a request the codec cannot read`];
    const out = await fill.onResponse(info, base.stockResponse);
    return out.equals(base.stockResponse) ? [] : [`${name}: changed the answer to an unmarked request`];
  }
  if (requestFields(forwarded, base.version) !== read)
    return [`${name}: changed more than the capability tag`];
  return [];
}

/** The batches of records as the follower walks them, the last maybe partial; undefined for bytes it cannot walk. */
function recordBatchesOf(records: Buffer): Array<{ partial: boolean; bytes: Buffer }> | undefined {
  try {
    return [...recordBatches(records)].map((b) => ({
      partial: b.partial,
      bytes: b.partial ? b.bytes : b.bytes(),
    }));
  } catch {
    return undefined;
  }
}

describe('FetchFillFilter, fuzzed with mutations of captured answers with references', () => {
  it('delivers only inline batches and stored batches whose CRC and digest hold, passes on what it cannot read, and falls back inline when the store is wrong', async () => {
    const problems: string[] = [];
    for (const index of fuzzCases(CASES)) problems.push(...(await runCase(index)));
    expect(problems.slice(0, 20)).toEqual([]);
  });

  it('never throws on a mutated follower request: marks what it reads, forwards the rest as it came', async () => {
    const problems: string[] = [];
    for (const index of fuzzCases(CASES)) problems.push(...(await runRequestCase(index)));
    expect(problems.slice(0, 20)).toEqual([]);
  });
});
