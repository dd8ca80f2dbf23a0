// The sidecar's memory bound (issue 12, case 10): one limit — `--memory-limit-bytes`, by default
// the container's cgroup limit — split into the bounds of every cache and queue, so no load can
// grow the process past its container (an OOM kill is a dead sidecar, and a dead sidecar is a
// fenced broker). Explicit flags still win over the derived values.
//
// The split follows where the bytes live. V8's old space holds the JavaScript objects: the
// metadata queue and zone routing's memories; the rest of the heap share is the runtime's own heap and the garbage collector's
// headroom. ArrayBuffers live outside it (process.memoryUsage().arrayBuffers, not heapUsed): the
// batch index (fixed-size records in typed arrays, wal/batch-index.ts), the WAL writer's pending
// batches, the follower's read cache and the connections' write queues; the rest of the limit
// carries frames in flight (a Fetch response is buffered whole), TLS and the runtime's native
// memory. The heap share is what `--max-old-space-size` allows: counting the off-heap index in it
// (issue #24) let the heap grow into the memory the index and the frames in flight need.
import { readFileSync } from 'node:fs';

const MiB = 1024 * 1024;

/** Used when neither the flag nor a cgroup limit says how much memory the sidecar has. */
export const DEFAULT_MEMORY_LIMIT_BYTES = 512 * MiB;
/** Below this the derived bounds are too small to serve a broker; the flag refuses it. */
export const MIN_MEMORY_LIMIT_BYTES = 128 * MiB;

/**
 * Bytes of one batch index entry, in typed arrays off the V8 heap (the compact index: key, stable
 * header, digest, location; ~130 B plus its share of the hash heads).
 */
export const BATCH_INDEX_ENTRY_BYTES = 150;
/** Heap bytes of one queued WAL metadata piece (object key, topic, offsets, as JS values). */
export const METADATA_PIECE_BYTES = 300;
/**
 * Heap bytes of one entry zone routing remembers (zone/): a topic a leader accepted from a producer
 * (`identity NUL topic`, in a Set) or a client's client.rack (`address|client.id` → zone, in a
 * Map): a string key of ~100 characters, one-byte, its value and the table's slot; an estimate
 * with room for longer topic names and client ids, not a measurement.
 */
export const ZONE_ENTRY_BYTES = 256;
/**
 * Downstream connections the connection share is sized for: clients of this broker plus the
 * followers' replica fetchers. More connections than this can each still queue
 * `maxBufferedBytes` per direction, so size the limit for the clients you run (docs/deploy.md).
 */
export const EXPECTED_CONNECTIONS = 256;

/** V8's share of the limit in percent (integer, so the Helm chart's integer arithmetic agrees). */
const HEAP_PERCENT = 44;
/**
 * Half of V8's share, in percent of the limit: the old generation V8 lets fill before it starts
 * marking (`--initial-old-space-size`). A sidecar's JavaScript heap is small (20–30 MB live) while
 * its ArrayBuffers (frames in flight, objects uploading, the read cache) run to tens of MB, and
 * with V8's limits for so small a heap it marked the whole heap about once a second: 112–142
 * mark-compacts per sidecar in one bench arm against 38–50 scavenges, a fifth of the sidecar's
 * CPU (perf, docs/benchmarks.md, "Major GC"). Starting the old generation at half the heap share,
 * 6 per sidecar in the same arm, and 36 % less CPU per GB at saturation.
 */
const INITIAL_OLD_SPACE_PERCENT = 22;

/**
 * Fractions of the limit. `heap` is V8's old space, holding the `heap` parts below; the `offHeap`
 * parts and `offHeapRest` (frames in flight, TLS, native memory) are the rest of the limit.
 */
