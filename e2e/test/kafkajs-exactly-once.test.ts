import { CompressionTypes } from 'kafkajs';
import { describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient, underReplicated } from '../src/clients/kafkajs.js';

const TOPIC = 'e2e-kafkajs-exactly-once';
const PARTITIONS = 6;
const MESSAGES = 100_000;
const BATCH = 2_000;

describe('kafkajs through the sidecars', () => {
  it('delivers 100,000 messages over 6 partitions (RF=3) exactly once, in order per partition', async () => {
    const cluster = inject('cluster');
    // Given a topic with 6 partitions, replication factor 3, reached only through the sidecars
    await createTopic(cluster.bootstrap, TOPIC, { partitions: PARTITIONS, replicationFactor: 3 });
    const kafka = kafkaClient(cluster.bootstrap);

    // When an idempotent acks=all producer writes message i to partition i % 6
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    for (let start = 0; start < MESSAGES; start += BATCH) {
      const messages = Array.from({ length: Math.min(BATCH, MESSAGES - start) }, (_, k) => {
        const i = start + k;
        return { partition: i % PARTITIONS, key: `k${i}`, value: String(i) };
      });
      await producer.send({ topic: TOPIC, acks: -1, compression: CompressionTypes.None, messages });
    }
    await producer.disconnect();

    // And a consumer reads the topic from the beginning
    const received = new Map<number, number[]>();
    let total = 0;
    const consumer = kafka.consumer({ groupId: `${TOPIC}-group`, maxBytes: 4 * 1024 * 1024 });
    await consumer.connect();
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
    const allReceived = new Promise<void>((resolve) => {
      void consumer.run({
        eachBatch: async ({ batch }) => {
          const list = received.get(batch.partition) ?? [];
          for (const message of batch.messages) list.push(Number(message.value!.toString()));
          received.set(batch.partition, list);
          total += batch.messages.length;
          if (total >= MESSAGES) resolve();
        },
      });
    });
    await Promise.race([
      allReceived,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`only ${total} of ${MESSAGES} received in 180 s`)), 180_000),
      ),
    ]);
    await consumer.disconnect();

    // Then every partition holds exactly its messages, each once, in the order they were sent
    expect(total).toBe(MESSAGES);
    for (let p = 0; p < PARTITIONS; p++) {
      const expected = Array.from({ length: MESSAGES }, (_, i) => i).filter((i) => i % PARTITIONS === p);
      expect(received.get(p), `partition ${p}`).toEqual(expected);
    }
    // And every replica kept up through the sidecars
    expect(await underReplicated(cluster.bootstrap, [TOPIC])).toEqual([]);
  });
});
