import { Kafka, KafkaJSProtocolError, logLevel } from 'kafkajs';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient, withAdmin } from '../src/clients/kafkajs.js';
import { counterDelta, counterSnapshot, counters } from '../src/cluster/cluster-info.js';
import { batchIdentity, openE2eStore, readPartitionLog, readWalObjects } from '../src/wal/inspect.js';

// Durable ack is asked for by name (wal-settings.ts): it is off by default.
const WAL_TOPIC = 'wal-durable-outage';
const PLAIN_TOPIC = 'plain-outage';

let paused: number | undefined;
afterEach(() => {
  // Whatever happens, the S3 server is not left frozen for the next files.
  if (paused !== undefined) process.kill(paused, 'SIGCONT');
  paused = undefined;
});

describe('object store outage with durable ack', () => {
  it('answers a retriable error for WAL topics only, and the retries succeed once the store is back', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, WAL_TOPIC, { partitions: 1 });
    await createTopic(cluster.bootstrap, PLAIN_TOPIC, { partitions: 1 });
    const kafka = kafkaClient(cluster.bootstrap);
    const noRetries = kafka.producer({ retry: { retries: 0 } });
    await noRetries.connect();
    const before = await counterSnapshot(cluster);

    // Given the S3 server frozen (SIGSTOP: connections hang, as in a zone outage)
    process.kill(cluster.s3.pid, 'SIGSTOP');
    paused = cluster.s3.pid;

    // When a producer without retries writes to a WAL topic
    const started = Date.now();
    const failure = await noRetries
      .send({ topic: WAL_TOPIC, acks: -1, messages: [{ value: 'not stored' }] })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    const failedAfterMs = Date.now() - started;

    // Then it gets the retriable REQUEST_TIMED_OUT within the upload deadline (5 s) plus slack
    // (kafkajs wraps the broker's error in "retries exceeded" when retries are 0)
    const cause = (failure as { cause?: unknown }).cause ?? failure;
    expect(cause).toBeInstanceOf(KafkaJSProtocolError);
    expect((cause as KafkaJSProtocolError).type).toBe('REQUEST_TIMED_OUT');
    expect((cause as KafkaJSProtocolError).retriable).toBe(true);
    expect(failedAfterMs).toBeLessThan(20_000);

    // And a topic that does not use the WAL is unaffected
    await noRetries.send({ topic: PLAIN_TOPIC, acks: -1, messages: [{ value: 'fine' }] });
    await noRetries.disconnect();
    const afterNoRetries = await counterSnapshot(cluster);
    expect(counterDelta(before, afterNoRetries, counters.durableAckFailures)).toBe(1);

    // When a producer that retries writes while the store is still down, and the store comes back
    // (its client logs every error a broker answered, and reports every Produce round trip)
    const refusals: Array<{ at: number; error: string }> = [];
    const produceRoundTrips: number[] = [];
    const retryingClient = new Kafka({
      clientId: 'wal-outage-retrying',
      brokers: cluster.bootstrap.split(','),
      logLevel: logLevel.ERROR,
      logCreator:
        () =>
        ({ log }) => {
          const { message, error } = log as { message: string; error?: string };
          if (message.startsWith('Response Produce') && error !== undefined)
            refusals.push({ at: Date.now(), error });
        },
    });
    const retrying = retryingClient.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      retry: { retries: 30, maxRetryTime: 2_000 },
    });
    retrying.on(retrying.events.REQUEST, ({ payload }) => {
      if (payload.apiName === 'Produce') produceRoundTrips.push(Date.now());
    });
    await retrying.connect();
    const sending = retrying.send({
      topic: WAL_TOPIC,
      acks: -1,
      messages: [{ key: 'k', value: 'stored after the outage' }],
    });
    await new Promise((r) => setTimeout(r, 7_000));
    const resumedAt = Date.now();
    process.kill(cluster.s3.pid, 'SIGCONT');
    paused = undefined;
    const [acknowledged] = await sending;
    await retrying.disconnect();

    // Then the producer was refused while the store was down, with the retriable error, the sidecar
    // counted each refusal, and the producer sent again until a Produce was acknowledged after the
    // store came back
    const afterRetries = await counterSnapshot(cluster);
    console.log(
      `[wal-outage] retrying producer: ${refusals.length} refusals (${[...new Set(refusals.map((r) => r.error))].join('; ')}), ${produceRoundTrips.length} Produce round trips, ${produceRoundTrips.filter((t) => t >= resumedAt).length} after the store came back`,
    );
    expect(refusals.length).toBeGreaterThanOrEqual(1);
    expect(refusals.every((r) => r.at < resumedAt && /timed out/i.test(r.error))).toBe(true);
    expect(counterDelta(afterNoRetries, afterRetries, counters.durableAckFailures)).toBe(refusals.length);
    expect(produceRoundTrips.length).toBe(refusals.length + 1);
    expect(produceRoundTrips.at(-1)!).toBeGreaterThanOrEqual(resumedAt);

    // And the acknowledged batch is in the WAL byte for byte
    expect(acknowledged!.errorCode).toBe(0);
    const offset = BigInt(acknowledged!.baseOffset!);
    const metadata = await withAdmin(cluster.bootstrap, (admin) =>
      admin.fetchTopicMetadata({ topics: [WAL_TOPIC] }),
    );
    const leader = metadata.topics[0]!.partitions[0]!.leader;
    const logBatch = readPartitionLog(cluster.dataDirs[leader]!, WAL_TOPIC, 0).find(
      (b) => b.batch.baseOffset === offset,
    );
    expect(logBatch).toBeDefined();
    const wal = await readWalObjects(openE2eStore(cluster.s3));
    const stored = wal.find(
      (w) =>
        batchIdentity(w.entry.topicName, w.entry.partition, w.entry.crc, w.entry.length) ===
        batchIdentity(WAL_TOPIC, 0, logBatch!.batch.crc, logBatch!.batch.size),
    );
    expect(stored?.bytes.subarray(21).equals(logBatch!.batch.bytes().subarray(21))).toBe(true);
  });
});
