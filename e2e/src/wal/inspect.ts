import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  type ObjectStore,
  openObjectStore,
  WAL_METADATA_TOPIC,
  type WalMetadataRecordV1,
} from '@walproxy/proxy';
import { parseWalObject, type RecordBatch, recordBatches, type WalIndexEntry } from '@walproxy/shared';
import { kafkaClient, withAdmin } from '../clients/kafkajs.js';
import type { S3Info } from '../cluster/cluster-info.js';

/** The S3 server of the e2e cluster, opened the way the sidecars open it. */
export function openE2eStore(s3: S3Info): ObjectStore {
  return openObjectStore(`s3://${s3.bucket}/${s3.prefix.replace(/\/$/, '')}`, {
    endpoint: s3.endpoint,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
}

/** A batch as a broker stored it in its log segment files. */
export interface LogBatch {
  topic: string;
  partition: number;
  batch: RecordBatch;
}

/**
 * Every complete batch of one partition, read from the broker's segment files (`*.log`, in
 * offset order). A broker writes through the page cache, so this sees what it appended.
 */
export function readPartitionLog(dataDir: string, topic: string, partition: number): LogBatch[] {
  const dir = path.join(dataDir, `${topic}-${partition}`);
  const segments = readdirSync(dir)
    .filter((f) => f.endsWith('.log'))
    .sort();
  const out: LogBatch[] = [];
  for (const segment of segments) {
    for (const batch of recordBatches(readFileSync(path.join(dir, segment)))) {
      if (!batch.partial) out.push({ topic, partition, batch });
    }
  }
  return out;
}

export interface StoredWalBatch {
  objectKey: string;
  entry: WalIndexEntry;
  /** The batch's bytes as stored in the object. */
  bytes: Buffer;
}

/** Downloads and parses every WAL object under the store's prefix (footers verified). */
export async function readWalObjects(
  store: ObjectStore,
  onObject?: (key: string, size: number) => void,
): Promise<StoredWalBatch[]> {
  const out: StoredWalBatch[] = [];
  for await (const info of store.list('')) {
    const object = await store.get(info.key);
    onObject?.(info.key, object.length);
    const parsed = parseWalObject(object);
    for (const entry of parsed.entries) {
      out.push({
        objectKey: info.key,
        entry,
        bytes: object.subarray(entry.position, entry.position + entry.length),
      });
    }
  }
  return out;
}

/** Identity of a batch that the broker does not change: its partition, CRC and size. */
export function batchIdentity(topic: string, partition: number, crc: number, length: number): string {
  return `${topic}\u0000${partition}\u0000${crc}\u0000${length}`;
}

/** A metadata record and the metadata topic's partition it was read from. */
export type ReadMetadataRecord = WalMetadataRecordV1 & { readonly metadataPartition: number };

/** Reads the whole metadata topic (up to its current end offsets). */
export async function readMetadataRecords(
  bootstrap: string,
  topic = WAL_METADATA_TOPIC,
): Promise<ReadMetadataRecord[]> {
  const ends = await withAdmin(bootstrap, (admin) => admin.fetchTopicOffsets(topic));
  const remaining = new Map(ends.filter((e) => Number(e.high) > 0).map((e) => [e.partition, Number(e.high)]));
  const records: ReadMetadataRecord[] = [];
  if (remaining.size === 0) return records;
  const consumer = kafkaClient(bootstrap).consumer({ groupId: `wal-metadata-reader-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('metadata topic not read to its end within 60 s')),
      60_000,
    );
    void consumer.run({
      eachMessage: async ({ partition, message }) => {
        records.push({
          ...(JSON.parse(message.value!.toString()) as WalMetadataRecordV1),
          metadataPartition: partition,
        });
        const end = remaining.get(partition);
        if (end !== undefined && Number(message.offset) + 1 >= end) remaining.delete(partition);
        if (remaining.size === 0) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  return records;
}

export interface CompareReplicasOptions {
  /** How long to wait for the replicas to agree, default 90 s. */
  timeoutMs?: number;
  /**
   * Partitions whose logs may hold no batch (all of them when true): by default an empty log is a
   * difference, since identical empty logs would prove nothing.
   */
  mayBeEmpty?: boolean | readonly number[];
}

/**
 * Waits until every replica of every partition holds the same batches, then returns, per
 * partition, the first replica whose log differs from the first one's (empty when identical:
 * every batch of every segment byte for byte, base offsets and leader epochs included). A broker
 * without the partition's directory, and a partition whose logs hold no batch (unless
 * `mayBeEmpty` says it may), are differences too.
 */
export async function compareReplicas(
  dataDirs: Record<number, string>,
  topic: string,
  partitions: number,
  { timeoutMs = 90_000, mayBeEmpty = false }: CompareReplicasOptions = {},
): Promise<string[]> {
  const brokers = Object.keys(dataDirs).map(Number);
  const emptyAllowed = (p: number) => (typeof mayBeEmpty === 'boolean' ? mayBeEmpty : mayBeEmpty.includes(p));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const differences: string[] = [];
    for (let p = 0; p < partitions; p++) {
      const missing = brokers.filter((b) => !existsSync(path.join(dataDirs[b]!, `${topic}-${p}`)));
      if (missing.length > 0) {
        differences.push(`${topic}-${p} has no log directory on broker ${missing.join(', ')}`);
        continue;
      }
      let logs: LogBatch[][];
      try {
        logs = brokers.map((b) => readPartitionLog(dataDirs[b]!, topic, p));
      } catch (error) {
        // A segment renamed under us (a roll, the log cleaner's swap): read again.
        differences.push(`${topic}-${p}: ${(error as Error).message}`);
        continue;
      }
      const reference = logs[0]!;
      if (reference.length === 0 && !emptyAllowed(p)) {
        differences.push(`${topic}-${p} on broker ${brokers[0]}: no batch (an empty log proves nothing)`);
      }
      logs.forEach((log, i) => {
        const sameCount = log.length === reference.length;
        const firstDiff = reference.findIndex(
          (b, k) => !log[k] || !log[k]!.batch.bytes().equals(b.batch.bytes()),
        );
        if (!sameCount || firstDiff >= 0) {
          differences.push(
            `${topic}-${p} on broker ${brokers[i]}: ${log.length} batches vs ${reference.length} on broker ${brokers[0]}, first difference at batch ${firstDiff}`,
          );
        }
      });
    }
    if (differences.length === 0 || Date.now() > deadline) return differences;
    await new Promise((r) => setTimeout(r, 1_000));
  }
}
