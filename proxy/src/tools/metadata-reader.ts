// Reads the WAL index topic (`__remote_wal_log_metadata`) from its beginning to the end offsets it
// had when the read started.
import { randomBytes } from 'node:crypto';
import { loadKafkajs } from '../metadata/kafkajs-module.js';
import type { WalMetadataRecordV1 } from '../metadata/wal-metadata-publisher.js';

export interface MetadataRead {
  records: WalMetadataRecordV1[];
  /** Values that are not version-1 JSON records, with where they are. */
  unreadable: string[];
}

export async function readMetadataTopic(
  bootstrap: string[],
  topic: string,
  onProgress?: (read: number, total: number) => void,
  timeoutMs = 120_000,
): Promise<MetadataRead> {
  // Loaded here, not at the top: the sidecar's bundle holds this tool too, and must not
  // evaluate kafkajs before its listeners open.
  const { Kafka, logLevel } = await loadKafkajs();
  const kafka = new Kafka({
    clientId: 'walproxy-tools',
    brokers: bootstrap,
    logLevel: logLevel.NOTHING,
    retry: { retries: 3, initialRetryTime: 200 },
  });
  const admin = kafka.admin();
  await admin.connect();
  let ends: Array<{ partition: number; high: string; low: string }>;
  try {
    const topics = await admin.listTopics();
    if (!topics.includes(topic)) throw new Error(`metadata topic ${topic} does not exist`);
    ends = await admin.fetchTopicOffsets(topic);
  } finally {
    await admin.disconnect();
  }
  const remaining = new Map(
    ends.filter((e) => Number(e.high) > Number(e.low)).map((e) => [e.partition, Number(e.high)]),
  );
  const total = ends.reduce((t, e) => t + Number(e.high) - Number(e.low), 0);
  const out: MetadataRead = { records: [], unreadable: [] };
  if (remaining.size === 0) return out;
  // A throwaway group that never commits: the read changes nothing on the cluster.
  const consumer = kafka.consumer({ groupId: `walproxy-tools-${randomBytes(6).toString('hex')}` });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    let read = 0;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`metadata topic ${topic} not read to its end within ${timeoutMs / 1000} s`)),
        timeoutMs,
      );
      void consumer
        .run({
          autoCommit: false,
          eachMessage: async ({ partition, message }) => {
            const end = remaining.get(partition);
            if (end === undefined || Number(message.offset) >= end) return;
            read++;
            onProgress?.(read, total);
            const where = `${topic}-${partition}@${message.offset}`;
            try {
              const value = JSON.parse(message.value?.toString() ?? 'null') as WalMetadataRecordV1;
              if (value?.v === 1 && typeof value.object === 'string' && Array.isArray(value.batches)) {
                out.records.push(value);
              } else out.unreadable.push(`${where}: not a version-1 WAL metadata record`);
            } catch {
              out.unreadable.push(`${where}: not JSON`);
            }
            if (Number(message.offset) + 1 >= end) remaining.delete(partition);
            if (remaining.size === 0) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return out;
}
