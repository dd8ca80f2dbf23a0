// A steady, bounded produce-and-consume load for the scenarios that watch the cluster while it
// runs (e2e/test/operator-view.test.ts): one idempotent acks=all producer sending a batch to each
// topic in turn every `intervalMs`, and one consumer group reading every topic, until `stop()` or
// `maxSends` or `maxMs`, whichever comes first.
import { kafkaClient } from './kafkajs.js';

export interface SteadyLoadOptions {
  bootstrap: string;
  topics: string[];
  /** Records per send and their value size. */
  records: number;
  valueBytes: number;
  /** Pause between sends (after each send's acknowledgement). */
  intervalMs: number;
  /** Bounds: the load stops at whichever comes first. */
  maxSends: number;
  maxMs: number;
  /** The consumer group; none: produce only. */
  groupId?: string;
}

export interface SteadyLoad {
  /** Stops producing, then consuming once the group read what was sent; resolves with both counts (records). */
  stop(): Promise<{ sent: number; consumed: number; errors: string[] }>;
}

export async function startSteadyLoad(options: SteadyLoadOptions): Promise<SteadyLoad> {
  const kafka = kafkaClient(options.bootstrap, 'walproxy-e2e-steady');
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const consumer = options.groupId ? kafka.consumer({ groupId: options.groupId }) : undefined;
  let consumed = 0;
  if (consumer) {
    await consumer.connect();
    await consumer.subscribe({ topics: options.topics, fromBeginning: true });
    await consumer.run({
      eachBatch: async ({ batch }) => {
        consumed += batch.messages.length;
      },
    });
  }
  const value = Buffer.alloc(options.valueBytes, 's');
  const started = Date.now();
  const errors: string[] = [];
  let stopping = false;
  let sent = 0;
  const producing = (async () => {
    for (let i = 0; !stopping && i < options.maxSends && Date.now() - started < options.maxMs; i++) {
      const topic = options.topics[i % options.topics.length]!;
      try {
        await producer.send({
          topic,
          acks: -1,
          messages: Array.from({ length: options.records }, (_, k) => ({ key: `k${k % 7}`, value })),
        });
        sent += options.records;
      } catch (error) {
        errors.push(`${topic}: ${(error as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, options.intervalMs));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await producing;
      // The consumer is read up to what was sent (15 s at most) before it stops.
      const deadline = Date.now() + 15_000;
      while (consumer && consumed < sent && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      await producer.disconnect();
      await consumer?.disconnect();
      return { sent, consumed, errors };
    },
  };
}
