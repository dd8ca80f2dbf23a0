import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { makeBatch } from '../../shared/test/wal/batches.js';
import {
  BATCH_INDEX_ENTRY_BYTES,
  cgroupMemoryLimit,
  DEFAULT_MEMORY_LIMIT_BYTES,
  EXPECTED_CONNECTIONS,
  MEMORY_PLACES,
  MEMORY_SHARES,
  METADATA_PIECE_BYTES,
  memoryBounds,
  nodeHeapFlags,
  nodeSizeFlagMiB,
  resolveMemoryLimit,
  ZONE_ENTRY_BYTES,
} from '../src/memory-budget.js';
import { WalBatchIndex } from '../src/wal/batch-index.js';
import type { WalAppendTicket, WalLocation } from '../src/wal/index.js';

const MiB = 1024 * 1024;

describe('memoryBounds', () => {
  it('splits 512 MiB so that every accounted part fits in the place its bytes live', () => {
    const limit = 512 * MiB;
    const b = memoryBounds(limit, 'cgroup');
    // Each part within its share of the limit
    const bytes = {
      batchIndex: b.batchIndexEntries * BATCH_INDEX_ENTRY_BYTES,
      metadataQueue: b.metadataQueuePieces * METADATA_PIECE_BYTES,
      zone: (b.zoneAcceptances + b.zoneClientRacks) * ZONE_ENTRY_BYTES,
      writerPending: b.writerPendingBytes,
      readCache: b.readCacheBytes,
      connections: 2 * EXPECTED_CONNECTIONS * b.maxBufferedBytes,
    };
    for (const [part, n] of Object.entries(bytes)) {
      expect(n, part).toBeLessThanOrEqual(limit * MEMORY_SHARES[part as keyof typeof bytes]);
    }
    expect(b.writerPendingBytes).toBe(Math.floor(limit * MEMORY_SHARES.writerPending));
    expect(b.readCacheBytes).toBe(Math.floor(limit * MEMORY_SHARES.readCache));
    // The heap-resident parts take at most half of V8's heap (the rest is the runtime's and the
    // collector's); the off-heap parts and what no flag bounds (frames in flight, TLS, native
    // memory) fit in what the heap leaves of the limit
    const sum = (parts: readonly (keyof typeof bytes)[]) => parts.reduce((n, part) => n + bytes[part], 0);
    expect(sum(MEMORY_PLACES.heap)).toBeLessThan(b.heapBytes / 2);
    expect(sum(MEMORY_PLACES.offHeap) + limit * MEMORY_SHARES.offHeapRest).toBeLessThanOrEqual(
      limit - b.heapBytes,
    );
    // Figures an operator can check against the log line
    expect(b).toMatchObject({
      heapBytes: Math.floor(limit * 0.44),
      batchIndexEntries: 214_748,
      metadataQueuePieces: 71_582,
      maxBufferedBytes: 125_829,
    });
  });

  it("starts V8's old generation at half the heap share, and says so as node's flags", () => {
    // Given the default limit
    const b = memoryBounds(512 * MiB, 'cgroup');
    // Then the old generation starts at half of V8's share (what the Helm chart's arithmetic gives)
    expect(b.initialOldSpaceBytes).toBe(Math.floor((512 * MiB * 22) / 100));
    expect(b.initialOldSpaceBytes * 2).toBeLessThanOrEqual(b.heapBytes);
    expect(nodeHeapFlags(b)).toEqual({
      maxOldSpace: '--max-old-space-size=225',
      initialOldSpace: '--initial-old-space-size=112',
    });
  });

  it('reads a size node was started with from its command line, either spelling, the last one winning', () => {
    const flag = '--initial-old-space-size';
    expect(nodeSizeFlagMiB([], flag)).toBeUndefined();
    expect(nodeSizeFlagMiB(['--max-old-space-size=225'], flag)).toBeUndefined();
    expect(nodeSizeFlagMiB(['--initial-old-space-size=112'], flag)).toBe(112);
    expect(nodeSizeFlagMiB(['--initial_old_space_size=64'], flag)).toBe(64);
    expect(nodeSizeFlagMiB(['--initial-old-space-size', '96'], flag)).toBe(96);
    expect(nodeSizeFlagMiB(['--initial-old-space-size=112', '--initial-old-space-size=48'], flag)).toBe(48);
    // 0 is V8's "not set"
    expect(
      nodeSizeFlagMiB(['--initial-old-space-size=112', '--initial-old-space-size=0'], flag),
    ).toBeUndefined();
    expect(nodeSizeFlagMiB(['--initial-old-space-size=many'], flag)).toBeUndefined();
  });

  it('files the batch index off the V8 heap, where its typed arrays are (measured)', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const settled = () => {
      for (let i = 0; i < 3; i++) gc();
      return process.memoryUsage();
    };
    const entries = 40_000;
    const location = {
      objectKey: 'k',
      objectSize: 1_000_000,
      position: 0,
      length: 80,
      uploadedAtMs: 0,
    } as unknown as WalLocation;
    const stored = {
      durable: Promise.resolve(location),
      confirm: () => undefined,
      reject: () => undefined,
      group: 0,
      isPending: () => false,
    } satisfies WalAppendTicket;
    const before = settled();
    // Given a full index (every entry stored, so no ticket is held for it)
    const index = new WalBatchIndex({ maxEntries: entries });
    for (let i = 0; i < entries; i++) {
      index.add('t', i % 16, makeBatch({ records: Buffer.from(`record ${i}`) }), stored);
    }
    await new Promise((r) => setImmediate(r));
    const after = settled();
    const { allocatedBytes } = index.stats;
    expect(index.stats.entries).toBe(entries);
    // Then its bytes are ArrayBuffers, not V8 heap, and within BATCH_INDEX_ENTRY_BYTES an entry
    expect(after.arrayBuffers - before.arrayBuffers).toBeGreaterThanOrEqual(allocatedBytes);
    expect(after.heapUsed - before.heapUsed).toBeLessThan(allocatedBytes / 10);
    expect(allocatedBytes).toBeLessThanOrEqual(entries * BATCH_INDEX_ENTRY_BYTES);
    // And the budget counts them outside the heap share
    expect(MEMORY_PLACES.offHeap).toContain('batchIndex');
    expect(MEMORY_PLACES.heap).not.toContain('batchIndex');
  });

  it('scales with the limit, the per-connection buffer capped at 1 MiB', () => {
    const small = memoryBounds(256 * MiB, 'flag');
    const large = memoryBounds(8192 * MiB, 'flag');
    expect(large.batchIndexEntries).toBe(32 * small.batchIndexEntries + (large.batchIndexEntries % 32));
    expect(large.writerPendingBytes).toBeGreaterThan(small.writerPendingBytes * 31);
    expect(large.maxBufferedBytes).toBe(MiB);
    expect(small.maxBufferedBytes).toBeLessThan(MiB);
  });

  it("gives zone routing's memories a share of the heap, no smaller than they kept before", () => {
    // 1 % of the limit, half each for accepted topics and client racks, ZONE_ENTRY_BYTES apiece
    expect(memoryBounds(512 * MiB, 'flag')).toMatchObject({
      zoneAcceptances: 10_485,
      zoneClientRacks: 10_485,
    });
    expect(memoryBounds(2048 * MiB, 'flag')).toMatchObject({
      zoneAcceptances: 41_943,
      zoneClientRacks: 41_943,
    });
    // The 10,000 each that zone/ kept before it took a share, whatever the limit
    expect(memoryBounds(128 * MiB, 'flag')).toMatchObject({
      zoneAcceptances: 10_000,
      zoneClientRacks: 10_000,
    });
  });

  it('keeps every bound at a working minimum for a tiny limit', () => {
    const b = memoryBounds(4 * MiB, 'flag');
    expect(b.batchIndexEntries).toBe(10_000);
    expect(b.metadataQueuePieces).toBe(1_000);
    expect(b.writerPendingBytes).toBe(MiB);
    expect(b.maxBufferedBytes).toBe(16 * 1024);
  });

  it('lets explicit flags win over the derived values', () => {
    const b = memoryBounds(512 * MiB, 'default', { writerPendingBytes: 8 * MiB, maxBufferedBytes: 65_536 });
    expect(b.writerPendingBytes).toBe(8 * MiB);
    expect(b.maxBufferedBytes).toBe(65_536);
    expect(b.readCacheBytes).toBe(memoryBounds(512 * MiB, 'default').readCacheBytes);
  });
});

