import { CompressionTypes } from 'kafkajs';
import { describe, expect, inject, it } from 'vitest';
import { consumeValues, createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';
import { compareReplicas } from '../src/wal/inspect.js';

type Inline = { control: number; rewrittenByBroker: number; notInWal: number };
async function stripTotals(
  cluster: ReturnType<typeof inject<'cluster'>>,
): Promise<{ references: number; inline: Inline }> {
  const all = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));
  const totals = { references: 0, inline: { control: 0, rewrittenByBroker: 0, notInWal: 0 } };
  for (const c of all) {
    const strip = c.wal?.fetchStrip as { referencesSent: number; inline: Inline } | undefined;
    if (!strip) continue;
    totals.references += strip.referencesSent;
    totals.inline.control += strip.inline.control;
    totals.inline.rewrittenByBroker += strip.inline.rewrittenByBroker;
    totals.inline.notInWal += strip.inline.notInWal;
  }
  return totals;
}

describe('mixed traffic through WAL replication', () => {
  it('transactions, compaction, LogAppendTime and broker recompression: byte-identical replicas, fallbacks counted by reason', async () => {
    const cluster = inject('cluster');
    const kafka = kafkaClient(cluster.bootstrap);
    const before = await stripTotals(cluster);
    await createTopic(cluster.bootstrap, 'wal-mixed-tx', { partitions: 2 });
    await createTopic(cluster.bootstrap, 'wal-mixed-compacted', {
      partitions: 2,
      configs: { 'cleanup.policy': 'compact' },
    });
    await createTopic(cluster.bootstrap, 'wal-mixed-logappend', {
      partitions: 2,
      configs: { 'message.timestamp.type': 'LogAppendTime' },
    });
    await createTopic(cluster.bootstrap, 'wal-mixed-gzip', {
      partitions: 2,
      configs: { 'compression.type': 'gzip' },
    });

    // Given a transactional producer that commits, aborts and commits again
    const tx = kafka.producer({ transactionalId: 'wal-mixed-tx', idempotent: true, maxInFlightRequests: 1 });
    await tx.connect();
    for (const outcome of ['commit', 'abort', 'commit'] as const) {
      const t = await tx.transaction();
      await t.send({
        topic: 'wal-mixed-tx',
        messages: Array.from({ length: 100 }, (_, i) => ({ key: `k${i}`, value: `${outcome}-${i}` })),
      });
      if (outcome === 'commit') await t.commit();
      else await t.abort();
    }
    await tx.disconnect();
    // And an idempotent producer writing uncompressed batches to the other three topics
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    for (const topic of ['wal-mixed-compacted', 'wal-mixed-logappend', 'wal-mixed-gzip']) {
      for (let s = 0; s < 10; s++) {
        await producer.send({
          topic,
          acks: -1,
          compression: CompressionTypes.None,
          messages: Array.from({ length: 100 }, (_, i) => ({
            key: `key-${i % 20}`,
            value: `${topic}-${s}-${i}`,
          })),
        });
      }
    }
    await producer.disconnect();

    // Then every replica of every topic is byte-identical to its leader
    for (const topic of ['wal-mixed-tx', 'wal-mixed-compacted', 'wal-mixed-logappend', 'wal-mixed-gzip']) {
      expect(await compareReplicas(cluster.dataDirs, topic, 2), topic).toEqual([]);
    }
    // And consumers read what they should (read_committed: the 200 committed records)
    const committed = await consumeValues(cluster.bootstrap, 'wal-mixed-tx', 200);
    expect(committed.length).toBe(200);
    expect(committed.every((v) => v.startsWith('commit-'))).toBe(true);
    for (const topic of ['wal-mixed-compacted', 'wal-mixed-logappend', 'wal-mixed-gzip']) {
      expect((await consumeValues(cluster.bootstrap, topic, 1_000)).length, topic).toBe(1_000);
    }
    // And the leader sides sent references where the bytes were the WAL's, and counted the rest
    // by reason: transaction markers (control) and batches the broker restamped or recompressed
    const after = await stripTotals(cluster);
    expect(after.references).toBeGreaterThan(before.references);
    expect(after.inline.control).toBeGreaterThan(before.inline.control);
    expect(after.inline.rewrittenByBroker).toBeGreaterThan(before.inline.rewrittenByBroker);
  });
});
