import { AdminServer } from './admin/admin-server.js';
import { peerAddress, type SidecarConfig } from './config.js';
import { objectEconomics } from './cost/economics.js';
import { priceSidecar } from './cost/live.js';
import { ApiVersionsFilter } from './filters/api-versions.js';
import { FetchFillFilter } from './filters/fetch-fill.js';
import { FetchStripFilter } from './filters/fetch-strip.js';
import { ProduceWalFilter } from './filters/produce-wal.js';
import { SaslHandshakeFilter } from './filters/sasl-handshake.js';
import type { Logger } from './log.js';
import { TopicNames } from './metadata/topic-names.js';
import { WalMetadataPublisher } from './metadata/wal-metadata-publisher.js';
import type { ListenerCounters } from './net/counters.js';
import type { FrameFilter, FrameObserver } from './net/frame-filter.js';
import { ProxyListener } from './net/proxy-listener.js';
import { TlsFileError, type TlsFiles, TlsMaterial } from './net/tls-material.js';
import { isObjectStoreError, type ObjectStore, openObjectStore } from './store/index.js';
import { StoreHealth } from './store/store-health.js';
import { Readiness, Telemetry, type TelemetryInit } from './telemetry/index.js';
import { TopicPolicy } from './topics/topic-policy.js';
import { WalBatchIndex } from './wal/batch-index.js';
import { WalWriter } from './wal/index.js';
import { normalizeStoreUrl, PeerStoreReaders } from './wal/peer-store-readers.js';
import { WalRangeReader } from './wal/range-reader.js';
import { SealingPolicy } from './wal/sealing-policy.js';
import { FilterChain } from './zone/filter-chain.js';
import { ZoneRouting } from './zone/zone-routing.js';

/** A startup failure that is the operator's to fix (exit code 2), naming the flag. */
export class SidecarConfigError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(`--${flag}: ${message}`);
  }
}

/** The leader-side WAL parts, present when --wal-store-url is set. */
export interface WalParts {
  store: ObjectStore;
  /**
   * Whether the store may be used now: the writer reports every upload to it; while degraded
   * the produce filter copies nothing for topics without durable ack and the strip holds nothing.
   */
  health: StoreHealth;
  writer: WalWriter;
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
}

/**
 * One sidecar in a broker's pod:
 * - client ingress → the broker's CLIENT listener (clients and Metadata answers point here);
 * - replication ingress → the broker's REPLICATION listener (followers of this broker's
 *   partitions arrive here, through their own sidecar's egress);
 * - one egress per peer broker id on egressBase+id → that peer's replication ingress (this pod's
 *   broker dials them because peers advertise REPLICATION at localhost:egressBase+id).
 */
export class Sidecar {
  readonly listeners: ProxyListener[] = [];
  private admin?: AdminServer;
  private readonly wal?: WalParts;
  readonly telemetry: Telemetry;
  /** Certificates in use, each re-read every second and swapped in for new handshakes when changed. */
  readonly tlsMaterials: TlsMaterial[] = [];
  readonly saslHandshake = new SaslHandshakeFilter();
  /** Zone-local routing of clients, present with --zone. */
  readonly zoneRouting?: ZoneRouting;

