import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CompressionTypes, type Producer } from 'kafkajs';
import { describe, expect, inject, it } from 'vitest';
import { consumeValues, createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { counterDelta, counterSnapshot, counters } from '../src/cluster/cluster-info.js';
import { compareReplicas, type LogBatch, readPartitionLog } from '../src/wal/inspect.js';

const PARTITIONS = 2;
/** Rounds written to the compacted topic, one batch per partition each, a segment apart. */
const COMPACTED_ROUNDS = 8;
const SEGMENT_MS = 300;
/** Batch attributes (docs/kafka-protocol.md, "Record batch v2"): codec bits, timestamp type bit. */
const COMPRESSION_MASK = 0x07;
const GZIP = 1;

type Cluster = ReturnType<typeof inject<'cluster'>>;

/** Every batch of every partition of `topic` in broker `brokerId`'s log. */
function logOf(cluster: Cluster, topic: string, brokerId = 1): LogBatch[] {
  return Array.from({ length: PARTITIONS }, (_, p) =>
    readPartitionLog(cluster.dataDirs[brokerId]!, topic, p),
  ).flat();
}

/**
 * The offset up to which broker `brokerId`'s log cleaner has cleaned each partition of `topic`
 * (its `cleaner-offset-checkpoint`: a version line, a count line, then `topic partition offset`).
 */
function cleanedUpTo(cluster: Cluster, topic: string, brokerId: number): Map<number, bigint> {
  const out = new Map<number, bigint>();
  let text: string;
  try {
    text = readFileSync(path.join(cluster.dataDirs[brokerId]!, 'cleaner-offset-checkpoint'), 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n').slice(2)) {
    const [name, partition, offset] = line.trim().split(' ');
    if (name === topic && partition !== undefined && offset !== undefined)
      out.set(Number(partition), BigInt(offset));
  }
  return out;
}

/** Sends rounds `first`, `first` + 1, ... of 100 values (20 keys) to `topic`, one send each. */
async function sendRounds(
  producer: Producer,
  topic: string,
  { first = 0, rounds, pauseMs = 0 }: { first?: number; rounds: number; pauseMs?: number },
): Promise<void> {
  for (let s = first; s < first + rounds; s++) {
    await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.None,
      messages: Array.from({ length: 100 }, (_, i) => ({
        key: `key-${i % 20}`,
        value: `${topic}-${s}-${i}`,
      })),
    });
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  }
}

