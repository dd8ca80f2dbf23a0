import { describe, expect, inject, it } from 'vitest';
import { consumeValues, createTopic, kafkaClient, withAdmin } from '../src/clients/kafkajs.js';
import { kcat } from '../src/clients/kcat.js';
import {
  type CounterSnapshot,
  counterDelta,
  counterSnapshot,
  counters,
  sidecarCounters,
} from '../src/cluster/cluster-info.js';
import {
  batchIdentity,
  type LogBatch,
  openE2eStore,
  readPartitionLog,
  readWalObjects,
} from '../src/wal/inspect.js';

/** Polls every sidecar's counters until `done` holds for all of them, for at most 30 s. */
async function untilEverySidecar(
  cluster: ReturnType<typeof inject<'cluster'>>,
  done: (counters: Awaited<ReturnType<typeof sidecarCounters>>) => boolean,
  what: string,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const all = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));
    if (all.every(done)) return;
    if (Date.now() > deadline) throw new Error(`${what} in 30 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Waits until no sidecar has WAL bytes left to upload. */
const walSettled = (cluster: ReturnType<typeof inject<'cluster'>>) =>
  untilEverySidecar(cluster, (c) => c.wal?.writer.pendingBytes === 0, 'WAL uploads did not settle');

/**
 * Waits until every sidecar's store is healthy: a file before this one may have left a store
 * degraded (a fault it injected, an upload slowed by load), and while degraded nothing is copied.
 */
const storesHealthy = (cluster: ReturnType<typeof inject<'cluster'>>) =>
  untilEverySidecar(
    cluster,
    (c) => (c.wal as { health?: { state?: string } } | undefined)?.health?.state === 'healthy',
    "the sidecars' stores did not turn healthy",
  );

async function leaderLog(cluster: ReturnType<typeof inject<'cluster'>>, topic: string): Promise<LogBatch[]> {
  const metadata = await withAdmin(cluster.bootstrap, (admin) =>
    admin.fetchTopicMetadata({ topics: [topic] }),
  );
  return metadata.topics[0]!.partitions.flatMap((p) =>
    readPartitionLog(cluster.dataDirs[p.leader]!, topic, p.partitionId),
  );
}

/**
 * The leader-log batches that are not in the WAL, once the fallback is accounted for: while a
 * sidecar's store is degraded (an upload failed or took longer than --wal-degrade-after-ms, which
 * a loaded CI machine can cause), batches of topics without durable ack are not copied and
 * replicate inline, as stock, and the sidecar counts each one. So a batch may be missing only if
 * the sidecars counted at least as many such batches since `before`; anything beyond that is
 * a batch lost from the WAL.
 */
async function uncountedMissing(
  cluster: ReturnType<typeof inject<'cluster'>>,
  before: CounterSnapshot,
  missing: LogBatch[],
): Promise<LogBatch[]> {
  const counted = counterDelta(
    before,
    await counterSnapshot(cluster),
    counters.batchesNotCopiedStoreDegraded,
  );
  if (missing.length > 0) {
    console.log(
      `[wal-producers] ${missing.length} batches replicated inline; the sidecars counted ${counted} not copied while the store was degraded`,
    );
  }
  return missing.length <= counted ? [] : missing;
}

describe('every kind of producer on a WAL topic', () => {
  it('transactions: committed and aborted batches are stored; read_committed consumers see only the committed', async () => {
    const cluster = inject('cluster');
    const topic = 'wal-transactions';
    await createTopic(cluster.bootstrap, topic, { partitions: 2 });
    const producer = kafkaClient(cluster.bootstrap).producer({
      transactionalId: 'wal-e2e-tx',
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    await storesHealthy(cluster);
    const before = await counterSnapshot(cluster);
    // Given one committed and one aborted transaction, then another committed one
    for (const [outcome, n] of [
      ['commit', 0],
      ['abort', 1],
      ['commit', 2],
    ] as const) {
      const tx = await producer.transaction();
      await tx.send({
        topic,
        messages: Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: `${outcome}-${n}-${i}` })),
      });
      if (outcome === 'commit') await tx.commit();
      else await tx.abort();
    }
    await producer.disconnect();
    await walSettled(cluster);

    // Then a read_committed consumer sees exactly the 100 committed records
    const committed = await consumeValues(cluster.bootstrap, topic, 100, 'read_committed');
    expect(committed.length).toBe(100);
    expect(committed.every((v) => v.startsWith('commit-'))).toBe(true);
    // And every data batch the producer sent is in the WAL; the transaction markers, which the
    // coordinator writes (not Produce), are not
    const wal = new Set(
      (await readWalObjects(openE2eStore(cluster.s3))).map((w) =>
        batchIdentity(w.entry.topicName, w.entry.partition, w.entry.crc, w.entry.length),
      ),
    );
    const log = await leaderLog(cluster, topic);
    const data = log.filter((b) => !b.batch.isControl);
    const markers = log.filter((b) => b.batch.isControl);
    expect(data.length).toBeGreaterThanOrEqual(3);
    expect(markers.length).toBeGreaterThanOrEqual(3);
    const missing = data.filter(
      (b) => !wal.has(batchIdentity(topic, b.partition, b.batch.crc, b.batch.size)),
    );
    expect(missing.length, 'some data batches are in the WAL').toBeLessThan(data.length);
    expect(await uncountedMissing(cluster, before, missing)).toEqual([]);
    expect(
      markers.filter((b) => wal.has(batchIdentity(topic, b.partition, b.batch.crc, b.batch.size))),
    ).toEqual([]);
  });

  it('acks=0 (kcat): batches are stored though no response ever comes', async () => {
    const cluster = inject('cluster');
    const topic = 'wal-acks-zero';
    await createTopic(cluster.bootstrap, topic, { partitions: 1 });
    const lines = Array.from({ length: 2_000 }, (_, i) => `acks0-${i}`);
    await storesHealthy(cluster);
    const before = await counterSnapshot(cluster);
    const produced = await kcat(
      ['-b', cluster.bootstrap, '-t', topic, '-P', '-X', 'acks=0', '-X', 'linger.ms=20'],
      `${lines.join('\n')}\n`,
    );
    expect(produced.code, produced.stderr).toBe(0);
    // Nothing is acknowledged with acks=0; on loopback everything arrives all the same
    const read = await consumeValues(cluster.bootstrap, topic, lines.length, 'read_uncommitted');
    expect(new Set(read)).toEqual(new Set(lines));
    await walSettled(cluster);
    const wal = new Set(
      (await readWalObjects(openE2eStore(cluster.s3))).map((w) =>
        batchIdentity(w.entry.topicName, w.entry.partition, w.entry.crc, w.entry.length),
      ),
    );
    const log = await leaderLog(cluster, topic);
    const missing = log.filter((b) => !wal.has(batchIdentity(topic, b.partition, b.batch.crc, b.batch.size)));
    expect(missing.length, 'some batches are in the WAL').toBeLessThan(log.length);
    expect(await uncountedMissing(cluster, before, missing)).toEqual([]);
  });
});