  constructor(
    readonly config: SidecarConfig,
    private readonly log: Logger,
    observer?: FrameObserver,
    /** Telemetry flags, and for tests extra span processors / metric readers. */
    telemetry: Partial<Omit<TelemetryInit, 'sources' | 'log'>> = {},
  ) {
    const common = {
      maxFrameBytes: config.maxFrameBytes,
      maxBufferedBytes: config.maxBufferedBytes,
      log,
      ...(observer ? { observer } : {}),
    };
    const filters: FrameFilter[] = [new ApiVersionsFilter(), this.saslHandshake];
    const material = (files: TlsFiles, name: string, flagPrefix: string) => {
      try {
        const loaded = new TlsMaterial(files, { name, log });
        this.tlsMaterials.push(loaded);
        return loaded;
      } catch (error) {
        // Validated at parse time; the files changed in between.
        if (error instanceof TlsFileError)
          throw new SidecarConfigError(`${flagPrefix}-${error.role}`, error.message);
        throw error;
      }
    };
    const metadataTls = config.wal?.metadata.tls;
    const metadataMaterial =
      metadataTls && Object.keys(metadataTls.files).length > 0
        ? material(metadataTls.files, 'metadata client', 'metadata-tls')
        : undefined;
    if (config.wal) this.wal = createWalParts(config, log, metadataMaterial);
    // Only the client ingress sees Produce; followers only fetch.
    const clientFilters = this.wal ? [...filters, this.wal.produceFilter] : filters;
    const clientTls = config.clientTls
      ? {
          material: material(config.clientTls.files, 'client ingress', 'client-tls'),
          clientAuth: config.clientTls.clientAuth,
        }
      : undefined;
    const peerTls = config.peerTls;
    const peerMaterial = peerTls ? material(peerTls.files, 'peer client', 'peer-tls') : undefined;
    const upstreamTlsFor = (id: number) =>
      peerTls && peerMaterial
        ? {
            material: peerMaterial,
            verifyHostname: peerTls.verifyHostname,
            ...(peerTls.serverName !== undefined
              ? { serverName: peerTls.serverName.replaceAll('{id}', String(id)) }
              : {}),
          }
        : undefined;
    if (config.zone) {
      this.zoneRouting = new ZoneRouting({
        ...common,
        brokerId: config.brokerId,
        zone: config.zone,
        clientUpstream: config.clientUpstream,
        brokerFilters: clientFilters,
        peerFilters: filters,
        ...(clientTls ? { clientTls } : {}),
        ...(config.replicationTls
          ? {
              ingressTls: {
                material: material(config.replicationTls.files, 'zone ingress', 'replication-tls'),
                clientAuth: config.replicationTls.clientAuth,
              },
            }
          : {}),
        upstreamTls: upstreamTlsFor,
      });
    }
    this.listeners.push(
      new ProxyListener({
        ...common,
        name: 'client',
        listen: config.clientListen,
        upstream: config.clientUpstream,
        filters: this.zoneRouting
          ? [new FilterChain([...clientFilters, this.zoneRouting.clientIngressFilter])]
          : clientFilters,
        ...(clientTls ? { tls: clientTls } : {}),
      }),
    );
    if (config.replicationListen && config.replicationUpstream) {
      this.listeners.push(
        new ProxyListener({
          ...common,
          name: 'replication',
          listen: config.replicationListen,
          upstream: config.replicationUpstream,
          filters: this.wal ? [...filters, this.wal.fetchStrip] : filters,
          ...(config.replicationTls
            ? {
                tls: {
                  material: material(config.replicationTls.files, 'replication ingress', 'replication-tls'),
                  clientAuth: config.replicationTls.clientAuth,
                },
              }
            : {}),
        }),
      );
    }
    for (const id of config.egressBrokerIds) {
      const upstreamTls = upstreamTlsFor(id);
      this.listeners.push(
        new ProxyListener({
          ...common,
          name: `egress-${id}`,
          listen: { host: config.egressListenHost, port: config.egressListenBase! + id },
          upstream: peerAddress(config, id),
          filters: this.wal ? [...filters, this.wal.fetchFill] : filters,
          ...(upstreamTls ? { upstreamTls } : {}),
        }),
      );
    }
    if (this.zoneRouting) this.listeners.push(...this.zoneRouting.listeners);
    const wal = this.wal;
    this.telemetry = new Telemetry({
      ...telemetry,
      log,
      sources: {
        brokerId: config.brokerId,
        listeners: () => this.listeners.map((l) => ({ name: l.options.name, counters: l.counters })),
        ...(wal
          ? {
              wal: {
                produce: () => wal.produceFilter.stats,
                fetchStrip: () => wal.fetchStrip.stats,
                fetchFill: () => wal.fetchFill.stats,
                reader: () => wal.reader.stats,
                writer: () => wal.writer.stats,
                metadata: () => ({ ...wal.publisher.stats, queued: wal.publisher.queued }),
                sealing: () => wal.sealing.stats(Date.now()),
                cost: () => this.priceOwnCounters(),
              },
            }
          : {}),
      },
    });
    if (config.adminListen) {
      const readiness = new Readiness({
        upstream: config.clientUpstream,
        ...(wal ? { store: wal.store } : {}),
      });
      this.admin = new AdminServer(
        config.adminListen,
        {
          counters: () => this.counters(),
          healthy: () => true,
          ready: () => readiness.check(),
          metrics: () => this.telemetry.prometheusText(),
        },
        log,
      );
    }
  }

