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
    }
  | {
      /**
       * A transactional producer: `transactions` transactions of `perTransaction` records, values
       * `<prefix>-<n>-` (n counting every record sent, committed or not); even transactions are
       * committed, odd ones aborted.
       */
      kind: 'transactions';
      bootstrap: string;
      clientId: string;
      topic: string;
      transactionalId: string;
      transactions: number;
      perTransaction: number;
      prefix: string;
    }
  | {
      /**
       * A consumer group (read_committed) that rebalances: one member reads until `joinAfter`
       * records, then a second member joins; both read until the group has seen `expected`
       * distinct values (or timeoutMs).
       */
      kind: 'group-rebalance';
      bootstrap: string;
      clientId: string;
      topic: string;
      groupId: string;
      expected: number;
      joinAfter: number;
      timeoutMs: number;
    };

export interface KafkajsJobResult {
  produced?: number;
  read?: number;
  /** How many records carried each value prefix (the text before the first '-'; values without one count as 'other'). */
  prefixes?: Record<string, number>;
  /** Transactions: values of the committed ones, and how many records the aborted ones held. */
  committed?: string[];
  aborted?: number;
  /** Group: distinct values read, values read more than once, and members' assignments. */
  distinct?: number;
  redelivered?: number;
  /** Records that came, on one member and partition, before a record of the same producer sent earlier. */
  outOfOrder?: number;
  /** How many times each member joined the group (a rebalance makes it join again). */
  generations?: number[];
}

/** `<prefix>-<n>-…`: the producer (prefix) and its send order (n), when a value has them. */
function sequenceOf(value: string): { prefix: string; n: number } | undefined {
  const match = /^([A-Za-z0-9_]+)-(\d+)-/.exec(value);
  return match ? { prefix: match[1]!, n: Number(match[2]) } : undefined;
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
  if (job.kind === 'transactions') {
    const producer = kafka.producer({
      transactionalId: job.transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    const committed: string[] = [];
    let aborted = 0;
    let n = 0;
    for (let t = 0; t < job.transactions; t++) {
      const transaction = await producer.transaction();
      const values = Array.from({ length: job.perTransaction }, () => `${job.prefix}-${n++}-t${t}`);
      await transaction.send({
        topic: job.topic,
        acks: -1,
        messages: values.map((value, k) => ({ key: `k${k % 7}`, value })),
      });
      if (t % 2 === 0) {
        await transaction.commit();
        committed.push(...values);
      } else {
        await transaction.abort();
        aborted += values.length;
      }
    }
    await producer.disconnect();
    return { committed, aborted };
  }
  if (job.kind === 'group-rebalance') return groupRebalance(kafka, job);
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

async function groupRebalance(
  kafka: Kafka,
  job: Extract<KafkajsJob, { kind: 'group-rebalance' }>,
): Promise<KafkajsJobResult> {
  const seen = new Map<string, number>();
  let read = 0;
  let outOfOrder = 0;
  const generations: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const timer = setTimeout(() => done(), job.timeoutMs);
  const member = async (index: number) => {
    const consumer = kafka.consumer({ groupId: job.groupId, maxBytes: 1 << 20 });
    generations[index] = 0;
    consumer.on(consumer.events.GROUP_JOIN, () => {
      generations[index]!++;
    });
    await consumer.connect();
    await consumer.subscribe({ topic: job.topic, fromBeginning: true });
    // Per partition and producer, the last send order this member read.
    const last = new Map<string, number>();
    await consumer.run({
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) {
          const value = message.value!.toString();
          seen.set(value, (seen.get(value) ?? 0) + 1);
          read++;
          const sequence = sequenceOf(value);
          if (sequence === undefined) continue;
          const key = `${batch.partition}/${sequence.prefix}`;
          if ((last.get(key) ?? -1) >= sequence.n) outOfOrder++;
          last.set(key, sequence.n);
        }
        if (seen.size >= job.expected) done();
      },
    });
    return consumer;
  };
  const first = await member(0);
  while (read < job.joinAfter && seen.size < job.expected) await new Promise((r) => setTimeout(r, 50));
  const second = await member(1);
  await finished;
  clearTimeout(timer);
  await Promise.all([first.disconnect(), second.disconnect()]);
  const redelivered = [...seen.values()].reduce((n, count) => n + count - 1, 0);
  return { read, distinct: seen.size, redelivered, outOfOrder, generations };
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
