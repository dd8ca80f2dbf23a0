import { WAL_METADATA_TOPIC } from '@walproxy/proxy';
import { describe, expect, inject, it } from 'vitest';
import { producerPerf } from '../src/clients/java-tools.js';
import { createTopic, kafkaClient, withAdmin } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';
import {
  batchIdentity,
  type LogBatch,
  openE2eStore,
  readMetadataRecords,
  readPartitionLog,
  readWalObjects,
} from '../src/wal/inspect.js';

const JAVA_TOPIC = 'wal-java-perf';
const KAFKAJS_TOPIC = 'wal-kafkajs';
const JAVA_RECORDS = 450_000;
const JAVA_RECORD_SIZE = 512;
const KAFKAJS_SENDS = 40;
const KAFKAJS_MESSAGES_PER_SEND = 1_000;
const KAFKAJS_VALUE_SIZE = 1_024;

interface WalStats {
  writer: { pendingBytes: number; objectsUploaded: number; bytesUploaded: number };
  metadata: { queued: number; inFlight: number; published: number };
  produce: { batchesCopied: number };
}

async function walStats(cluster: ReturnType<typeof inject<'cluster'>>): Promise<WalStats[]> {
  return Promise.all(
    [1, 2, 3].map(async (id) => (await sidecarCounters(cluster, id)).wal as unknown as WalStats),
  );
}

