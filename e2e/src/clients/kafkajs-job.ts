/**
 * kafkajs as a program of its own, so it can run inside a network namespace (a zone's clients)
 * like kcat and the Java tools: `node --import tsx kafkajs-job.ts '<job as JSON>'` prints one JSON
 * line with the outcome. `runKafkajsJob` starts it, bounded in time, and parses that line.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { repoRoot } from '../cluster/paths.js';
import { runBounded } from './run-bounded.js';

export type KafkajsJob =
  | {
      kind: 'produce';
      bootstrap: string;
      clientId: string;
      topic: string;
      /** Records, sent in sends of 500 with acks=all from an idempotent producer. */
      messages: number;
      valueBytes: number;
      /** Value prefix: values are `<prefix>-<n>` padded to valueBytes. */
      prefix: string;
    }
  | {
      kind: 'consume';
      bootstrap: string;
      clientId: string;
      topic: string;
      groupId: string;
      /** Stop once this many records were read (or after timeoutMs). */
      expected: number;
      rackId?: string;
      timeoutMs: number;
    };

export interface KafkajsJobResult {
  produced?: number;
  read?: number;
  /** How many records carried each value prefix (the text before the first '-'; values without one count as 'other'). */
  prefixes?: Record<string, number>;
}

async function run(job: KafkajsJob): Promise<KafkajsJobResult> {
  const kafka = new Kafka({
    clientId: job.clientId,
    brokers: job.bootstrap.split(','),
    logLevel: process.env.KAFKAJS_LOG_LEVEL === 'ERROR' ? logLevel.ERROR : logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 200 },
  });
  if (job.kind === 'produce') {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    for (let i = 0; i < job.messages; i += 500) {
      const n = Math.min(500, job.messages - i);
      await producer.send({
        topic: job.topic,
        acks: -1,
        messages: Array.from({ length: n }, (_, k) => ({
          key: `k${(i + k) % 7}`,
          value: `${job.prefix}-${i + k}-`.padEnd(job.valueBytes, 'v'),
        })),
      });
    }
    await producer.disconnect();
    return { produced: job.messages };
  }
  const consumer = kafka.consumer({
    groupId: job.groupId,
    maxBytes: 8 << 20,
    ...(job.rackId ? { rackId: job.rackId } : {}),
  });
  await consumer.connect();
  await consumer.subscribe({ topic: job.topic, fromBeginning: true });
  const prefixes: Record<string, number> = {};
  let read = 0;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, job.timeoutMs);
    void consumer.run({
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) {
          const value = message.value!.toString();
          const prefix = value.includes('-') ? value.slice(0, value.indexOf('-')) : 'other';
          prefixes[prefix] = (prefixes[prefix] ?? 0) + 1;
        }
        read += batch.messages.length;
        if (read >= job.expected) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  return { read, prefixes };
}

/** Runs `job` in a child process, inside `netns` when given. */
export async function runKafkajsJob(
  job: KafkajsJob,
  { netns, timeoutMs = 180_000 }: { netns?: string; timeoutMs?: number } = {},
): Promise<KafkajsJobResult> {
  const script = path.join(repoRoot(), 'e2e', 'src', 'clients', 'kafkajs-job.ts');
  const result = await runBounded(process.execPath, ['--import', 'tsx', script, JSON.stringify(job)], {
    timeoutMs,
    label: `kafkajs ${job.kind} ${job.topic}`,
    ...(netns ? { netns } : {}),
  });
  const line = result.stdout.trim().split('\n').pop() ?? '';
  if (result.code !== 0 || !line.startsWith('{'))
    throw new Error(
      `kafkajs ${job.kind} exited ${result.code}:\n${result.stderr.slice(-3000)}${result.stdout.slice(-1000)}`,
    );
  return JSON.parse(line) as KafkajsJobResult;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const outcome = await run(JSON.parse(process.argv[2]!) as KafkajsJob);
  process.stdout.write(`${JSON.stringify(outcome)}\n`);
  process.exit(0);
}