export const MEMORY_SHARES = {
  /** `--max-old-space-size` should be this share of the limit. */
  heap: HEAP_PERCENT / 100,
  // 6 %: at 512 MiB, 214,748 entries, ~43 s of batches at 5,000 batches/s — a follower further
  // behind than that gets those batches inline. At 12 % the index alone took the sidecar past
  // 256 MB in the soak (docs/benchmarks.md, "Memory soak").
  batchIndex: 0.06,
  metadataQueue: 0.04,
  /**
   * 1 %, split between zone-local produce's accepted topics and the client racks zone routing
   * remembers: 10,485 entries each at 512 MiB (10,000 each, the floor, below).
   */
  zone: 0.01,
  writerPending: 0.12,
  readCache: 0.12,
  connections: 0.12,
  /** Not bounded by any flag: frames in flight, TLS and the runtime's native memory. */
  offHeapRest: 0.14,
} as const;

/** Where each bounded part's bytes live: in V8's heap share, or outside it. */
export const MEMORY_PLACES = {
  heap: ['metadataQueue', 'zone'],
  offHeap: ['batchIndex', 'writerPending', 'readCache', 'connections'],
} as const satisfies Record<'heap' | 'offHeap', ReadonlyArray<keyof typeof MEMORY_SHARES>>;

/** The bounds the parts take, each within the limit's share for it. */
export interface MemoryBounds {
  limitBytes: number;
  /** Where the limit came from. */
  source: 'flag' | 'cgroup' | 'default';
  /** What V8's old space should be limited to (NODE_OPTIONS=--max-old-space-size=<MiB>). */
  heapBytes: number;
  /** What V8's old space should start at (node's command line: --initial-old-space-size=<MiB>). */
  initialOldSpaceBytes: number;
  /** WalBatchIndex maxEntries. */
  batchIndexEntries: number;
  /** WalMetadataPublisher maxQueued. */
  metadataQueuePieces: number;
  /** ZoneProduce maxAccepted: topics leaders accepted from producers, remembered (with --zone). */
  zoneAcceptances: number;
  /** RackMemory capacity: clients' client.rack, remembered (with --zone). */
  zoneClientRacks: number;
  /** WalWriter maxPendingBytes (`--wal-max-pending-bytes`). */
  writerPendingBytes: number;
  /** WalRangeReader maxCacheBytes. */
  readCacheBytes: number;
  /** Per connection and direction (`--max-buffered-bytes`). */
  maxBufferedBytes: number;
}

/** Explicit settings, each winning over its derived value. */
export interface MemoryOverrides {
  writerPendingBytes?: number | undefined;
  maxBufferedBytes?: number | undefined;
}

const LIMITS = {
  batchIndexEntries: { min: 10_000 },
  metadataQueuePieces: { min: 1_000 },
  // What zone/ remembered before it took a share: a small limit keeps at least that.
  zoneAcceptances: { min: 10_000 },
  zoneClientRacks: { min: 10_000 },
  writerPendingBytes: { min: MiB },
  readCacheBytes: { min: 0 },
  // --max-buffered-bytes accepts 16 KiB and up; more than 1 MiB per direction buys nothing on a
  // pod's loopback and costs memory per connection.
  maxBufferedBytes: { min: 16 * 1024, max: MiB },
} as const;

/** Splits `limitBytes` into the bounds of the parts; `overrides` (explicit flags) win. */
export function memoryBounds(
  limitBytes: number,
  source: MemoryBounds['source'],
  overrides: MemoryOverrides = {},
): MemoryBounds {
  const share = (fraction: number) => Math.floor(limitBytes * fraction);
  const perConnection = Math.floor(share(MEMORY_SHARES.connections) / (2 * EXPECTED_CONNECTIONS));
  const zoneEntries = Math.floor(share(MEMORY_SHARES.zone) / 2 / ZONE_ENTRY_BYTES);
  return {
    limitBytes,
    source,
    heapBytes: Math.floor((limitBytes * HEAP_PERCENT) / 100),
    initialOldSpaceBytes: Math.floor((limitBytes * INITIAL_OLD_SPACE_PERCENT) / 100),
    batchIndexEntries: Math.max(
      LIMITS.batchIndexEntries.min,
      Math.floor(share(MEMORY_SHARES.batchIndex) / BATCH_INDEX_ENTRY_BYTES),
    ),
    metadataQueuePieces: Math.max(
      LIMITS.metadataQueuePieces.min,
      Math.floor(share(MEMORY_SHARES.metadataQueue) / METADATA_PIECE_BYTES),
    ),
    zoneAcceptances: Math.max(LIMITS.zoneAcceptances.min, zoneEntries),
    zoneClientRacks: Math.max(LIMITS.zoneClientRacks.min, zoneEntries),
    writerPendingBytes:
      overrides.writerPendingBytes ??
      Math.max(LIMITS.writerPendingBytes.min, share(MEMORY_SHARES.writerPending)),
    readCacheBytes: Math.max(LIMITS.readCacheBytes.min, share(MEMORY_SHARES.readCache)),
    maxBufferedBytes:
      overrides.maxBufferedBytes ??
      Math.min(LIMITS.maxBufferedBytes.max, Math.max(LIMITS.maxBufferedBytes.min, perConnection)),
  };
}

