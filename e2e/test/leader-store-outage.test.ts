// Issue #12, case 2: with default settings a frozen object store must not fail or stall produce to
// a WAL topic. The S3 server is stopped with SIGSTOP (connections hang, as in a zone outage).
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient, underReplicated } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';

// Not wal-durable-* nor wal-nodurable-*: the defaults.
const WAL_TOPIC = 'wal-leader-outage';
const PLAIN_TOPIC = 'plain-leader-outage';
const SENDS = 40;

let paused: number | undefined;
afterEach(() => {
  // Whatever happens, the S3 server is not left frozen for the next files.
  if (paused !== undefined) process.kill(paused, 'SIGCONT');
  paused = undefined;
});

describe('a frozen object store with default settings', () => {
  it('acknowledges every produce to a WAL topic, as it does for a topic without the WAL', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, WAL_TOPIC, { partitions: 3 });
    await createTopic(cluster.bootstrap, PLAIN_TOPIC, { partitions: 3 });
    const producer = kafkaClient(cluster.bootstrap).producer({ retry: { retries: 0 } });
    await producer.connect();
    try {
      await producer.send({ topic: WAL_TOPIC, acks: -1, messages: [{ value: 'warm-up' }] });

      // Given the S3 server frozen
      process.kill(cluster.s3.pid, 'SIGSTOP');
      paused = cluster.s3.pid;

      // When a producer without retries keeps sending acks=all to both topics for a while
      const outcomes: Record<string, { ok: number; failed: string[]; slowestMs: number }> = {};
      for (const topic of [WAL_TOPIC, PLAIN_TOPIC]) outcomes[topic] = { ok: 0, failed: [], slowestMs: 0 };
      for (let n = 0; n < SENDS; n++) {
        for (const topic of [WAL_TOPIC, PLAIN_TOPIC]) {
          const started = Date.now();
          const outcome = outcomes[topic]!;
          await producer
            .send({ topic, acks: -1, messages: [{ key: `k${n}`, value: `during-outage-${n}` }] })
            .then(
              () => {
                outcome.ok++;
              },
              (error: Error) => {
                outcome.failed.push(error.message);
              },
            );
          outcome.slowestMs = Math.max(outcome.slowestMs, Date.now() - started);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      console.log('acknowledgements during the outage', JSON.stringify(outcomes));

      // Then every send to the WAL topic was acknowledged, as for the plain topic
      expect(outcomes[PLAIN_TOPIC]!.failed).toEqual([]);
      expect(outcomes[WAL_TOPIC]!.failed).toEqual([]);
      expect(outcomes[WAL_TOPIC]!.ok).toBe(SENDS);
      // And the leaders' sidecars saw the store degraded and stopped copying
      const counters = await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id)));
      const notCopied = counters.reduce(
        (n, c) => n + ((c.wal?.produce as Record<string, number>)?.batchesNotCopiedStoreDegraded ?? 0),
        0,
      );
      expect(notCopied).toBeGreaterThan(0);
      // And the replicas kept up
      expect(await underReplicated(cluster.bootstrap, [WAL_TOPIC])).toEqual([]);
    } finally {
      if (paused !== undefined) process.kill(paused, 'SIGCONT');
      paused = undefined;
      await producer.disconnect();
    }
  });
});
