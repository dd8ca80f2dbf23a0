import type { ConnectionOptions } from 'node:tls';
// Types only: kafkajs itself loads when the publisher connects, after the sidecar's listeners
// opened (its evaluation is a tenth of a second of start on a busy machine; issue #12).
import type { Kafka, KafkaConfig, Producer, SASLOptions } from 'kafkajs';
import type { Logger } from '../log.js';
import { loadKafkajs } from './kafkajs-module.js';
import type { SaslCredentials } from './sasl-client.js';

export const WAL_METADATA_TOPIC = '__remote_wal_log_metadata';

/**
 * How often the queued pieces are sent. Each send is a kafkajs produce and a GZIP call, and both
 * cost mostly per call: a 1 KB JSON value took ~240 µs of CPU to GZIP at a ratio of 3.6, a 28 KB
 * one ~240 µs at 18 (this machine). Every 50 ms that was a tenth of a WAL sidecar's CPU (issue
 * #13's profile); every 500 ms a tenth of that. Each send is also a round trip to the partition's
 * leader and, for its followers, replication round trips — across zones, since the topic is
 * replicated like any other: what crosses is per send, not per byte. Nothing waits for these
 * records: references carry their locations in the Fetch responses, and the objects' footers
 * index every batch (tools read the topic minutes later), so a send every 2 s costs nothing a
 * reader sees.
 */
export const METADATA_FLUSH_INTERVAL_MS = 2_000;

/**
 * The metadata topic's partition this sidecar's records go to: the one its own broker is the
 * preferred leader of (the first replica), else the one it leads now, else a fixed one by broker
 * id. All of a writer's records then land in one partition, in order, and the produce stays in
 * the sidecar's zone: only the partition's replication crosses zones. Readers read every
 * partition (tools/metadata-reader.ts), so the choice is the writer's alone.
 */
export function metadataPartitionFor(
  partitions: readonly { partitionId: number; leader: number; replicas: readonly number[] }[],
  brokerId: number,
): number | undefined {
  if (partitions.length === 0) return undefined;
  const byId = [...partitions].sort((a, b) => a.partitionId - b.partitionId);
  const preferred = byId.find((p) => p.replicas[0] === brokerId);
  if (preferred) return preferred.partitionId;
  const led = byId.find((p) => p.leader === brokerId);
  if (led) return led.partitionId;
  return byId[((brokerId % byId.length) + byId.length) % byId.length]!.partitionId;
}

/** One produced batch, stored in a WAL object, with the offsets the leader assigned it. */
export interface WalPiece {
  /** The store holding the object, when not the writer's own (a zone-local produce's, in its zone bucket). */
  store?: string | undefined;
  objectKey: string;
  objectSize: number;
  topic: string;
  /** Hex topic id, or undefined when the request named the topic (Produce ≤ v12). */
  topicId: string | undefined;
  partition: number;
  position: number;
  length: number;
  baseOffset: bigint;
  lastOffset: bigint;
  crc: number;
  recordCount: number;
  uploadedAtMs: number;
}

/**
 * Version 1 of a `__remote_wal_log_metadata` record value (JSON, so kcat and tools read it as
 * is): where the batches of one partition live in one WAL object. Keyed by `<topic>-<partition>`.
 */
export interface WalMetadataRecordV1 {
  v: 1;
  broker: number;
  /**
   * The store URL holding `object`, present only when it is not the writing broker's own store:
   * a zone-local produce's batches stay in the producer's zone bucket (docs/zone-local.md).
   */
  store?: string;
  object: string;
  objectSize: number;
  topic: string;
  topicId: string | null;
  partition: number;
  baseOffset: number;
  lastOffset: number;
  createdAtMs: number;
  batches: Array<{
    position: number;
    length: number;
    baseOffset: number;
    lastOffset: number;
    crc: number;
    records: number;
  }>;
}

