import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BATCH_INDEX_ENTRY_BYTES,
  cgroupMemoryLimit,
  DEFAULT_MEMORY_LIMIT_BYTES,
  EXPECTED_CONNECTIONS,
  MEMORY_SHARES,
  METADATA_PIECE_BYTES,
  memoryBounds,
  resolveMemoryLimit,
} from '../src/memory-budget.js';

const MiB = 1024 * 1024;

describe('memoryBounds', () => {
  it('splits 512 MiB so that every accounted part fits, with the heap half holding the index and queue', () => {
    const b = memoryBounds(512 * MiB, 'cgroup');
    // Each part within its share of the limit
    expect(b.batchIndexEntries * BATCH_INDEX_ENTRY_BYTES).toBeLessThanOrEqual(
      512 * MiB * MEMORY_SHARES.batchIndex,
    );
    expect(b.metadataQueuePieces * METADATA_PIECE_BYTES).toBeLessThanOrEqual(
      512 * MiB * MEMORY_SHARES.metadataQueue,
    );
    expect(b.writerPendingBytes).toBe(Math.floor(512 * MiB * MEMORY_SHARES.writerPending));
    expect(b.readCacheBytes).toBe(Math.floor(512 * MiB * MEMORY_SHARES.readCache));
    expect(2 * EXPECTED_CONNECTIONS * b.maxBufferedBytes).toBeLessThanOrEqual(
      512 * MiB * MEMORY_SHARES.connections,
    );
    // The heap-resident parts fit in the heap share; the off-heap ones in the other half
    expect(b.heapBytes).toBe(256 * MiB);
    expect(
      b.batchIndexEntries * BATCH_INDEX_ENTRY_BYTES + b.metadataQueuePieces * METADATA_PIECE_BYTES,
    ).toBeLessThan(b.heapBytes / 2);
    expect(
      b.writerPendingBytes + b.readCacheBytes + 2 * EXPECTED_CONNECTIONS * b.maxBufferedBytes,
    ).toBeLessThan(512 * MiB - b.heapBytes);
    // Figures an operator can check against the log line
    expect(b).toMatchObject({
      batchIndexEntries: 214_748,
      metadataQueuePieces: 71_582,
      maxBufferedBytes: 125_829,
    });
  });

  it('scales with the limit, the per-connection buffer capped at 1 MiB', () => {
    const small = memoryBounds(256 * MiB, 'flag');
    const large = memoryBounds(8192 * MiB, 'flag');
    expect(large.batchIndexEntries).toBe(32 * small.batchIndexEntries + (large.batchIndexEntries % 32));
    expect(large.writerPendingBytes).toBeGreaterThan(small.writerPendingBytes * 31);
    expect(large.maxBufferedBytes).toBe(MiB);
    expect(small.maxBufferedBytes).toBeLessThan(MiB);
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
