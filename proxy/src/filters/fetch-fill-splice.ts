// The follower side's output frame (fetch-fill.ts): the broker's Fetch response with each filled
// partition's records replaced by its rebuilt pieces and every walproxy tag removed (segment
// lists, the trace context, prefetch hints), so the follower's broker gets a stock response. Spliced in place
// where the decoded views say where the fields lie, re-encoded through the codec otherwise.
import {
  encodeFetchResponse,
  encodeFrame,
  type FetchResponse,
  type FetchResponsePartition,
  PARTITION_SEGMENTS_TAG,
  PREFETCH_HINTS_TAG,
  type RawTaggedField,
  Reader,
  WAL_TRACE_TAG,
  Writer,
} from '@walproxy/shared';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import { type Rebuilt, writePieces } from './fetch-fill-rebuild.js';

function uvarintBytes(value: number): Buffer {
  const w = new Writer(undefined, 5);
  w.uvarint(value, 'uvarint');
  return w.finish();
}

/** One rebuilt partition, for the output. */
export interface Edit {
  readonly partition: FetchResponsePartition;
  readonly tag: RawTaggedField;
  readonly rebuilt: Rebuilt;
}

/** Where the response's top-level walproxy tags (trace context, prefetch hints) lie in the frame, to be cut out. */
interface TopCut {
  /** The top-level tag count, the first tag after it. */
  readonly countAt: number;
  readonly firstTagAt: number;
  /** Our tags' bytes, headers included: the section's last tags, one run. */
  readonly tagAt: number;
  readonly tagEnd: number;
  readonly newCount: Buffer;
}

function tagHeaderOf(field: RawTaggedField): Buffer {
  return Buffer.concat([uvarintBytes(field.tag), uvarintBytes(field.data.length)]);
}

/**
 * Where our tags (ascending, as found in the response) lie in its top-level tag section, whose
 * last tags they must be (their numbers are above any of Kafka's) and which ends the frame;
 * undefined when the decoded views do not say it (a NodeEndpoints tag, decoded rather than kept
 * raw, hides where the section starts, or a tag above ours): the caller then re-encodes.
 */
function topCutOf(
  frame: Buffer,
  response: FetchResponse,
  ours: readonly RawTaggedField[],
): TopCut | undefined {
  const raw = response.taggedFields ?? [];
  if (response.nodeEndpoints !== undefined || raw.some((t) => t.data.buffer !== frame.buffer))
    return undefined;
  const k = ours.length;
  if (k === 0 || raw.length < k || ours.some((t, j) => raw[raw.length - k + j] !== t)) return undefined;
  const at = (t: RawTaggedField) => t.data.byteOffset - frame.byteOffset;
  const first = raw[0]!;
  const last = raw.at(-1)!;
  const firstTagAt = at(first) - tagHeaderOf(first).length;
  const count = uvarintBytes(raw.length);
  const countAt = firstTagAt - count.length;
  const firstOurs = ours[0]!;
  const oursHeader = tagHeaderOf(firstOurs);
  const tagAt = at(firstOurs) - oursHeader.length;
  if (
    countAt < 0 ||
    at(last) + last.data.length !== frame.length ||
    !frame.subarray(countAt, firstTagAt).equals(count) ||
    !frame.subarray(tagAt, at(firstOurs)).equals(oursHeader)
  )
    return undefined;
  return {
    countAt,
    firstTagAt,
    tagAt,
    tagEnd: at(last) + last.data.length,
    newCount: uvarintBytes(raw.length - k),
  };
}

/**
 * The response frame with each edited partition's records replaced by its pieces and its segment
 * list dropped (and our top-level tags, `top`), written into one buffer: every other byte is copied
 * from the broker's frame as it is, and each filled byte is copied once, from the object cache to
 * the output. Undefined when a partition's fields are not where the decoded views say (null
 * records, say): the caller then re-encodes.
 */
