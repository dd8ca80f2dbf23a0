// The sidecar's WAL parts, built from its configuration when --wal-store-url is set: the store
// and its health probe, the writer and its sealing policy, the batch index, the metadata topic,
// the readers of this and the peers' stores, and the filters the listeners carry (produce → WAL,
// the leader's fetch strip, the follower's fetch fill, zone-local produce fill).
import type { SidecarConfig } from './config/sidecar-config.js';
import { objectEconomics } from './cost/economics.js';
import { FetchFillFilter } from './filters/fetch-fill.js';
import { FetchStripFilter } from './filters/fetch-strip.js';
import { ProduceWalFilter } from './filters/produce-wal.js';
import type { Logger } from './log.js';
import type { MemoryBounds } from './memory-budget.js';
import { TopicNames } from './metadata/topic-names.js';
import { WalMetadataPublisher } from './metadata/wal-metadata-publisher.js';
import type { TlsMaterial } from './net/tls-material.js';
import { SidecarConfigError } from './sidecar-config-error.js';
import {
  isObjectStoreError,
  type ObjectStore,
  openObjectStore,
  STORE_HEALTH_DEFAULTS,
  StoreHealth,
} from './store/index.js';
import { TopicPolicy } from './topics/topic-policy.js';
import { WalBatchIndex } from './wal/batch-index.js';
import { ProducerWaits, WalWriter } from './wal/index.js';
import { normalizeStoreUrl, PeerStoreReaders } from './wal/peer-store-readers.js';
import { WalRangeReader } from './wal/range-reader.js';
import { SealingPolicy } from './wal/sealing-policy.js';
import { ProduceFillFilter } from './zone/produce-fill.js';

/** The leader-side WAL parts, present when --wal-store-url is set. */
export interface WalParts {
  store: ObjectStore;
  /**
   * Whether the store may be used now: the writer reports every upload to it; while degraded
   * the produce filter copies nothing for topics without durable ack, the strip holds nothing and
   * zone-local produce stores nothing.
   */
  health: StoreHealth;
  writer: WalWriter;
  policy: TopicPolicy;
  /** When objects seal, and which budget groups go through the WAL at all (docs/cost.md). */
  sealing: SealingPolicy;
  /** Produced batches the strip can find again; bounded by maxEntries and age. */
  index: WalBatchIndex;
  topicNames: TopicNames;
  publisher: WalMetadataPublisher;
  produceFilter: ProduceWalFilter;
  /** Leader side of replication: follower fetches get references to stored batches. */
  fetchStrip: FetchStripFilter;
  /** Follower side: the egress marks fetches and fills references back from the store. */
  fetchFill: FetchFillFilter;
  reader: WalRangeReader;
  peerReaders: PeerStoreReaders;
  /** Zone-local produce, leader side: fills references on the zone ingress (with --zone). */
  produceFill?: ProduceFillFilter;
  /** What StoreHealth probes with, and why it last failed. */
  storeProbe: ReportingProbe;
}

/** The store probe StoreHealth runs, reporting each distinct failure once. */
export interface ReportingProbe {
  probe: () => Promise<void>;
  /** Why the last probe failed; undefined after a success. */
  readonly lastError: string | undefined;
}

/**
 * store.validate() (a small put and a delete: the store takes this sidecar's writes), bounded
 * like StoreHealth bounds it. Every store condition is recoverable from the sidecar's side — an
 * unreachable or refusing endpoint, a timeout, a 5xx, but also a missing bucket or denied
 * credentials, which an operator fixes while the broker serves — so none stops the sidecar: each
 * distinct reason is logged once as an error naming --wal-store-url, and probing goes on.
 */
