// Reading WAL objects for the operator tools: the footer index by range reads (ls, inspect), and
// a mapping from store listings to key creation times.
import {
  parseFooter,
  readHeader,
  readTrailer,
  WAL_HEADER_SIZE,
  type WalHeader,
  type WalIndexEntry,
  type WalTrailer,
} from '@walproxy/shared';
import type { ObjectInfo, ObjectStore } from '../store/index.js';
import { parseWalObjectKey } from '../wal/object-key.js';

/** A suffix this long usually holds trailer and footer together (a 400 KB object has ~1 KB of footer). */
const TAIL_BYTES = 64 * 1024;

export interface WalObjectIndex {
  header: WalHeader;
  trailer: WalTrailer;
  entries: WalIndexEntry[];
}

/** Header, trailer and footer of one object by two or three range reads, all checked. */
export async function readObjectIndex(
  store: ObjectStore,
  key: string,
  size: number,
): Promise<WalObjectIndex> {
  const headLength = Math.min(size, WAL_HEADER_SIZE);
  const tailLength = Math.min(size, TAIL_BYTES);
  const [head, tail] = await Promise.all([
    headLength > 0 ? store.get(key, { offset: 0, length: headLength }) : Buffer.alloc(0),
    tailLength > 0 ? store.get(key, { offset: size - tailLength, length: tailLength }) : Buffer.alloc(0),
  ]);
  const header = readHeader(head);
  const trailer = readTrailer(tail, size);
  const tailStart = size - tailLength;
  const footer =
    trailer.footerPosition >= tailStart
      ? tail.subarray(
          trailer.footerPosition - tailStart,
          trailer.footerPosition - tailStart + trailer.footerLength,
        )
      : await store.get(key, { offset: trailer.footerPosition, length: trailer.footerLength });
  return { header, trailer, entries: parseFooter(footer, trailer) };
}

export interface ListedWalObject extends ObjectInfo {
  /** From the key (docs/wal-writer.md "Object keys"); equals the header's creation time. */
  createdAtMs: number;
  brokerId: number;
}

/**
 * WAL objects under `prefix`, sorted by creation time, optionally within [sinceMs, untilMs).
 * Keys that are not WAL object keys (probes, foreign files) are counted in `foreign`, never returned.
 */
export async function listWalObjects(
  store: ObjectStore,
  prefix: string,
  filter: { sinceMs?: number; untilMs?: number } = {},
  onListed?: (count: number) => void,
): Promise<{ objects: ListedWalObject[]; foreign: string[] }> {
  const objects: ListedWalObject[] = [];
  const foreign: string[] = [];
  let count = 0;
  for await (const info of store.list(prefix)) {
    onListed?.(++count);
    const parts = parseWalObjectKey(info.key);
    if (parts === undefined) {
      foreign.push(info.key);
      continue;
    }
    if (filter.sinceMs !== undefined && parts.createdAtMs < filter.sinceMs) continue;
    if (filter.untilMs !== undefined && parts.createdAtMs >= filter.untilMs) continue;
    objects.push({ ...info, createdAtMs: parts.createdAtMs, brokerId: parts.brokerId });
  }
  objects.sort((a, b) => a.createdAtMs - b.createdAtMs || (a.key < b.key ? -1 : 1));
  return { objects, foreign };
}

/** Runs `fn` over `items` with at most `limit` at once, keeping the results in order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** `topic[0,1,5]` groups of an object's partitions, topics sorted. */
export function describePartitions(entries: readonly WalIndexEntry[]): string {
  const byTopic = new Map<string, Set<number>>();
  for (const e of entries) {
    const name = e.topicName !== '' ? e.topicName : `id:${e.topicId}`;
    let set = byTopic.get(name);
    if (!set) {
      set = new Set();
      byTopic.set(name, set);
    }
    set.add(e.partition);
  }
  return [...byTopic.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([t, ps]) => `${t}[${[...ps].sort((a, b) => a - b).join(',')}]`)
    .join(' ');
}