describe('mixed traffic through WAL replication', () => {
  it('transactions, compaction, LogAppendTime and broker recompression: byte-identical replicas, fallbacks counted by reason', async () => {
    const cluster = inject('cluster');
    const kafka = kafkaClient(cluster.bootstrap);
    const window = async <T>(body: () => Promise<T>) => {
      const before = await counterSnapshot(cluster);
      await body();
      const after = await counterSnapshot(cluster);
      return (pick: Parameters<typeof counterDelta>[2]) => counterDelta(before, after, pick);
    };
    await createTopic(cluster.bootstrap, 'wal-mixed-tx', { partitions: PARTITIONS });
    await createTopic(cluster.bootstrap, 'wal-mixed-compacted', {
      partitions: PARTITIONS,
      configs: {
        'cleanup.policy': 'compact',
        // Every round of sends starts a segment of its own on every replica (a roll is decided by
        // the batches' own timestamps), and the cleaner takes any dirty segment at once.
        'segment.ms': String(SEGMENT_MS),
        'min.cleanable.dirty.ratio': '0.01',
        'min.compaction.lag.ms': '0',
      },
    });
    await createTopic(cluster.bootstrap, 'wal-mixed-logappend', {
      partitions: PARTITIONS,
      configs: { 'message.timestamp.type': 'LogAppendTime' },
    });
    await createTopic(cluster.bootstrap, 'wal-mixed-gzip', {
      partitions: PARTITIONS,
      configs: { 'compression.type': 'gzip' },
    });

    // Given a transactional producer that commits, aborts and commits again
    const transactions = await window(async () => {
      const tx = kafka.producer({
        transactionalId: 'wal-mixed-tx',
        idempotent: true,
        maxInFlightRequests: 1,
      });
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
      // The coordinator writes the markers after EndTxn returns: the window closes once every
      // replica has the three of each partition
      const deadline = Date.now() + 30_000;
      while (
        [1, 2, 3].some(
          (id) =>
            logOf(cluster, 'wal-mixed-tx', id).filter(({ batch }) => batch.isControl).length < 3 * PARTITIONS,
        )
      ) {
        if (Date.now() > deadline) throw new Error('transaction markers not on every replica within 30 s');
        await new Promise((r) => setTimeout(r, 200));
      }
    });
    // And an idempotent producer writing uncompressed batches to the other three topics, one
    // topic at a time so that each topic's fallbacks are counted in a window of its own
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const compacted = await window(async () => {
      await sendRounds(producer, 'wal-mixed-compacted', {
        rounds: COMPACTED_ROUNDS,
        pauseMs: 3 * SEGMENT_MS,
      });
      // The last round stays in the active segment, which the cleaner never touches: every round
      // before it is cleanable
      await sendRounds(producer, 'wal-mixed-compacted', { first: COMPACTED_ROUNDS, rounds: 1 });
    });
    const logAppendTime = await window(() => sendRounds(producer, 'wal-mixed-logappend', { rounds: 10 }));
    const recompressed = await window(() => sendRounds(producer, 'wal-mixed-gzip', { rounds: 10 }));
    await producer.disconnect();

    // When every broker's log cleaner has cleaned the compacted topic up to its last round
    const lastRound = new Map(
      Array.from({ length: PARTITIONS }, (_, p) => {
        const log = readPartitionLog(cluster.dataDirs[1]!, 'wal-mixed-compacted', p);
        return [p, log.at(-1)!.batch.baseOffset] as const;
      }),
    );
    const cleanerDeadline = Date.now() + 120_000;
    for (;;) {
      const behind = [1, 2, 3].flatMap((id) => {
        const cleaned = cleanedUpTo(cluster, 'wal-mixed-compacted', id);
        return [...lastRound]
          .filter(([p, last]) => (cleaned.get(p) ?? -1n) < last)
          .map(([p]) => `broker ${id} partition ${p} at ${cleaned.get(p) ?? 'none'}`);
      });
      if (behind.length === 0) break;
      if (Date.now() > cleanerDeadline) throw new Error(`log cleaner did not run: ${behind.join('; ')}`);
      await new Promise((r) => setTimeout(r, 1_000));
    }

    // Then every replica of every topic is byte-identical to its leader, the cleaned one included
    for (const topic of ['wal-mixed-tx', 'wal-mixed-compacted', 'wal-mixed-logappend', 'wal-mixed-gzip']) {
      expect(await compareReplicas(cluster.dataDirs, topic, PARTITIONS), topic).toEqual([]);
    }
    // And the cleaner really removed records: fewer on disk than were produced, and a consumer
    // reads what is left, the last round whole among it
    const produced = (COMPACTED_ROUNDS + 1) * 100;
    const left = logOf(cluster, 'wal-mixed-compacted').reduce((n, { batch }) => n + batch.recordCount, 0);
    console.log(
      `[replication-mixed] compacted topic: ${produced} records produced, ${left} left after cleaning`,
    );
    expect(left).toBeLessThan(produced);
    const compactedValues = await consumeValues(cluster.bootstrap, 'wal-mixed-compacted', left);
    expect(compactedValues.length).toBe(left);
    for (let i = 0; i < 100; i++)
      expect(compactedValues).toContain(`wal-mixed-compacted-${COMPACTED_ROUNDS}-${i}`);

    // And the broker really rewrote the other two topics' batches: restamped, recompressed
    const logAppendBatches = logOf(cluster, 'wal-mixed-logappend');
    const gzipBatches = logOf(cluster, 'wal-mixed-gzip');
    expect(logAppendBatches.every(({ batch }) => batch.timestampType === 'LogAppendTime')).toBe(true);
    expect(gzipBatches.every(({ batch }) => (batch.attributes & COMPRESSION_MASK) === GZIP)).toBe(true);

    // And consumers read what they should (read_committed: the 200 committed records)
    const committed = await consumeValues(cluster.bootstrap, 'wal-mixed-tx', 200);
    expect(committed.length).toBe(200);
    expect(committed.every((v) => v.startsWith('commit-'))).toBe(true);
    for (const topic of ['wal-mixed-logappend', 'wal-mixed-gzip']) {
      expect((await consumeValues(cluster.bootstrap, topic, 1_000)).length, topic).toBe(1_000);
    }

    // And each topic's fallbacks were counted under their own reason, in their own window, once
    // per batch and follower (two followers each):
    const controlBatches = logOf(cluster, 'wal-mixed-tx').filter(({ batch }) => batch.isControl).length;
    const report = (name: string, delta: (pick: Parameters<typeof counterDelta>[2]) => number) =>
      `${name}: references ${delta(counters.referencesSent)}, control ${delta(counters.inlineBatches('control'))}, rewrittenByBroker ${delta(counters.inlineBatches('rewrittenByBroker'))}, notInWal ${delta(counters.inlineBatches('notInWal'))}`;
    console.log(`[replication-mixed] ${report('transactions', transactions)}`);
    console.log(`[replication-mixed] ${report('compacted', compacted)}`);
    console.log(`[replication-mixed] ${report('LogAppendTime', logAppendTime)}`);
    console.log(`[replication-mixed] ${report('recompressed', recompressed)}`);
    // transaction markers as control batches, the transactions' records as references
    expect(controlBatches).toBe(3 * PARTITIONS);
    expect(transactions(counters.inlineBatches('control'))).toBeGreaterThanOrEqual(2 * controlBatches);
    expect(transactions(counters.referencesSent)).toBeGreaterThan(0);
    // the compacted topic's batches as references (the cleaner works on each replica alone)
    expect(compacted(counters.referencesSent)).toBeGreaterThanOrEqual(
      2 * PARTITIONS * (COMPACTED_ROUNDS + 1),
    );
    expect(compacted(counters.inlineBatches('rewrittenByBroker'))).toBe(0);
    // every restamped batch as rewritten by the broker, none as a reference
    expect(logAppendTime(counters.inlineBatches('rewrittenByBroker'))).toBeGreaterThanOrEqual(
      2 * logAppendBatches.length,
    );
    expect(logAppendTime(counters.referencesSent)).toBe(0);
    // and every recompressed batch the same, in a window of its own
    expect(recompressed(counters.inlineBatches('rewrittenByBroker'))).toBeGreaterThanOrEqual(
      2 * gzipBatches.length,
    );
    expect(recompressed(counters.referencesSent)).toBe(0);
  });
});
