import { describe, expect, it } from 'vitest';
import { walPublishingIdle } from './cluster-info.js';
import type { SidecarCounters } from './kafka-cluster.js';

/** A sidecar's counters with only what walPublishingIdle reads. */
function counters(brokerId: number, pendingBytes: number, queued: number, inFlight: number): SidecarCounters {
  return {
    brokerId,
    listeners: {},
    wal: { produce: {}, writer: { pendingBytes }, metadata: { queued, inFlight } },
  };
}

/** A counter source that answers each sidecar from its script of states, the last one repeated. */
function scripted(states: Record<number, [number, number, number][]>) {
  const reads: Record<number, number> = {};
  return {
    reads,
    sidecarCounters: async (id: number) => {
      const script = states[id]!;
      const n = reads[id] ?? 0;
      reads[id] = n + 1;
      const [pending, queued, inFlight] = script[Math.min(n, script.length - 1)]!;
      return counters(id, pending, queued, inFlight);
    },
  };
}

describe('walPublishingIdle', () => {
  it('waits while a writer holds unstored bytes or a publisher has records queued or in flight', async () => {
    const source = scripted({
      1: [
        [4096, 0, 0],
        [0, 3, 0],
        [0, 0, 3],
        [0, 0, 0],
      ],
      2: [[0, 0, 0]],
      3: [[0, 0, 0]],
    });
    await walPublishingIdle(source, { timeoutMs: 10_000 });
    expect(source.reads[1]).toBe(4);
  });

  it('returns at once for sidecars without a WAL', async () => {
    const source = {
      sidecarCounters: async (id: number): Promise<SidecarCounters> => ({ brokerId: id, listeners: {} }),
    };
    await expect(walPublishingIdle(source, { timeoutMs: 0 })).resolves.toBeUndefined();
  });

  it('names the busy sidecar when it stays busy past the timeout', async () => {
    const source = scripted({ 1: [[0, 0, 0]], 2: [[0, 5, 1]], 3: [[0, 0, 0]] });
    await expect(walPublishingIdle(source, { timeoutMs: 300 })).rejects.toThrow(/sidecar 2 pendingBytes 0/);
  });
});