  /** This sidecar's replication since it started, priced from its own counters (walproxy.cost.*). */
  priceOwnCounters() {
    const wal = this.wal!;
    const cost = this.config.wal!.cost;
    let fromDownstream = 0;
    let fromUpstream = 0;
    for (const { counters } of this.listeners) {
      fromDownstream += counters.bytesFromDownstream;
      fromUpstream += counters.bytesFromUpstream;
    }
    const cpu = process.cpuUsage();
    return priceSidecar(
      {
        bytesReferenced: wal.fetchStrip.stats.bytesReferenced,
        inlineBytes: wal.fetchStrip.stats.inlineBytes,
        uploadAttempts: wal.writer.stats.uploadAttempts,
        bytesUploaded: wal.writer.stats.bytesUploaded,
        gets: wal.reader.stats.gets,
        bytesFetched: wal.reader.stats.bytesFetched,
        bytesFromDownstream: fromDownstream,
        bytesFromUpstream: fromUpstream,
        cpuSeconds: (cpu.user + cpu.system) / 1e6,
        uptimeSeconds: process.uptime(),
      },
      cost.prices,
      { replicationFactor: cost.replicationFactor, zones: cost.zones },
    );
  }

  counters(): {
    brokerId: number;
    listeners: Record<string, ListenerCounters>;
    wal?: unknown;
    zone?: unknown;
  } {
    return {
      brokerId: this.config.brokerId,
      listeners: Object.fromEntries(this.listeners.map((l) => [l.options.name, l.counters])),
      ...(this.zoneRouting ? { zone: this.zoneRouting.stats } : {}),
      ...(this.wal
        ? {
            wal: {
              health: this.wal.health.stats,
              batchIndex: this.wal.index.stats,
              produce: this.wal.produceFilter.stats,
              fetchStrip: this.wal.fetchStrip.stats,
              fetchFill: this.wal.fetchFill.stats,
              reader: this.wal.reader.stats,
              writer: this.wal.writer.stats,
              sealing: this.wal.sealing.stats(Date.now()),
              metadata: { ...this.wal.publisher.stats, queued: this.wal.publisher.queued },
            },
          }
        : {}),
    };
  }

  async start(): Promise<void> {
    this.telemetry.start();
    if (this.wal) {
      try {
        await this.wal.store.validate();
      } catch (error) {
        const reason = isObjectStoreError(error) ? error.message : String(error);
        await this.telemetry.stop();
        throw new SidecarConfigError('wal-store-url', `the object store is not usable: ${reason}`);
      }
      // The validation just proved the store usable; the probe takes over when it degrades.
      this.wal.health.markHealthy('startup validation');
      this.wal.health.start();
      await this.wal.topicNames.start();
      this.wal.publisher.start();
    }
    for (const material of this.tlsMaterials) material.start();
    try {
      for (const listener of this.listeners) await listener.start();
      await this.admin?.start();
    } catch (error) {
      await this.stop(0);
      throw error;
    }
    this.log.info({ brokerId: this.config.brokerId, listeners: this.listeners.length }, 'sidecar ready');
  }