/**
 * The V8 heap settings for node's command line that go with these bounds, as the Helm chart gives
 * them (`--max-old-space-size` can also go in NODE_OPTIONS; `--initial-old-space-size` cannot).
 */
export function nodeHeapFlags(bounds: Pick<MemoryBounds, 'heapBytes' | 'initialOldSpaceBytes'>): {
  maxOldSpace: string;
  initialOldSpace: string;
} {
  return {
    maxOldSpace: `--max-old-space-size=${Math.floor(bounds.heapBytes / MiB)}`,
    initialOldSpace: `--initial-old-space-size=${Math.floor(bounds.initialOldSpaceBytes / MiB)}`,
  };
}

/**
 * The MiB node was started with for a V8 size flag (`--initial-old-space-size`, also spelt with
 * underscores), from its command line; undefined when it was not given.
 */
export function nodeSizeFlagMiB(execArgv: readonly string[], flag: string): number | undefined {
  const names = new Set([flag, flag.replaceAll('-', '_').replace(/^__/, '--')]);
  let value: number | undefined;
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg : arg.slice(0, eq);
    if (!names.has(name)) continue;
    // The last one given wins, as for node.
    value = Number(eq < 0 ? execArgv[++i] : arg.slice(eq + 1));
  }
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : undefined;
}

/** Where the cgroup files are; injectable for tests. */
export interface CgroupFiles {
  /** cgroup v2: `max` or a byte count. */
  v2: string;
  /** cgroup v1: a byte count, a huge number (page-rounded 2^63) meaning no limit. */
  v1: string;
}

export const CGROUP_FILES: CgroupFiles = {
  v2: '/sys/fs/cgroup/memory.max',
  v1: '/sys/fs/cgroup/memory/memory.limit_in_bytes',
};

/** cgroup v1 writes "no limit" as 2^63 rounded down to a page; anything above 2^60 is that. */
const V1_UNLIMITED = 2 ** 60;

/**
 * The container's memory limit from its cgroup (v2 `memory.max`, else v1
 * `memory.limit_in_bytes`), or undefined when there is none ("max", absent, unreadable).
 */
export function cgroupMemoryLimit(files: CgroupFiles = CGROUP_FILES): number | undefined {
  for (const [file, unlimitedAbove] of [
    [files.v2, Number.POSITIVE_INFINITY],
    [files.v1, V1_UNLIMITED],
  ] as const) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').trim();
    } catch {
      continue;
    }
    if (text === 'max') return undefined;
    const bytes = Number(text);
    if (Number.isSafeInteger(bytes) && bytes > 0 && bytes < unlimitedAbove) return bytes;
    if (bytes >= unlimitedAbove) return undefined;
  }
  return undefined;
}

/** The limit to split: the flag, else the cgroup's, else DEFAULT_MEMORY_LIMIT_BYTES. */
export function resolveMemoryLimit(
  flag: number | undefined,
  files: CgroupFiles = CGROUP_FILES,
): { limitBytes: number; source: MemoryBounds['source'] } {
  if (flag !== undefined) return { limitBytes: flag, source: 'flag' };
  const cgroup = cgroupMemoryLimit(files);
  if (cgroup !== undefined) return { limitBytes: cgroup, source: 'cgroup' };
  return { limitBytes: DEFAULT_MEMORY_LIMIT_BYTES, source: 'default' };
}
