import v8 from 'node:v8';
import { AdminServer } from './admin/admin-server.js';
import type { SidecarConfig } from './config/sidecar-config.js';
import { SidecarCostMeter } from './cost/live.js';
import { SaslHandshakeFilter } from './filters/sasl-handshake.js';
import { buildListeners } from './listeners.js';
import type { Logger } from './log.js';
import {
  type MemoryBounds,
  memoryBounds,
  nodeHeapFlags,
  nodeSizeFlagMiB,
  resolveMemoryLimit,
} from './memory-budget.js';
import type { BrokerFence, FenceOutcome } from './net/controller-tap.js';
import type { ListenerCounters } from './net/counters.js';
import type { FrameObserver } from './net/frame-filter.js';
import type { ProxyListener } from './net/proxy-listener.js';
import type { TlsMaterial } from './net/tls-material.js';
import type { StoreHealth } from './store/index.js';
import { Readiness, type StoreReport } from './telemetry/readiness.js';
// Types only: the OpenTelemetry SDK loads in start(), once the listeners are open (startTelemetry).
import type { Telemetry, TelemetryInit } from './telemetry/telemetry.js';
import type { ReportingProbe, WalParts } from './wal-parts.js';
import type { ZoneRouting } from './zone/zone-routing.js';

export { SidecarConfigError } from './sidecar-config-error.js';
export type { WalParts } from './wal-parts.js';

/** How long the WAL's part of a stop (writer, publisher, stores) may take before it is abandoned. */
export const WAL_STOP_TIMEOUT_MS = 1_000;
/**
 * At a stop, how long a client connection may wait for responses that only a filter still holds
 * (the broker answered; a durable ack waits for the store) before it is closed.
 */
export const HELD_RESPONSE_GRACE_MS = 1_000;
/**
 * Once the clients have drained, the replication paths drain for at most this long. Nothing a
 * client waits for is left on them then: a follower's Fetch in flight is a long poll
 * (replica.fetch.wait.max.ms, 500 ms) that the follower repeats from the same offset after it
 * reconnects, and it backs off (replica.fetch.backoff.ms) after any disconnect, a clean one
 * included, so waiting out the poll would only lengthen the restart.
 */
export const REPLICATION_DRAIN_MAX_MS = 250;

/** A stop waits at most this long for the controller to fence the broker (one heartbeat interval, 2 s by default). */
export const FENCE_TIMEOUT_MS = 2_000;
/**
 * After the fence, clients are still served this long: the broker answers their produce
 * NOT_LEADER_OR_FOLLOWER and their Metadata with the new leaders, so they move before the drain.
 */
export const FENCE_SETTLE_MS = 200;

/**
 * One sidecar in a broker's pod:
 * - client ingress → the broker's CLIENT listener (clients and Metadata answers point here);
 * - replication ingress → the broker's REPLICATION listener (followers of this broker's
 *   partitions arrive here, through their own sidecar's egress);
 * - one egress per peer broker id on egressBase+id → that peer's replication ingress (this pod's
 *   broker dials them because peers advertise REPLICATION at localhost:egressBase+id);
 * - one opaque listener per KRaft controller voter on controllerListenBase+id → that controller
 *   (the broker's controller.quorum.voters names them): the broker's heartbeats pass through the
 *   sidecar, so a dead sidecar gets its broker fenced like a dead broker (fate sharing).
 *
 * Lifecycle (issue 12): start opens every listener before anything else and never waits for the
 * store (StoreHealth probes it in the background; until it answers, everything replicates inline);
 * stop drains the clients first while the replication and controller paths keep serving, then the
 * replication paths, and bounds the WAL's part, whatever the store does.
 */