export interface WalMetadataPublisherOptions {
  bootstrap: string[];
  brokerId: number;
  topic?: string;
  partitions?: number;
  replicationFactor?: number;
  retentionMs?: number;
  /** Pieces are grouped per (object, partition) over this window, then sent. */
  flushIntervalMs?: number;
  /** Pieces waiting to be sent; past it new pieces are dropped, counted and logged. */
  maxQueued?: number;
  /** SASL credentials of the sidecar's own client (--metadata-sasl-*). */
  sasl?: SaslCredentials;
  /**
   * TLS to the brokers (--metadata-tls): options for tls.connect, read at every connect (a getter
   * may hand out a reloaded secure context), or true for Node's default CAs.
   */
  tls?: ConnectionOptions | true;
  log: Logger;
}

/** kafkajs names the mechanisms in lower case. */
function kafkajsSasl(credentials: SaslCredentials): SASLOptions {
  const { username } = credentials;
  const password = credentials.password.reveal();
  switch (credentials.mechanism) {
    case 'PLAIN':
      return { mechanism: 'plain', username, password };
    case 'SCRAM-SHA-256':
      return { mechanism: 'scram-sha-256', username, password };
    case 'SCRAM-SHA-512':
      return { mechanism: 'scram-sha-512', username, password };
  }
}

/**
 * Publishes where each piece of the WAL lives, off the produce path: pieces queue in memory,
 * and every flush interval each (object, partition) group becomes one record. A slow or absent
 * metadata topic never delays produce; when the queue is full new pieces are dropped — the
 * objects themselves stay self-describing (their footers index every batch).
 */
export class WalMetadataPublisher {
  readonly stats = { published: 0, records: 0, overflowed: 0, sendFailures: 0 };
  private queue: WalPiece[] = [];
  private producer?: Producer;
  private timer?: NodeJS.Timeout;
  private sending?: Promise<void>;
  private kafka?: Kafka;
  /** kafkajs' CompressionTypes.GZIP, read from the module once loaded. */
  private gzip = 0;
  private ready = false;
  private inFlightPieces = 0;
  private stopped = false;
  private lastOverflowLogMs = 0;
  /** Where the records go (metadataPartitionFor); undefined: kafkajs' partitioner by key. */
  private partition: number | undefined;
  readonly topic: string;

  constructor(private readonly options: WalMetadataPublisherOptions) {
    this.topic = options.topic ?? WAL_METADATA_TOPIC;
  }