describe('the memory limit', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });
  function cgroup(v2?: string, v1?: string) {
    dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-cgroup-'));
    const files = { v2: path.join(dir, 'memory.max'), v1: path.join(dir, 'memory.limit_in_bytes') };
    if (v2 !== undefined) writeFileSync(files.v2, `${v2}\n`);
    if (v1 !== undefined) writeFileSync(files.v1, `${v1}\n`);
    return files;
  }

  it('reads cgroup v2 memory.max', () => {
    expect(cgroupMemoryLimit(cgroup('536870912'))).toBe(512 * MiB);
  });

  it('treats "max" (v2) and the page-rounded 2^63 (v1) as no limit', () => {
    expect(cgroupMemoryLimit(cgroup('max'))).toBeUndefined();
    expect(cgroupMemoryLimit(cgroup(undefined, '9223372036854771712'))).toBeUndefined();
  });

  it('falls back to cgroup v1 memory.limit_in_bytes when there is no v2 file', () => {
    expect(cgroupMemoryLimit(cgroup(undefined, '1073741824'))).toBe(1024 * MiB);
  });

  it('is the flag, else the cgroup limit, else the documented default', () => {
    expect(resolveMemoryLimit(300 * MiB, cgroup('536870912'))).toEqual({
      limitBytes: 300 * MiB,
      source: 'flag',
    });
    expect(resolveMemoryLimit(undefined, cgroup('536870912'))).toEqual({
      limitBytes: 512 * MiB,
      source: 'cgroup',
    });
    expect(resolveMemoryLimit(undefined, cgroup())).toEqual({
      limitBytes: DEFAULT_MEMORY_LIMIT_BYTES,
      source: 'default',
    });
  });
});
