/**
 * The last `capacity` distinct object keys a reader fetched, so that `objectsRead` counts objects
 * and not re-reads (issue #16's "one GET per object per follower"). Kept as 30-bit hashes in a ring
 * and a Set of small integers, not as the keys: a Set of 65,536 key strings held ~13.5 MB of heap
 * and took the soak's first 45 minutes to fill (issue #24's hour soak: the heap's floor climbed
 * ~0.2 MB/min until it was full), once per store reader, outside every memory bound. This costs
 * ~1.5 MB at 65,536. Two keys of one hash count as one object: with 65,536 keys remembered about
 * two such pairs in 2^30, an undercount of the statistic, never a wrong read.
 */
export class RecentKeys {
  readonly #ring: Uint32Array;
  readonly #present = new Set<number>();
  #next = 0;
  #size = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`capacity ${capacity}: a positive integer`);
    this.#ring = new Uint32Array(capacity);
  }

  get size(): number {
    return this.#size;
  }

  /** Remembers `key`, forgetting the oldest beyond capacity; true when it was not remembered yet. */
  add(key: string): boolean {
    const hash = hash30(key);
    if (this.#present.has(hash)) return false;
    if (this.#size === this.capacity) this.#present.delete(this.#ring[this.#next]!);
    else this.#size++;
    this.#ring[this.#next] = hash;
    this.#next = (this.#next + 1) % this.capacity;
    this.#present.add(hash);
    return true;
  }
}

/** FNV-1a over the key's UTF-16 code units, folded to 30 bits: always a V8 small integer. */
function hash30(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash ^ (hash >>> 30)) & 0x3fffffff;
}
