import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopic, kafkaClient, underReplicated } from '../src/clients/kafkajs.js';
import { KafkaCluster } from '../src/cluster/kafka-cluster.js';

// Stops and restarts processes, so it runs on a cluster of its own, not the shared one.
let cluster: KafkaCluster;
let failed = false;

beforeAll(async () => {
  cluster = await KafkaCluster.start({ sidecars: true });
});

afterAll(async () => {
  await cluster?.stop({ keepLogs: failed });
});

describe('restarting a sidecar under load', () => {
  it('drains on SIGTERM, exits 0, and clients carry on once it is back: nothing acknowledged is lost', async () => {
    try {
      const topic = 'e2e-sidecar-restart';
      await createTopic(cluster.bootstrap(), topic, { partitions: 3, replicationFactor: 3 });
      // Patient enough to outlast the restart on a loaded machine: the drain (up to the in-flight
      // requests' end), the 2 s pause and the new process's start took ~11 s in a full-suite run.
      const kafka = kafkaClient(cluster.bootstrap(), 'walproxy-e2e', {
        retries: 30,
        initialRetryTime: 300,
        maxRetryTime: 3_000,
      });
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();

      // Given a producer sending batches in the background (bounded: 300 batches, 60 s)
      const acknowledged: number[] = [];
      let next = 0;
      const deadline = Date.now() + 60_000;
      const sending = (async () => {
        while (next < 300 && Date.now() < deadline) {
          const values = Array.from({ length: 50 }, (_, k) => next * 50 + k);
          await producer.send({
            topic,
            acks: -1,
            messages: values.map((v) => ({ key: `k${v % 7}`, value: String(v) })),
          });
          acknowledged.push(...values);
          next++;
        }
      })();
      await new Promise((r) => setTimeout(r, 1_500));

      // When sidecar 2 gets SIGTERM, and comes back two seconds later
      const sidecar = cluster.sidecars.get(2)!;
      await sidecar.stop('SIGTERM', 15_000);
      const exitCode = await sidecar.exited;
      await new Promise((r) => setTimeout(r, 2_000));
      await cluster.startSidecar(2);
      await sending;
      await producer.disconnect();

      // Then the sidecar drained and exited cleanly
      expect(exitCode).toBe(0);
      expect(readFileSync(sidecar.logFile, 'utf8')).toMatch(/"msg":"sidecar stopped"/);
      // And every acknowledged message is in the topic exactly once
      expect(acknowledged.length).toBe(300 * 50);
      const seen = new Map<number, number>();
      const consumer = kafka.consumer({ groupId: `${topic}-check` });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`read ${seen.size} of ${acknowledged.length}`)),
          60_000,
        );
        void consumer.run({
          eachMessage: async ({ message }) => {
            const v = Number(message.value!.toString());
            seen.set(v, (seen.get(v) ?? 0) + 1);
            if (seen.size === acknowledged.length) {
              clearTimeout(timer);
              resolve();
            }
          },
        });
      });
      await consumer.disconnect();
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
      // And the followers of broker 2's partitions (and broker 2 as a follower) caught up again
      const deadlineIsr = Date.now() + 30_000;
      let lagging = await underReplicated(cluster.bootstrap(), [topic]);
      while (lagging.length > 0 && Date.now() < deadlineIsr) {
        await new Promise((r) => setTimeout(r, 500));
        lagging = await underReplicated(cluster.bootstrap(), [topic]);
      }
      expect(lagging).toEqual([]);
    } catch (error) {
      failed = true;
      throw error;
    }
  });
});
