// `walproxy wal gc`: which objects are old enough to delete, by the creation time in their keys.
import type { ObjectStore } from '../store/index.js';
import type { ListedWalObject } from './wal-index.js';

/** Objects created strictly before `nowMs - olderThanMs`; keys that are not WAL keys never qualify. */
export function selectForGc(
  objects: readonly ListedWalObject[],
  olderThanMs: number,
  nowMs: number,
): ListedWalObject[] {
  const cutoff = nowMs - olderThanMs;
  return objects.filter((o) => o.createdAtMs < cutoff);
}

/** Deletes in requests of at most 1,000 keys (S3's DeleteObjects limit). */
export async function deleteObjects(
  store: ObjectStore,
  keys: readonly string[],
  onProgress?: (deleted: number) => void,
): Promise<void> {
  for (let i = 0; i < keys.length; i += 1000) {
    const chunk = keys.slice(i, i + 1000);
    await store.delete(chunk);
    onProgress?.(i + chunk.length);
  }
}