  private async client(): Promise<Kafka> {
    if (this.kafka) return this.kafka;
    const { Kafka, logLevel, CompressionTypes } = await loadKafkajs();
    const config: KafkaConfig = {
      clientId: `walproxy-${this.options.brokerId}-metadata`,
      brokers: this.options.bootstrap,
      logLevel: logLevel.NOTHING,
      retry: { retries: 5, initialRetryTime: 200 },
    };
    if (this.options.sasl) config.sasl = kafkajsSasl(this.options.sasl);
    if (this.options.tls) config.ssl = this.options.tls;
    this.gzip = CompressionTypes.GZIP;
    this.kafka = new Kafka(config);
    return this.kafka;
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Pieces in the send under way (0 when none is): published once it is acknowledged. */
  get inFlight(): number {
    return this.inFlightPieces;
  }

  /** Starts in the background: the cluster may still be coming up when the sidecar starts. */
  start(): void {
    void this.connectWithRetry();
    this.timer = setInterval(
      () => void this.flush(),
      this.options.flushIntervalMs ?? METADATA_FLUSH_INTERVAL_MS,
    );
    this.timer.unref();
  }

  private async connectWithRetry(): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        const kafka = await this.client();
        this.partition = await this.ensureTopic(kafka);
        const producer = kafka.producer({ allowAutoTopicCreation: false });
        await producer.connect();
        this.producer = producer;
        this.ready = true;
        this.options.log.info(
          { topic: this.topic, partition: this.partition },
          'WAL metadata publisher connected',
        );
        return;
      } catch (error) {
        if (attempt === 1 || attempt % 10 === 0) {
          this.options.log.warn(
            { error: (error as Error).message, attempt },
            'WAL metadata topic not reachable yet; retrying',
          );
        }
        await new Promise((r) => setTimeout(r, Math.min(5_000, 250 * attempt)));
      }
    }
  }

  /** Creates the topic when it is missing; returns the partition to write (metadataPartitionFor). */
  private async ensureTopic(kafka: Kafka): Promise<number | undefined> {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const existing = await admin.listTopics();
      if (!existing.includes(this.topic)) await this.createTopic(admin);
      const metadata = await admin.fetchTopicMetadata({ topics: [this.topic] });
      return metadataPartitionFor(metadata.topics[0]?.partitions ?? [], this.options.brokerId);
    } finally {
      await admin.disconnect();
    }
  }

  private async createTopic(admin: ReturnType<Kafka['admin']>): Promise<void> {
    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic: this.topic,
          numPartitions: this.options.partitions ?? 3,
          replicationFactor: this.options.replicationFactor ?? 3,
          configEntries: [
            { name: 'retention.ms', value: String(this.options.retentionMs ?? 3_600_000) },
            { name: 'cleanup.policy', value: 'delete' },
          ],
        },
      ],
    });
  }

  publish(piece: WalPiece): void {
    if (this.queue.length >= (this.options.maxQueued ?? 100_000)) {
      this.stats.overflowed++;
      const now = Date.now();
      if (now - this.lastOverflowLogMs > 10_000) {
        this.lastOverflowLogMs = now;
        this.options.log.warn(
          { overflowed: this.stats.overflowed },
          'WAL metadata queue full; dropping records',
        );
      }
      return;
    }
    this.queue.push(piece);
  }

  /** Sends what is queued, one (object, partition) group per record. */
  flush(): Promise<void> {
    if (this.sending || !this.ready || this.queue.length === 0 || !this.producer)
      return this.sending ?? Promise.resolve();
    const pieces = this.queue;
    this.queue = [];
    this.inFlightPieces = pieces.length;
    const partition = this.partition;
    const messages = groupPieces(pieces, this.options.brokerId).map((record) => ({
      key: `${record.topic}-${record.partition}`,
      value: JSON.stringify(record),
      ...(partition === undefined ? {} : { partition }),
    }));
    this.sending = this.producer
      // GZIP (built into kafkajs): the JSON repeats its keys and the object names, and the
      // metadata topic is replicated across zones like any other, so its bytes count.
      .send({ topic: this.topic, acks: -1, compression: this.gzip, messages })
      .then(() => {
        this.stats.published += pieces.length;
        this.stats.records += messages.length;
      })
      .catch((error: Error) => {
        this.stats.sendFailures++;
        // Put them back in front (bounded by maxQueued on the next publish calls).
        this.queue = pieces.concat(this.queue);
        this.options.log.warn(
          { error: error.message, pieces: pieces.length },
          'WAL metadata send failed; will retry',
        );
      })
      .finally(() => {
        this.sending = undefined;
        this.inFlightPieces = 0;
      });
    return this.sending;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.sending;
    await this.flush();
    await this.producer?.disconnect().catch(() => undefined);
  }
}

export function groupPieces(pieces: WalPiece[], brokerId: number): WalMetadataRecordV1[] {
  const groups = new Map<string, WalMetadataRecordV1>();
  for (const p of pieces) {
    const key = `${p.store ?? ''}\u0000${p.objectKey}\u0000${p.topic}\u0000${p.partition}`;
    let record = groups.get(key);
    if (!record) {
      record = {
        v: 1,
        broker: brokerId,
        ...(p.store !== undefined ? { store: p.store } : {}),
        object: p.objectKey,
        objectSize: p.objectSize,
        topic: p.topic,
        topicId: p.topicId ?? null,
        partition: p.partition,
        baseOffset: Number(p.baseOffset),
        lastOffset: Number(p.lastOffset),
        createdAtMs: p.uploadedAtMs,
        batches: [],
      };
      groups.set(key, record);
    }
    record.baseOffset = Math.min(record.baseOffset, Number(p.baseOffset));
    record.lastOffset = Math.max(record.lastOffset, Number(p.lastOffset));
    record.batches.push({
      position: p.position,
      length: p.length,
      baseOffset: Number(p.baseOffset),
      lastOffset: Number(p.lastOffset),
      crc: p.crc,
      records: p.recordCount,
    });
  }
  for (const record of groups.values()) record.batches.sort((a, b) => a.baseOffset - b.baseOffset);
  return [...groups.values()];
}