function splice(frame: Buffer, edits: readonly Edit[], top?: TopCut): Buffer | undefined {
  const cuts: {
    edit: Edit;
    /** Where the records' length varint starts, and the first tag after the tag count. */
    lengthAt: number;
    firstTagAt: number;
    /** Our tag's bytes, header included. */
    tagAt: number;
    tagEnd: number;
    newLength: Buffer;
    newCount: Buffer;
  }[] = [];
  for (const edit of edits) {
    const { records } = edit.partition;
    const data = edit.tag.data;
    if (records === null || records.buffer !== frame.buffer || data.buffer !== frame.buffer) return undefined;
    const recordsAt = records.byteOffset - frame.byteOffset;
    const oldLength = uvarintBytes(records.length + 1);
    const lengthAt = recordsAt - oldLength.length;
    if (lengthAt < 0 || !frame.subarray(lengthAt, recordsAt).equals(oldLength)) return undefined;
    const tags = new Reader(frame, undefined, recordsAt + records.length);
    let count: number;
    try {
      count = tags.uvarint('TaggedFields');
    } catch {
      return undefined;
    }
    const dataAt = data.byteOffset - frame.byteOffset;
    const tagHeader = Buffer.concat([uvarintBytes(PARTITION_SEGMENTS_TAG), uvarintBytes(data.length)]);
    const tagAt = dataAt - tagHeader.length;
    if (count < 1 || tagAt < tags.offset || !frame.subarray(tagAt, dataAt).equals(tagHeader))
      return undefined;
    cuts.push({
      edit,
      lengthAt,
      firstTagAt: tags.offset,
      tagAt,
      tagEnd: dataAt + data.length,
      newLength: uvarintBytes(edit.rebuilt.length + 1),
      newCount: uvarintBytes(count - 1),
    });
  }
  cuts.sort((a, b) => a.lengthAt - b.lengthAt);
  let size = frame.length;
  let cursor = 0;
  for (const c of cuts) {
    if (c.lengthAt < cursor) return undefined;
    size += c.newLength.length + c.edit.rebuilt.length + c.newCount.length;
    size -= c.firstTagAt - c.lengthAt + (c.tagEnd - c.tagAt);
    cursor = c.tagEnd;
  }
  if (top !== undefined) {
    if (top.countAt < cursor) return undefined;
    size += top.newCount.length - (top.firstTagAt - top.countAt) - (top.tagEnd - top.tagAt);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  cursor = 0;
  for (const c of cuts) {
    at += frame.copy(out, at, cursor, c.lengthAt);
    at += c.newLength.copy(out, at);
    at = writePieces(out, at, c.edit.rebuilt.pieces);
    at += c.newCount.copy(out, at);
    at += frame.copy(out, at, c.firstTagAt, c.tagAt);
    cursor = c.tagEnd;
  }
  if (top !== undefined) {
    at += frame.copy(out, at, cursor, top.countAt);
    at += top.newCount.copy(out, at);
    at += frame.copy(out, at, top.firstTagAt, top.tagAt);
    cursor = top.tagEnd;
  }
  frame.copy(out, at, cursor);
  out.writeInt32BE(size - FRAME_SIZE_PREFIX_BYTES, 0);
  return out;
}

/**
 * The output frame: spliced where the views allow it, re-encoded otherwise, without any walproxy
 * tag (segment lists, the trace context, prefetch hints) — the follower's broker gets a stock response.
 */
export function rebuildFrame(
  frame: Buffer,
  headerLength: number,
  response: FetchResponse,
  edits: readonly Edit[],
  version: number,
  trace: RawTaggedField | undefined,
  hints?: RawTaggedField | undefined,
): Buffer {
  // Ascending, as the section holds them (WAL_TRACE_TAG < PREFETCH_HINTS_TAG).
  const ours = [trace, hints].filter((t): t is RawTaggedField => t !== undefined);
  const top = ours.length === 0 ? undefined : topCutOf(frame, response, ours);
  const spliced = ours.length === 0 || top !== undefined ? splice(frame, edits, top) : undefined;
  return spliced ?? reencode(frame, headerLength, response, edits, version);
}

/** The same response through the codec: for frames splice cannot edit in place. */
function reencode(
  frame: Buffer,
  headerLength: number,
  response: FetchResponse,
  edits: readonly Edit[],
  version: number,
): Buffer {
  for (const { partition, rebuilt } of edits) {
    const records = Buffer.allocUnsafe(rebuilt.length);
    writePieces(records, 0, rebuilt.pieces);
    // Since 4.0 brokers write empty records, never null, for librdkafka's sake
    // (docs/kafka-protocol.md, "Fetch responses").
    partition.records = records;
    const rest = partition.taggedFields?.filter((f) => f.tag !== PARTITION_SEGMENTS_TAG) ?? [];
    partition.taggedFields = rest.length === 0 ? undefined : rest;
  }
  const rest =
    response.taggedFields?.filter((f) => f.tag !== WAL_TRACE_TAG && f.tag !== PREFETCH_HINTS_TAG) ?? [];
  response.taggedFields = rest.length === 0 ? undefined : rest;
  const header = frame.subarray(FRAME_SIZE_PREFIX_BYTES, FRAME_SIZE_PREFIX_BYTES + headerLength);
  return encodeFrame(header, encodeFetchResponse(response, version));
}
