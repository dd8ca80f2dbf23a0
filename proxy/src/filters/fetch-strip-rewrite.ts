// The leader side's answer (fetch-strip.ts): each planned partition's batches become its segment
// list — references to the stored ones, inline runs for the rest — in the partition's tag, with
// the inline bytes left in Records, and the response is encoded again. Batches held for an upload
// that did not end in time go inline here.
import { channel } from 'node:diagnostics_channel';
import {
  encodeFetchResponse,
  encodeFrame,
  encodePartitionSegments,
  encodeWalTrace,
  type FetchResponse,
  type FetchResponsePartition,
  PARTITION_SEGMENTS_TAG,
  type PartitionSegment,
  PREFETCH_HINTS_TAG,
  type RawTaggedField,
  RecordBatch,
  type SegmentsVersion,
  WAL_TRACE_TAG,
} from '@walproxy/shared';
import type { Logger } from '../log.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { WalLocation } from '../wal/wal-writer.js';
import {
  FETCH_STRIP_CHANNELS,
  type FetchStripEvent,
  type FetchStripStats,
  type FetchTraceContextEvent,
} from './fetch-strip-events.js';

const traceContext = channel(FETCH_STRIP_CHANNELS.traceContext);

export interface PlannedBatch {
  bytes: Buffer;
  header: Buffer;
  /** Whether the WAL holds (or is uploading) exactly this batch. */
  inWal: boolean;
  /** For a batch in the WAL: the SHA-256 of its records the index proved it by. */
  digest?: Buffer;
  /** Where, once stored; set when an upload the response waited for ends in time. */
  location?: WalLocation;
}

/** A partition with at least one WAL batch: its batches in order, each referenced or inline. */
export interface Plan {
  partition: FetchResponsePartition;
  batches: PlannedBatch[];
}

/** What the answer needs of the filter. */
export interface RewriteContext {
  stats: FetchStripStats;
  /** The store this sidecar writes to (--wal-store-url): references name it for the follower. */
  storeUrl: string;
  log: Logger;
  /**
   * The prefetch hints tag for this response, given the objects it references (fetch-strip.ts);
   * absent when the follower side did not ask for hints.
   */
  hints?: ((referenced: ReadonlySet<string>) => RawTaggedField | undefined) | undefined;
}

export function rewriteResponse(
  ctx: RewriteContext,
  frame: Buffer,
  version: number,
  segmentsVersion: SegmentsVersion,
  headerLength: number,
  response: FetchResponse,
  plans: Plan[],
  tally: FetchStripEvent,
): Buffer {
  let referenced = 0;
  const objectKeys = new Set<string>();
  for (const { partition, batches } of plans) {
    const segments: PartitionSegment[] = [];
    const inline: Buffer[] = [];
    for (const b of batches) {
      const location = b.location;
      if (location) {
        // The follower side rebuilds the stored header from the object's copy plus the two
        // fields the broker assigned, and proves the records by the digest the index proved
        // them by (wal-references.ts; a version-2 follower side gets no digest).
        const header = new RecordBatch(b.header, 0, b.header.length);
        segments.push({
          kind: 'reference',
          baseOffset: header.baseOffset,
          partitionLeaderEpoch: header.partitionLeaderEpoch,
          crc: header.crc,
          ...(b.digest !== undefined ? { digest: b.digest } : {}),
          store: location.store ?? ctx.storeUrl,
          objectKey: location.objectKey,
          position: location.position,
          length: location.length,
        });
        referenced++;
        objectKeys.add(location.objectKey);
        ctx.stats.referencesSent++;
        ctx.stats.bytesReferenced += b.bytes.length;
        tally.bytesReferenced += b.bytes.length;
        continue;
      }
      if (b.inWal) {
        // Counted here: the other inline batches were counted when the response was planned.
        ctx.stats.inline.notStoredInTime++;
        ctx.stats.inlineBytes += b.bytes.length;
        ctx.stats.inlineBytesByReason.notStoredInTime += b.bytes.length;
        tally.inlineBytes.notStoredInTime += b.bytes.length;
      }
      const last = segments.at(-1);
      if (last?.kind === 'inline') last.length += b.bytes.length;
      else segments.push({ kind: 'inline', length: b.bytes.length });
      inline.push(b.bytes);
    }
    partition.records = Buffer.concat(inline);
    const tags = (partition.taggedFields ?? []).filter((t) => t.tag !== PARTITION_SEGMENTS_TAG);
    tags.push({ tag: PARTITION_SEGMENTS_TAG, data: encodePartitionSegments(segments, segmentsVersion) });
    partition.taggedFields = tags.sort((a, b) => a.tag - b.tag);
  }
  tally.references = referenced;
  tally.objectKeys = [...objectKeys];
  // Everything ended up inline (every held batch missed the hold): the broker's bytes as they were.
  if (referenced === 0) return frame;
  ctx.stats.responsesRewritten++;
  carryTraceContext(ctx.log, response, tally.objectKeys);
  const hints = ctx.hints?.(objectKeys);
  if (hints !== undefined) {
    // KIP-482: tags ascending, each at most once.
    response.taggedFields = [
      ...(response.taggedFields ?? []).filter((t) => t.tag !== PREFETCH_HINTS_TAG),
      hints,
    ].sort((a, b) => a.tag - b.tag);
  }
  const body = encodeFetchResponse(response, version);
  return encodeFrame(frame.subarray(FRAME_SIZE_PREFIX_BYTES, FRAME_SIZE_PREFIX_BYTES + headerLength), body);
}

/**
 * Adds WAL_TRACE_TAG with the sampled upload spans of the referenced objects, when tracing
 * listens and knows one: no byte is added otherwise (wal-trace.ts).
 */
function carryTraceContext(log: Logger, response: FetchResponse, objectKeys: readonly string[]): void {
  if (!traceContext.hasSubscribers) return;
  const ask: FetchTraceContextEvent = { objectKeys, uploads: [] };
  traceContext.publish(ask);
  if (ask.uploads.length === 0) return;
  let data: Buffer;
  try {
    data = encodeWalTrace(ask.uploads);
  } catch (error) {
    // Tracing is best effort: a bad context costs the link, never the response.
    log.debug({ error: (error as Error).message }, 'trace context not carried');
    return;
  }
  // KIP-482: tags ascending, each at most once.
  response.taggedFields = [
    ...(response.taggedFields ?? []).filter((t) => t.tag !== WAL_TRACE_TAG),
    { tag: WAL_TRACE_TAG, data },
  ].sort((a, b) => a.tag - b.tag);
}