  /** Stops accepting, lets in-flight requests finish for up to `drainTimeoutMs`, then closes. */
  async stop(drainTimeoutMs = this.config.drainTimeoutMs): Promise<void> {
    const forced = await Promise.all(this.listeners.map((l) => l.drain(drainTimeoutMs).catch(() => 0)));
    if (this.wal) {
      // Uploads still running finish (or fail) before the process exits, so no durable-ack
      // producer is left waiting on a batch that was about to be stored.
      this.wal.health.stop();
      await this.wal.writer.close().catch(() => undefined);
      await this.wal.publisher.stop().catch(() => undefined);
      this.wal.topicNames.stop();
      await this.wal.peerReaders.close();
      await this.wal.store.close().catch(() => undefined);
    }
    await this.admin?.stop().catch(() => undefined);
    for (const material of this.tlsMaterials) material.stop();
    await this.telemetry.stop();
    this.log.info({ forcedClosed: forced.reduce((a, b) => a + b, 0) }, 'sidecar stopped');
  }
}

function createWalParts(config: SidecarConfig, log: Logger, metadataMaterial?: TlsMaterial): WalParts {
  const wal = config.wal!;
  let store: ObjectStore;
  try {
    store = openObjectStore(wal.storeUrl, wal.storeOptions);
  } catch (error) {
    throw new SidecarConfigError('wal-store-url', (error as Error).message);
  }
  const health = new StoreHealth({ store: wal.storeUrl, probe: () => store.validate(), log });
  const { cost } = wal;
  const sealing = new SealingPolicy({
    economics: objectEconomics(cost.prices, { replicationFactor: cost.replicationFactor, zones: cost.zones }),
    maxObjectBytes: wal.defaults.targetBytes,
    exitAfterMs: cost.exitAfterMs,
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
  const writer = new WalWriter({
    store,
    health,
    policy: sealing,
    brokerId: config.brokerId,
    targetBytes: wal.defaults.targetBytes,
    maxUploadsInFlight: wal.maxUploadsInFlight,
    uploadDeadlineMs: wal.uploadDeadlineMs,
    maxPendingBytes: wal.maxPendingBytes,
    degradeAfterMs: wal.degradeAfterMs,
    // The store URL carries the prefix (s3://bucket/prefix, file:///dir): one place to set it.
    keyPrefix: '',
  });
  const { sasl, tls } = wal.metadata;
  // Topic ids come from the local broker's loopback listener, the one the client ingress forwards
  // to: it speaks no TLS (the sidecar terminates it), but is SASL_PLAINTEXT on a SASL cluster.
  const topicNames = new TopicNames(config.clientUpstream, log, sasl ? { sasl } : {});
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
    log,
  });
  const policy = new TopicPolicy(wal.defaults, wal.rules);
  const index = new WalBatchIndex();
  const produceFilter = new ProduceWalFilter({
    writer,
    index,
    policy,
    topicNames,
    publisher,
    health,
    sealing,
    log,
  });
  const ownStoreUrl = normalizeStoreUrl(wal.storeUrl);
  const fetchStrip = new FetchStripFilter({
    policy,
    index,
    topicNames,
    maxHoldMs: wal.maxHoldMs,
    storeUrl: ownStoreUrl,
    health,
    log,
  });
  const reader = new WalRangeReader({ store });
  const peerReaders = new PeerStoreReaders(ownStoreUrl, reader, wal.readStoreUrls, wal.storeOptions, log);
  const fetchFill = new FetchFillFilter({ readerFor: (url) => peerReaders.readerFor(url), log });
  return {
    store,
    health,
    writer,
    sealing,
    index,
    topicNames,
    publisher,
    produceFilter,
    fetchStrip,
    fetchFill,
    reader,
    peerReaders,
  };
}