describe('WAL writer on the real cluster', () => {
  it('stores every acknowledged batch byte for byte in WAL objects, indexed by the metadata topic', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, JAVA_TOPIC, { partitions: 6 });
    await createTopic(cluster.bootstrap, KAFKAJS_TOPIC, { partitions: 3 });

    // When the Java perf producer (Produce v13, topic ids) writes 230 MB with acks=all
    const java = await producerPerf({
      bootstrap: cluster.bootstrap,
      topic: JAVA_TOPIC,
      records: JAVA_RECORDS,
      recordSize: JAVA_RECORD_SIZE,
      props: { 'linger.ms': 5, 'batch.size': 65_536 },
    });
    expect(java.records).toBe(JAVA_RECORDS);
    // And kafkajs (Produce v7, topic names) writes 41 MB more
    const producer = kafkaClient(cluster.bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const value = Buffer.alloc(KAFKAJS_VALUE_SIZE, 'x');
    for (let s = 0; s < KAFKAJS_SENDS; s++) {
      await producer.send({
        topic: KAFKAJS_TOPIC,
        acks: -1,
        messages: Array.from({ length: KAFKAJS_MESSAGES_PER_SEND }, (_, i) => ({
          key: `k${i % 3}`,
          value: Buffer.concat([Buffer.from(`${s}-${i}-`), value]),
        })),
      });
    }
    await producer.disconnect();
    const producedBytes =
      JAVA_RECORDS * JAVA_RECORD_SIZE + KAFKAJS_SENDS * KAFKAJS_MESSAGES_PER_SEND * KAFKAJS_VALUE_SIZE;
    expect(producedBytes).toBeGreaterThanOrEqual(256 * 1024 * 1024);

    // Then, once the sidecars have nothing left to upload or publish…
    const deadline = Date.now() + 60_000;
    let stats = await walStats(cluster);
    const busy = (s: (typeof stats)[number]) =>
      s.writer.pendingBytes > 0 || s.metadata.queued > 0 || s.metadata.inFlight > 0;
    while (stats.some(busy) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      stats = await walStats(cluster);
    }
    expect(stats.some(busy)).toBe(false);

    // …every batch in the leaders' logs is in a WAL object, with its CRC-covered bytes identical
    const leaders = await withAdmin(cluster.bootstrap, (admin) =>
      admin.fetchTopicMetadata({ topics: [JAVA_TOPIC, KAFKAJS_TOPIC] }),
    );
    const logBatches: LogBatch[] = leaders.topics.flatMap((t) =>
      t.partitions.flatMap((p) => readPartitionLog(cluster.dataDirs[p.leader]!, t.name, p.partitionId)),
    );
    expect(logBatches.length).toBeGreaterThan(1_000);
    const objectSizes: number[] = [];
    const wal = await readWalObjects(openE2eStore(cluster.s3), (_key, size) => objectSizes.push(size));
    // The sidecar names every topic in the footer, also when the client sent only its id (v13).
    const walByIdentity = new Map(
      wal.map((w) => [batchIdentity(w.entry.topicName, w.entry.partition, w.entry.crc, w.entry.length), w]),
    );
    const missing: string[] = [];
    for (const { topic, partition, batch } of logBatches) {
      const stored = walByIdentity.get(batchIdentity(topic, partition, batch.crc, batch.size));
      if (!stored) {
        missing.push(`${topic}-${partition}@${batch.baseOffset}`);
        continue;
      }
      // Bytes 21.. are what the CRC covers: attributes, timestamps, producer state and records.
      expect(
        stored.bytes.subarray(21).equals(batch.bytes().subarray(21)),
        `${topic}-${partition}@${batch.baseOffset}`,
      ).toBe(true);
    }
    expect(missing).toEqual([]);

    // And the metadata topic covers every offset of every partition, pointing at those bytes
    const records = (await readMetadataRecords(cluster.bootstrap)).filter(
      (r) => r.topic === JAVA_TOPIC || r.topic === KAFKAJS_TOPIC,
    );
    const byLocation = new Map(wal.map((w) => [`${w.objectKey}@${w.entry.position}`, w]));
    const indexed = new Map<
      string,
      { object: string; position: number; length: number; lastOffset: number }
    >();
    for (const record of records) {
      for (const b of record.batches) {
        indexed.set(`${record.topic}-${record.partition}@${b.baseOffset}`, {
          object: record.object,
          position: b.position,
          length: b.length,
          lastOffset: b.lastOffset,
        });
        // The footer of the named object agrees with the record
        const footer = byLocation.get(`${record.object}@${b.position}`);
        expect(footer?.entry.length, `${record.object}@${b.position}`).toBe(b.length);
        expect(footer?.entry.crc).toBe(b.crc);
      }
    }
    const unindexed: string[] = [];
    for (const { topic, partition, batch } of logBatches) {
      const where = indexed.get(`${topic}-${partition}@${batch.baseOffset}`);
      if (!where || where.lastOffset !== Number(batch.lastOffset) || where.length !== batch.size) {
        unindexed.push(`${topic}-${partition}@${batch.baseOffset}`);
      }
    }
    expect(unindexed).toEqual([]);

    // Each sidecar writes its records to one partition of the metadata topic, one its broker is
    // the preferred leader of when there is one (the produce stays in its zone; a broker that
    // leads none takes a fixed one): metadataPartitionFor.
    const metadataTopic = await withAdmin(cluster.bootstrap, (admin) =>
      admin.fetchTopicMetadata({ topics: [WAL_METADATA_TOPIC] }),
    );
    const preferredBy = (broker: number) =>
      metadataTopic.topics[0]!.partitions.filter((p) => p.replicas[0] === broker).map((p) => p.partitionId);
    const writers = [...new Set(records.map((r) => r.broker))];
    expect(writers.length).toBeGreaterThan(1);
    expect(writers.some((broker) => preferredBy(broker).length > 0)).toBe(true);
    for (const broker of writers) {
      const partitions = [
        ...new Set(records.filter((r) => r.broker === broker).map((r) => r.metadataPartition)),
      ];
      expect(partitions, `broker ${broker}'s metadata records`).toHaveLength(1);
      const preferred = preferredBy(broker);
      if (preferred.length > 0)
        expect(preferred, `broker ${broker}'s metadata partition`).toContain(partitions[0]);
    }

    // Object sizes depend on the rate per leader (linger seals small objects at low rates): the
    // benchmark reports their distribution; here they are only printed.
    objectSizes.sort((a, b) => a - b);
    console.log(
      `WAL: ${objectSizes.length} objects, median ${objectSizes[Math.floor(objectSizes.length / 2)]} B, ${wal.length} batches, ${records.length} metadata records`,
    );
  });
});