function reportingProbe(store: ObjectStore, log: Logger): ReportingProbe {
  const reported = new Set<string>();
  let lastError: string | undefined;
  const timeoutMs = STORE_HEALTH_DEFAULTS.probeTimeoutMs;
  return {
    get lastError() {
      return lastError;
    },
    probe: async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          store.validate(),
          new Promise((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`the object store did not answer within ${timeoutMs} ms`)),
              timeoutMs,
            );
          }),
        ]);
        lastError = undefined;
        // A new outage after a recovery is reported again.
        reported.clear();
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        const reason = isObjectStoreError(error)
          ? error.code
          : message.startsWith('the object store did not answer')
            ? 'TIMEOUT'
            : message;
        lastError = message;
        if (!reported.has(reason)) {
          reported.add(reason);
          log.error(
            { store: store.url, code: isObjectStoreError(error) ? error.code : undefined },
            `--wal-store-url: the object store is not usable: ${message}; every topic replicates inline until it is (probing every ${STORE_HEALTH_DEFAULTS.probeIntervalMs} ms)`,
          );
        }
        throw error;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export function createWalParts(
  config: SidecarConfig,
  log: Logger,
  metadataMaterial: TlsMaterial | undefined,
  memory: MemoryBounds,
): WalParts {
  const wal = config.wal!;
  let store: ObjectStore;
  try {
    store = openObjectStore(wal.storeUrl, wal.storeOptions);
  } catch (error) {
    throw new SidecarConfigError('wal-store-url', (error as Error).message);
  }
  // Probed in the background from start(): the sidecar serves at once, inline until the store answers.
  const storeProbe = reportingProbe(store, log);
  const health = new StoreHealth({ store: wal.storeUrl, probe: storeProbe.probe, log });
  const { cost } = wal;
  const sealing = new SealingPolicy({
    economics: objectEconomics(cost.prices, { replicationFactor: cost.replicationFactor, zones: cost.zones }),
    maxObjectBytes: wal.defaults.targetBytes,
    exitAfterMs: cost.exitAfterMs,
    enterAfterPayingObjects: cost.enterAfterPayingObjects,
    minDwellMs: cost.minDwellMs,
    rateWindowMs: cost.rateWindowMs,
    // Once per switch: hysteresis keeps them minutes apart.
    onSwitch: (e) =>
      log.info(
        {
          budgetMs: e.budgetMs,
          from: e.from,
          to: e.to,
          savedFraction: Number(e.savedFraction.toFixed(3)),
          bytesPerSec: Math.round(e.bytesPerSec),
        },
        e.to === 'inline'
          ? 'WAL mode switch: this latency budget replicates inline (its objects would not pay)'
          : 'WAL mode switch: this latency budget replicates through the WAL (its objects pay)',
      ),
  });
  const producerWaits = wal.sealWhenProducersWait ? new ProducerWaits() : undefined;
  const writer = new WalWriter({
    store,
    health,
    policy: sealing,
    ...(producerWaits ? { producerWaits } : {}),
    brokerId: config.brokerId,
    targetBytes: wal.defaults.targetBytes,
    maxUploadsInFlight: wal.maxUploadsInFlight,
    uploadDeadlineMs: wal.uploadDeadlineMs,
    maxPendingBytes: Math.max(memory.writerPendingBytes, wal.defaults.targetBytes),
    degradeAfterMs: wal.degradeAfterMs,
    // The store URL carries the prefix (s3://bucket/prefix, file:///dir): one place to set it.
    keyPrefix: '',
  });
  const { sasl, tls } = wal.metadata;
  // Topic ids come from the local broker's loopback listener, the one the client ingress forwards
  // to: it speaks no TLS (the sidecar terminates it), but is SASL_PLAINTEXT on a SASL cluster.
  const topicNames = new TopicNames(config.clientUpstream, log, {
    brokerId: config.brokerId,
    ...(sasl ? { sasl } : {}),
  });
  const publisher = new WalMetadataPublisher({
    ...(sasl ? { sasl } : {}),
    // kafkajs copies these options into tls.connect at every connect, so the getter hands out
    // the material's current (possibly reloaded) context.
    ...(tls
      ? {
          tls: metadataMaterial
            ? {
                get secureContext() {
                  return metadataMaterial.secureContext;
                },
              }
            : (true as const),
        }
      : {}),
    bootstrap: wal.metadata.bootstrap,
    brokerId: config.brokerId,
    topic: wal.metadata.topic,
    partitions: wal.metadata.partitions,
    replicationFactor: wal.metadata.replicationFactor,
    retentionMs: wal.metadata.retentionMs,
    maxQueued: memory.metadataQueuePieces,
    log,
  });
  const policy = new TopicPolicy(wal.defaults, wal.rules);
  const index = new WalBatchIndex({ maxEntries: memory.batchIndexEntries });
  const ownStoreUrl = normalizeStoreUrl(wal.storeUrl);
  // The follower's read cache takes its share of the memory limit (it was left at the reader's
  // 64 MiB default, per store, before); peer-store readers share its budget, so the bound is one
  // for all of them, least recently used span first (PeerStoreReaders).
  const reader = new WalRangeReader({ store, maxCacheBytes: memory.readCacheBytes });
  const peerReaders = new PeerStoreReaders({
    ownStoreUrl,
    ownReader: reader,
    readStoreUrls: wal.readStoreUrls,
    storeOptions: wal.storeOptions,
    maxGlobStores: wal.readStoreMaxOpen,
    idleMs: wal.readStoreIdleMs,
    log,
  });
  // With zones, the zone ingress fills zone-local produce references from the producer's zone
  // bucket (one of --wal-read-store-url); the WAL filter indexes those batches where they are.
  const produceFill = config.zone
    ? new ProduceFillFilter({ readerFor: (url) => peerReaders.readerFor(url), log })
    : undefined;
  const produceFilter = new ProduceWalFilter({
    writer,
    index,
    policy,
    topicNames,
    publisher,
    health,
    sealing,
    ...(producerWaits ? { producerWaits } : {}),
    ...(produceFill
      ? { storedElsewhere: (info, topic, partition) => produceFill.storedElsewhere(info, topic, partition) }
      : {}),
    log,
  });
  const fetchStrip = new FetchStripFilter({
    policy,
    sealing,
    index,
    topicNames,
    maxHoldMs: wal.maxHoldMs,
    storeUrl: ownStoreUrl,
    health,
    log,
  });
  const fetchFill = new FetchFillFilter({
    readerFor: (url) => peerReaders.readerFor(url),
    log,
    fillDeadlineMs: wal.fillDeadlineMs,
  });
  return {
    store,
    health,
    storeProbe,
    writer,
    policy,
    sealing,
    index,
    topicNames,
    publisher,
    produceFilter,
    fetchStrip,
    fetchFill,
    reader,
    peerReaders,
    ...(produceFill ? { produceFill } : {}),
  };
}