export class Sidecar {
  readonly listeners: ProxyListener[];
  /** The client ingress: drained first at a stop. */
  private readonly clientListeners: ProxyListener[];
  /** Replication ingress and egress: serve (and accept reconnects) until the clients drained. */
  private readonly replicationListeners: ProxyListener[];
  /** The controller path: closed last, so the broker keeps its controller while anything drains. */
  private readonly controllerListeners: ProxyListener[];
  /** Reads the broker's heartbeats on the controller path; a stop fences the broker through it. */
  readonly brokerFence?: BrokerFence;
  private admin?: AdminServer;
  private readonly wal?: WalParts;
  /** Whether the WAL store may be used now; present with --wal-store-url. */
  readonly storeHealth?: StoreHealth;
  readonly #storeProbe?: ReportingProbe;
  /** The bounds every cache and queue got, from --memory-limit-bytes or the cgroup's limit. */
  readonly memory: MemoryBounds;
  #stopping = false;
  #topicNamesStarted?: Promise<void>;
  readonly #telemetryInit: TelemetryInit;
  /** Set by start(): the OpenTelemetry SDK loads once the listeners are open (startTelemetry). */
  #telemetry?: Promise<Telemetry>;
  #telemetryLoaded?: Telemetry;
  #costMeter?: SidecarCostMeter;
  /** Certificates in use, each re-read every second and swapped in for new handshakes when changed. */
  readonly tlsMaterials: TlsMaterial[];
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
    const limit = resolveMemoryLimit(config.memoryLimitBytes);
    this.memory = memoryBounds(limit.limitBytes, limit.source, {
      writerPendingBytes: config.wal?.maxPendingBytes,
      maxBufferedBytes: config.maxBufferedBytes,
    });
    const built = buildListeners(config, {
      log,
      memory: this.memory,
      observer,
      saslHandshake: this.saslHandshake,
    });
    this.clientListeners = built.client;
    this.replicationListeners = built.replication;
    this.controllerListeners = built.controller;
    this.tlsMaterials = built.tlsMaterials;
    if (built.brokerFence) this.brokerFence = built.brokerFence;
    if (built.zoneRouting) this.zoneRouting = built.zoneRouting;
    if (built.wal) {
      this.wal = built.wal;
      this.storeHealth = this.wal.health;
      this.#storeProbe = this.wal.storeProbe;
    }
    this.listeners = [...this.clientListeners, ...this.replicationListeners, ...this.controllerListeners];
    const wal = this.wal;
    const storeHealth = this.storeHealth;
    const zoneRouting = this.zoneRouting;
    const fetchEpochWait = built.fetchEpochWait;
    this.#telemetryInit = {
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
                metadata: () => ({
                  ...wal.publisher.stats,
                  queued: wal.publisher.queued,
                  inFlight: wal.publisher.inFlight,
                }),
                sealing: () => wal.sealing.stats(Date.now()),
                cost: () => this.priceOwnCounters(),
                partitions: () => wal.topicNames.partitions,
              },
            }
          : {}),
        ...(storeHealth ? { store: () => ({ usable: storeHealth.usable }) } : {}),
        memoryLimitBytes: this.memory.limitBytes,
        ...(zoneRouting ? { zone: () => zoneRouting.stats } : {}),
        ...(fetchEpochWait ? { fetchEpochWait: () => fetchEpochWait.stats } : {}),
        tls: () =>
          this.tlsMaterials.map((m) => {
            const { cert, ca } = m.snapshot;
            return { name: m.name, ...(cert ? { cert } : {}), ...(ca ? { ca } : {}) };
          }),
      },
    };
    if (config.adminListen) {
      const readiness = new Readiness({
        upstream: config.clientUpstream,
        stopping: () => this.#stopping,
        ...(storeHealth ? { store: () => this.storeReport()! } : {}),
      });
      this.admin = new AdminServer(
        config.adminListen,
        {
          counters: () => this.counters(),
          healthy: () => true,
          ready: () => readiness.check(),
          // A scrape in the first moments of a start waits for the SDK to load.
          metrics: async () => (await this.#startTelemetry()).prometheusText(),
        },
        log,
      );
    }
  }

  /** The store's state for /readyz and /counters; undefined without a WAL store. */
  storeReport(): StoreReport | undefined {
    const health = this.storeHealth;
    if (!health || !this.wal) return undefined;
    const lastError = health.usable ? undefined : this.#storeProbe?.lastError;
    return {
      url: this.wal.store.url,
      usable: health.usable,
      ...health.stats,
      ...(lastError !== undefined ? { lastError } : {}),
    };
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
    this.#costMeter ??= new SidecarCostMeter(cost.prices, {
      replicationFactor: cost.replicationFactor,
      zones: cost.zones,
    });
    return this.#costMeter.price({
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
    });
  }

  counters(): {
    brokerId: number;
    listeners: Record<string, ListenerCounters>;
    store?: StoreReport;
    wal?: unknown;
    zone?: unknown;
  } {
    const store = this.storeReport();
    return {
      brokerId: this.config.brokerId,
      listeners: Object.fromEntries(this.listeners.map((l) => [l.options.name, l.counters])),
      ...(store ? { store } : {}),
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
              peerStores: this.wal.peerReaders.stats,
              writer: this.wal.writer.stats,
              sealing: this.wal.sealing.stats(Date.now()),
              metadata: {
                ...this.wal.publisher.stats,
                queued: this.wal.publisher.queued,
                inFlight: this.wal.publisher.inFlight,
              },
            },
          }
        : {}),
    };
  }

  /**
   * Opens every listener, then starts what works in the background: the store probe, the topic-id
   * lookups and the metadata publisher. Nothing here waits for the store or the broker, so a
   * sidecar whose store is down (or whose broker is not up yet) serves within milliseconds.
   */
  async start(): Promise<void> {
    for (const material of this.tlsMaterials) material.start();
    try {
      for (const listener of this.listeners) await listener.start();
      await this.admin?.start();
    } catch (error) {
      await this.stop(0);
      throw error;
    }
    if (this.wal) {
      this.storeHealth?.start();
      this.#topicNamesStarted = this.wal.topicNames.start();
      this.wal.publisher.start();
    }
    this.logMemoryBounds();
    this.log.info(
      {
        brokerId: this.config.brokerId,
        listeners: this.listeners.length,
        ...(this.storeHealth ? { store: this.storeHealth.state } : {}),
      },
      'sidecar ready',
    );
    // After ready: the SDK's evaluation is ~0.25 s of a start on a busy machine, and serving does
    // not need it. What it misses meanwhile are a few channel events (spans, histograms) of the
    // first requests; the counters behind the other metrics are read from the parts at each
    // collection, so they miss nothing. start() resolves once it records.
    await this.#startTelemetry();
  }

  /** The telemetry, loading the OpenTelemetry SDK and subscribing the first time. */
  #startTelemetry(): Promise<Telemetry> {
    this.#telemetry ??= import('./telemetry/telemetry.js').then(({ Telemetry }) => {
      const telemetry = new Telemetry(this.#telemetryInit);
      if (!this.#stopping) telemetry.start();
      this.#telemetryLoaded = telemetry;
      return telemetry;
    });
    return this.#telemetry;
  }

  /** The telemetry; after start() resolved. */
  get telemetry(): Telemetry {
    if (this.#telemetryLoaded === undefined) throw new Error('the sidecar has not started its telemetry yet');
    return this.#telemetryLoaded;
  }

  private logMemoryBounds(): void {
    const m = this.memory;
    const mib = (n: number) => Math.round((n / 1_048_576) * 10) / 10;
    const heapLimit = v8.getHeapStatistics().heap_size_limit;
    const initialOldSpace = nodeSizeFlagMiB(process.execArgv, '--initial-old-space-size');
    this.log.info(
      {
        memoryLimitMiB: mib(m.limitBytes),
        source: m.source,
        batchIndexEntries: m.batchIndexEntries,
        metadataQueuePieces: m.metadataQueuePieces,
        writerPendingMiB: mib(m.writerPendingBytes),
        // What the reader applies, not only what the split says: the two differed once.
        readCacheMiB: mib(this.wal?.reader.maxCacheBytes ?? m.readCacheBytes),
        maxBufferedKiB: Math.round(m.maxBufferedBytes / 1024),
        ...(this.zoneRouting
          ? { zoneAcceptances: m.zoneAcceptances, zoneClientRacks: m.zoneClientRacks }
          : {}),
        heapMiB: mib(m.heapBytes),
        v8HeapLimitMiB: mib(heapLimit),
        initialOldSpaceMiB: mib(m.initialOldSpaceBytes),
        v8InitialOldSpaceMiB: initialOldSpace ?? null,
      },
      'memory bounds',
    );
    const flags = nodeHeapFlags(m);
    // A heap allowed to grow past its share lets the container's OOM killer act before the
    // garbage collector does (issue 12, case 10); only meaningful when a real limit is known.
    if (m.source !== 'default' && heapLimit > m.heapBytes * 1.25) {
      this.log.warn(
        { v8HeapLimitMiB: mib(heapLimit), heapMiB: mib(m.heapBytes) },
        `V8's heap limit is above the heap share of --memory-limit-bytes: start node with ${flags.maxOldSpace} (NODE_OPTIONS)`,
      );
    }
    // Without it V8 marks the small heap about once a second under load, a fifth of the CPU
    // (memory-budget.ts); a performance matter, so only where a real limit says what to give.
    if (m.source !== 'default' && initialOldSpace === undefined) {
      this.log.warn(
        { initialOldSpaceMiB: mib(m.initialOldSpaceBytes) },
        `V8's old generation starts small, so it collects the whole heap about once a second under load: start node with ${flags.initialOldSpace} (on node's command line; NODE_OPTIONS does not take it)`,
      );
    }
  }

  /**
   * Stops in the order that costs the clients least (issue 12, case 6):
   * 0. with --fence-on-stop, the controller fences the broker first (BrokerFence): its leaderships
   *    move to the other replicas while every path still serves, so clients find the new leaders
   *    as they would in a broker's controlled shutdown, instead of waiting for the new sidecar;
   * 1. the client ingress stops accepting and reading; responses still due are delivered, so an
   *    acks=all produce in flight completes — its followers still fetch, through the replication
   *    paths, which keep serving and accepting reconnects meanwhile;
   * 2. then the replication ingress and egress drain, and the WAL's part stops, at most
   *    WAL_STOP_TIMEOUT_MS whatever the store does (calls still running are abandoned);
   * 3. the controller path closes last, so the broker has its controller until the sidecar is gone.
   */
  async stop(drainTimeoutMs = this.config.drainTimeoutMs): Promise<void> {
    this.#stopping = true;
    const begun = performance.now();
    const inFlight = Object.fromEntries(
      this.listeners
        .map((l) => [l.options.name, l.requestsInFlight()] as const)
        .filter(([, byApi]) => Object.keys(byApi).length > 0),
    );
    const fence = await this.fenceBroker();
    this.log.info({ inFlight, drainTimeoutMs }, 'draining: clients first, then the replication paths');
    const clientsForced = await drainAll(this.clientListeners, drainTimeoutMs, HELD_RESPONSE_GRACE_MS);
    const clientsMs = performance.now() - begun;
    const [replicationForced] = await Promise.all([
      drainAll(this.replicationListeners, Math.min(REPLICATION_DRAIN_MAX_MS, drainTimeoutMs)),
      this.stopWal(),
    ]);
    const replicationMs = performance.now() - begun - clientsMs;
    await drainAll(this.controllerListeners, 0);
    await this.admin?.stop().catch(() => undefined);
    for (const material of this.tlsMaterials) material.stop();
    await (await this.#telemetry)?.stop();
    this.log.info(
      {
        forcedClosed: clientsForced + replicationForced,
        // A client connection forced closed lost a response; a replication one only cut a
        // follower's long poll, which it repeats after reconnecting (REPLICATION_DRAIN_MAX_MS).
        clientsForcedClosed: clientsForced,
        replicationForcedClosed: replicationForced,
        clientsDrainedMs: Math.round(clientsMs),
        replicationDrainedMs: Math.round(replicationMs),
        stopMs: Math.round(performance.now() - begun),
        ...(fence ? { fencedMs: fence.ms, brokerFenced: fence.fenced } : {}),
      },
      'sidecar stopped',
    );
  }

  /**
   * Step 0 of a stop: the broker fenced, and its clients given FENCE_SETTLE_MS to learn the new
   * leaders from it (NOT_LEADER_OR_FOLLOWER, then Metadata) on connections that still serve. At
   * most FENCE_TIMEOUT_MS when the controller does not answer; without a broker heartbeat seen
   * (its broker already stopped, as in a pod's shutdown) nothing is asked.
   */
  private async fenceBroker(): Promise<FenceOutcome | undefined> {
    if (!this.brokerFence) return undefined;
    const outcome = await this.brokerFence.fence(FENCE_TIMEOUT_MS);
    if (outcome.fenced) {
      this.log.info(
        { fencedMs: outcome.ms, by: outcome.by, settleMs: FENCE_SETTLE_MS },
        'broker fenced for the stop: its leaderships move to the other replicas; its next heartbeat through the restarted sidecar unfences it',
      );
      await new Promise((resolve) => setTimeout(resolve, FENCE_SETTLE_MS));
    } else {
      this.log.info({ reason: outcome.reason, ms: outcome.ms }, 'broker not fenced for the stop');
    }
    return outcome;
  }

  /**
   * The writer seals and settles what it holds, the publisher sends what is queued, the stores
   * close: at most WAL_STOP_TIMEOUT_MS, then abandoned with a log line (a frozen store must not
   * hold the pod's shutdown; tickets still open are the clients' to retry).
   */
  private async stopWal(): Promise<void> {
    const wal = this.wal;
    if (!wal) return;
    this.storeHealth?.stop();
    wal.topicNames.stop();
    // start() arms the refresh timer after its first lookup: stop that one too.
    void this.#topicNamesStarted?.then(() => wal.topicNames.stop());
    // Which step is running, and how long each finished one took: a stop that hits its bound
    // says where it waited.
    let running = 'writer';
    const tookMs: Record<string, number> = {};
    const step = async (name: string, work: () => Promise<unknown>) => {
      running = name;
      const begun = performance.now();
      await work().catch(() => undefined);
      tookMs[name] = Math.round(performance.now() - begun);
    };
    const steps = (async () => {
      await step('writer', () => wal.writer.close());
      await step('publisher', () => wal.publisher.stop());
      await step('peerReaders', () => wal.peerReaders.close());
      await step('store', () => wal.store.close());
    })();
    const finished = await settleWithin(steps, WAL_STOP_TIMEOUT_MS);
    if (!finished) {
      this.log.warn(
        {
          timeoutMs: WAL_STOP_TIMEOUT_MS,
          stillRunning: running,
          tookMs,
          pendingBytes: wal.writer.stats.pendingBytes,
          metadataQueued: wal.publisher.queued,
          metadataInFlight: wal.publisher.inFlight,
        },
        'WAL stop abandoned: the store or the metadata topic did not finish in time',
      );
    }
  }
}

/** Drains the listeners together; resolves with the connections force-closed. */
async function drainAll(
  listeners: ProxyListener[],
  timeoutMs: number,
  heldGraceMs?: number,
): Promise<number> {
  const forced = await Promise.all(
    listeners.map((l) => l.drain(timeoutMs, heldGraceMs === undefined ? {} : { heldGraceMs }).catch(() => 0)),
  );
  return forced.reduce((a, b) => a + b, 0);
}

/** True when `work` settled within `timeoutMs`; false when it was left running. */
async function settleWithin(work: Promise<unknown>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const done = await Promise.race([
    work.then(
      () => true,
      () => true,
    ),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  return done;
}
