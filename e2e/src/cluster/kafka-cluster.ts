// Over the 600 lines scripts/check-imports.mjs allows (its allow-list says so too): one class that
// starts a whole cluster — controller, brokers, sidecars, their properties and listener wiring —
// which every e2e test uses; not split yet because its parts share the port plan and work dir.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  DEFAULT_MEMORY_LIMIT_BYTES,
  type ListenerCounters,
  memoryBounds,
  nodeHeapFlags,
} from '@walproxy/proxy';
import type { ZoneNetwork } from '../net/zone-network.js';
import {
  kafkaLibDir,
  kafkaLogging,
  kafkaVersion,
  repoRoot,
  sidecarEntry,
  unbundledSidecarEntry,
} from './paths.js';
import { findFreeBase, type PortPlan, portPlan } from './ports.js';
import { ManagedProcess } from './process.js';
import {
  brokerListenerSettings,
  brokerQuorumVoters,
  type ControllerVoter,
  egressBrokerIds,
  sidecarFlags,
} from './topology-rules.js';

export const BROKER_IDS = [1, 2, 3] as const;
export const CONTROLLER_ID = 100;
export const RACKS: Record<number, string> = { 1: 'zone-a', 2: 'zone-b', 3: 'zone-c' };

export interface ClusterOptions {
  /**
   * Put a walproxy sidecar in front of each broker (the design's topology). Default true.
   * 'external': brokers advertise the sidecar ports but the caller runs the sidecars (e.g.
   * in-process, to observe frames).
   */
  sidecars?: boolean | 'external';
  /**
   * Route each broker's KRaft controller traffic through its own sidecar (fate sharing: a dead
   * sidecar gets its broker fenced). Default: true when the harness runs the sidecars; with
   * 'external' sidecars the brokers start before them, so they dial the controller directly.
   */
  controllerThroughSidecar?: boolean;
  kafkaVersion?: string;
  /** Broker heap, e.g. '512m'. */
  brokerHeap?: string;
  /** 'fast-start' uses C1 only (tests); 'throughput' lets C2 compile (benchmarks). */
  jvmProfile?: 'fast-start' | 'throughput';
  /** Extra broker properties (also applied to the controller where they are cluster defaults). */
  brokerProperties?: Record<string, string>;
  /** Extra sidecar CLI arguments per broker id. */
  sidecarArgs?: (brokerId: number) => string[];
  /** Extra environment of the sidecar processes (e.g. AWS credentials for the S3 server). */
  sidecarEnv?: Record<string, string>;
  /** Where to keep logs and data; a fresh temp dir by default. */
  workDir?: string;
  /** Extra `kafka-storage format` arguments, e.g. `--add-scram` to create SCRAM users (KIP-900). */
  formatArgs?: string[];
  /**
   * Run each broker pod (broker + sidecar), the controller and nothing else in the namespaces of
   * this zone network (e2e/src/net/zone-network.ts), as in Kubernetes: every pod has its own
   * `localhost`, and traffic between zones is routed, and counted, by the kernel. The caller
   * creates and removes the network. Absent: every process shares the machine's loopback.
   */
  zones?: ZoneNetwork;
}

const LOG4J2 = `appender.f.type=File
appender.f.name=FILE
appender.f.fileName=\${sys:kafka.logs.dir}/server.log
appender.f.layout.type=PatternLayout
appender.f.layout.pattern=[%d] %p %m (%c)%n
appender.out.type=Console
appender.out.name=STDOUT
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c)%n
appender.out.filter.threshold.type=ThresholdFilter
appender.out.filter.threshold.level=WARN
rootLogger.level=INFO
rootLogger.appenderRef.f.ref=FILE
rootLogger.appenderRef.out.ref=STDOUT
logger.started.name=kafka.server.BrokerServer
logger.started.level=INFO
logger.started.appenderRef.out.ref=STDOUT
logger.req.name=kafka.request.logger
logger.req.level=WARN
`;

/**
 * The same for Kafka 3.x, which logs through log4j 1.x (reload4j, `-Dlog4j.configuration`). The
 * console threshold is per appender, as in LOG4J2 (whose ThresholdFilter also keeps
 * BrokerServer's INFO lines off the console): readiness is read from ports, not from output.
 */
const LOG4J1 = `log4j.rootLogger=INFO, FILE, STDOUT
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=\${kafka.logs.dir}/server.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.STDOUT=org.apache.log4j.ConsoleAppender
log4j.appender.STDOUT.Threshold=WARN
log4j.appender.STDOUT.layout=org.apache.log4j.PatternLayout
log4j.appender.STDOUT.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.BrokerServer=INFO
log4j.logger.kafka.request.logger=WARN
`;

function properties(entries: Record<string, string | number>): string {
  return `${Object.entries(entries)
    .map(([k, v]) => `${k}=${v}`)
    .join('\n')}\n`;
}

/**
 * A local KRaft cluster of stock Apache Kafka: one controller and brokers 1–3 (racks zone-a..c),
 * each with its own data and log directory, optionally each behind a walproxy sidecar.
 *
 * Listener wiring (docs/architecture.md, "Topology"; the rules are in topology-rules.ts, which the Helm
 * chart's test checks too): CLIENT is bound on loopback and advertised at the sidecar's client ingress; the inter-broker REPLICATION listener is advertised at
 * localhost:<egress port of this broker>, so a follower's replica fetcher dials the egress, which
 * forwards to the leader's replication ingress. In this single-namespace layout one egress
 * listener per broker id (hosted by that broker's sidecar) is shared by all followers. DIRECT
 * is an extra listener advertised as itself, the baseline path for benchmarks.
 */
export class KafkaCluster {
  readonly brokers = new Map<number, ManagedProcess>();
  readonly sidecars = new Map<number, ManagedProcess>();
  private controller?: ManagedProcess;
  private readonly libDir: string;
  private readonly classpath: string;
  readonly version: string;

  private constructor(
    readonly ports: PortPlan,
    readonly workDir: string,
    readonly options: ClusterOptions,
  ) {
    this.version = options.kafkaVersion ?? kafkaVersion();
    this.libDir = kafkaLibDir(this.version);
    this.classpath = `${this.libDir}/*`;
  }

  static async start(options: ClusterOptions = {}): Promise<KafkaCluster> {
    const ports = portPlan(await findFreeBase());
    const workDir = options.workDir ?? mkdtempSync(path.join(os.tmpdir(), 'walproxy-cluster-'));
    const cluster = new KafkaCluster(ports, workDir, { sidecars: true, ...options });
    try {
      await cluster.boot();
    } catch (error) {
      await cluster.stop({ keepLogs: true });
      throw error;
    }
    return cluster;
  }

  get withSidecars(): boolean {
    return this.options.sidecars !== false;
  }

  /** Whether brokers reach the controller through their sidecar (topology-rules.ts). */
  get controllerThroughSidecar(): boolean {
    return this.options.controllerThroughSidecar ?? this.options.sidecars === true;
  }

  /** The controller's server.log (fencing and unfencing of brokers is logged there). */
  controllerLogFile(): string {
    return path.join(this.workDir, 'controller', 'logs', 'server.log');
  }

  /** Bootstrap servers for clients: the sidecars' client ingresses (or the brokers without sidecars). */
  bootstrap(): string {
    return BROKER_IDS.map((id) =>
      this.withSidecars
        ? `${this.podAddress(id)}:${this.ports.sidecarClient(id)}`
        : `${this.podAddress(id)}:${this.ports.brokerClient(id)}`,
    ).join(',');
  }

  /** Bootstrap servers of the DIRECT listener: the whole client path bypasses walproxy. */
  directBootstrap(): string {
    return BROKER_IDS.map((id) => `${this.podAddress(id)}:${this.ports.brokerDirect(id)}`).join(',');
  }

  /** The directory holding broker `brokerId`'s partition logs (log.dirs). */
  dataDir(brokerId: number): string {
    return path.join(this.workDir, `broker-${brokerId}`, 'data');
  }

  /** Every broker's log.dirs, by broker id. */
  workDirDataDirs(): Record<number, string> {
    return Object.fromEntries(BROKER_IDS.map((id) => [id, this.dataDir(id)]));
  }

  adminUrl(brokerId: number): string {
    return `http://${this.podAddress(brokerId)}:${this.ports.sidecarAdmin(brokerId)}`;
  }

  /**
   * Where clients and other pods reach broker `brokerId`'s pod: its zone-network address, or
   * loopback when every process shares the machine's network.
   */
  podAddress(brokerId: number): string {
    return this.options.zones ? this.options.zones.pod(brokerId).address : '127.0.0.1';
  }

  private get controllerAddress(): string {
    return this.options.zones ? this.options.zones.controller.address : '127.0.0.1';
  }

  private get controllerVoters(): ControllerVoter[] {
    return [{ id: CONTROLLER_ID, address: `${this.controllerAddress}:${this.ports.controller}` }];
  }

  /** `java`/`node` as started inside the node's namespace (zone network) or directly. */
  private placed(node: number | 'controller', command: string, args: string[]): [string, string[]] {
    const zones = this.options.zones;
    if (!zones) return [command, args];
    const netns = node === 'controller' ? zones.controller.netns : zones.pod(node).netns;
    return ['ip', ['netns', 'exec', netns, command, ...args]];
  }

  /** Runs a Java main class from the resolved Kafka jars (perf tools, topic tool, log dump). */
  javaArgs(mainClass: string, args: string[], heap = '256m'): string[] {
    return [
      `-Xmx${heap}`,
      '-XX:+UseSerialGC',
      '-XX:TieredStopAtLevel=1',
      '-cp',
      this.classpath,
      mainClass,
      ...args,
    ];
  }

  private jvmFlags(heap: string, logDir: string): string[] {
    const profile = this.options.jvmProfile ?? 'fast-start';
    return [
      '-Xms64m',
      `-Xmx${heap}`,
      '-XX:+UseSerialGC',
      ...(profile === 'fast-start' ? ['-XX:TieredStopAtLevel=1'] : []),
      '-Djava.awt.headless=true',
      `-Dkafka.logs.dir=${logDir}`,
      kafkaLogging(this.version) === 'reload4j'
        ? `-Dlog4j.configuration=file:${path.join(this.workDir, 'log4j.properties')}`
        : `-Dlog4j2.configurationFile=${path.join(this.workDir, 'log4j2.properties')}`,
      `-Djava.io.tmpdir=${path.join(this.workDir, 'tmp')}`,
    ];
  }

  private commonProperties(): Record<string, string | number> {
    return {
      'controller.quorum.voters': brokerQuorumVoters(this.controllerVoters),
      'controller.listener.names': 'CONTROLLER',
      'num.network.threads': 2,
      'num.io.threads': 2,
      'background.threads': 2,
      'num.recovery.threads.per.data.dir': 1,
      'log.cleaner.dedupe.buffer.size': 2097152,
      'log.cleaner.threads': 1,
      'group.coordinator.threads': 1,
      'share.coordinator.threads': 1,
      'num.partitions': 3,
      'default.replication.factor': 3,
      'min.insync.replicas': 2,
      'offsets.topic.replication.factor': 3,
      'offsets.topic.num.partitions': 3,
      'transaction.state.log.replication.factor': 3,
      'transaction.state.log.min.isr': 2,
      'transaction.state.log.num.partitions': 3,
      'share.coordinator.state.topic.replication.factor': 3,
      'share.coordinator.state.topic.min.isr': 2,
      'share.coordinator.state.topic.num.partitions': 3,
      'group.initial.rebalance.delay.ms': 0,
      'auto.create.topics.enable': 'false',
      'auto.leader.rebalance.enable': 'false',
      'broker.heartbeat.interval.ms': 500,
      'broker.session.timeout.ms': 6000,
      ...this.options.brokerProperties,
    };
  }

  private brokerProperties(id: number): Record<string, string | number> {
    const p = this.ports;
    return {
      'process.roles': 'broker',
      'node.id': id,
      ...brokerListenerSettings({
        brokerId: id,
        // Behind a sidecar the data listeners are the pod's loopback; without one (the stock
        // baseline) they are what other pods and clients reach.
        upstreamHost: this.withSidecars ? '127.0.0.1' : this.podAddress(id),
        clientUpstreamPort: p.brokerClient(id),
        replicationUpstreamPort: p.brokerReplication(id),
        clientAdvertisedHost: this.podAddress(id),
        clientAdvertisedPort: p.sidecarClient(id),
        egressBase: p.egress(0),
        rack: RACKS[id]!,
        withSidecar: this.withSidecars,
        extraListeners: [
          {
            name: 'DIRECT',
            bind: `${this.podAddress(id)}:${p.brokerDirect(id)}`,
            advertised: `${this.podAddress(id)}:${p.brokerDirect(id)}`,
          },
        ],
      }),
      'replica.selector.class': 'org.apache.kafka.common.replica.RackAwareReplicaSelector',
      'log.dirs': this.dataDir(id),
      ...this.commonProperties(),
      // After the common settings: a broker behind its sidecar names the sidecar's controller
      // listeners in its own pod, while the controller keeps the real address.
      ...(this.controllerThroughSidecar
        ? {
            'controller.quorum.voters': brokerQuorumVoters(this.controllerVoters, {
              host: '127.0.0.1',
              base: p.sidecarControllerBase(id, CONTROLLER_ID),
            }),
          }
        : {}),
    };
  }

  private async boot(): Promise<void> {
    mkdirSync(path.join(this.workDir, 'tmp'), { recursive: true });
    const reload4j = kafkaLogging(this.version) === 'reload4j';
    // Diagnosis (e2e/bench/rolling-restart-timeline.ts): BROKER_DEBUG_LOGGERS="a.b.C,d.e" logs
    // those loggers at DEBUG in every broker's and the controller's server.log.
    const debugLoggers = (process.env.BROKER_DEBUG_LOGGERS ?? '').split(',').filter(Boolean);
    if (reload4j)
      writeFileSync(
        path.join(this.workDir, 'log4j.properties'),
        LOG4J1 + debugLoggers.map((l) => `log4j.logger.${l}=DEBUG\n`).join(''),
      );
    else
      writeFileSync(
        path.join(this.workDir, 'log4j2.properties'),
        LOG4J2 +
          debugLoggers.map((l, i) => `logger.debug${i}.name=${l}\nlogger.debug${i}.level=DEBUG\n`).join(''),
      );
    writeFileSync(
      path.join(this.workDir, 'controller.properties'),
      properties({
        'process.roles': 'controller',
        'node.id': CONTROLLER_ID,
        listeners: `CONTROLLER://${this.controllerAddress}:${this.ports.controller}`,
        'log.dirs': path.join(this.workDir, 'controller', 'data'),
        ...this.commonProperties(),
      }),
    );
    for (const id of BROKER_IDS) {
      writeFileSync(
        path.join(this.workDir, `broker-${id}.properties`),
        properties(this.brokerProperties(id)),
      );
    }
    this.format();
    await this.startController();
    // As in a Kubernetes pod with a native sidecar: the sidecar first (it serves without its
    // broker), then the broker, which reaches its controller through it.
    if (this.options.sidecars === true) await Promise.all(BROKER_IDS.map((id) => this.startSidecar(id)));
    await Promise.all(BROKER_IDS.map((id) => this.startBroker(id)));
  }

  /** `kafka-storage format` for every node, with one cluster id and a static quorum (kraft.version 0). */
  private format(): void {
    const run = (args: string[]) => {
      const result = spawnSync('java', this.javaArgs('kafka.tools.StorageTool', args), { encoding: 'utf8' });
      if (result.status !== 0)
        throw new Error(`StorageTool ${args.join(' ')} failed:\n${result.stderr}${result.stdout}`);
      return result.stdout.trim();
    };
    const clusterId = run(['random-uuid']);
    const files = ['controller.properties', ...BROKER_IDS.map((id) => `broker-${id}.properties`)];
    const extra = this.options.formatArgs ?? [];
    for (const file of files) run(['format', '-t', clusterId, '-c', path.join(this.workDir, file), ...extra]);
  }

  private async startController(): Promise<void> {
    const logDir = path.join(this.workDir, 'controller', 'logs');
    mkdirSync(logDir, { recursive: true });
    this.controller = new ManagedProcess(
      'controller',
      ...this.placed('controller', 'java', [
        ...this.jvmFlags('256m', logDir),
        '-cp',
        this.classpath,
        'kafka.Kafka',
        path.join(this.workDir, 'controller.properties'),
      ]),
      path.join(logDir, 'stdout.log'),
    );
    await waitForPort(this.ports.controller, 60_000, this.controller, this.controllerAddress);
  }

  async startBroker(id: number): Promise<void> {
    const logDir = path.join(this.workDir, `broker-${id}`, 'logs');
    mkdirSync(logDir, { recursive: true });
    const broker = new ManagedProcess(
      `broker-${id}`,
      ...this.placed(id, 'java', [
        ...this.jvmFlags(this.options.brokerHeap ?? '512m', logDir),
        '-cp',
        this.classpath,
        'kafka.Kafka',
        path.join(this.workDir, `broker-${id}.properties`),
      ]),
      path.join(logDir, 'stdout.log'),
    );
    this.brokers.set(id, broker);
    await waitForPort(this.ports.brokerDirect(id), 90_000, broker, this.podAddress(id));
  }

  /** Sends `signal` and waits for the exit (SIGKILL after `graceMs`: a controlled shutdown takes a while). */
  async stopBroker(id: number, signal: NodeJS.Signals = 'SIGTERM', graceMs = 60_000): Promise<void> {
    await this.brokers.get(id)?.stop(signal, graceMs);
  }

  sidecarArguments(id: number): string[] {
    const p = this.ports;
    const pod = this.podAddress(id);
    return [
      'sidecar',
      ...sidecarFlags({
        brokerId: id,
        clientListen: `${pod}:${p.sidecarClient(id)}`,
        clientUpstream: `127.0.0.1:${p.brokerClient(id)}`,
        replicationListen: `${pod}:${p.sidecarReplication(id)}`,
        replicationUpstream: `127.0.0.1:${p.brokerReplication(id)}`,
        egressBase: p.egress(0),
        egressBrokerIds: egressBrokerIds(
          this.options.zones ? 'pod-namespace' : 'shared-namespace',
          id,
          BROKER_IDS,
        ),
        peers: {
          addresses: BROKER_IDS.map(
            (peer) => [peer, `${this.podAddress(peer)}:${p.sidecarReplication(peer)}`] as const,
          ),
        },
        adminListen: `${pod}:${p.sidecarAdmin(id)}`,
        ...(this.controllerThroughSidecar
          ? {
              controllers: {
                listenBase: p.sidecarControllerBase(id, CONTROLLER_ID),
                voters: this.controllerVoters,
              },
            }
          : {}),
      }),
      ...(this.options.sidecarArgs?.(id) ?? []),
    ];
  }

  /**
   * Every `listen=upstream` pair sidecar `id` relays, as bare-pipe.ts takes them: its client and
   * replication ingresses, an egress per broker it dials (forwarding to that broker's replication
   * ingress) and, with fate sharing, the controller path. What a bare pipe needs to stand in for
   * the sidecar on the same addresses.
   */
  barePipePairs(id: number): string[] {
    const p = this.ports;
    const pod = this.podAddress(id);
    const layout = this.options.zones ? 'pod-namespace' : 'shared-namespace';
    return [
      `${pod}:${p.sidecarClient(id)}=127.0.0.1:${p.brokerClient(id)}`,
      `${pod}:${p.sidecarReplication(id)}=127.0.0.1:${p.brokerReplication(id)}`,
      ...egressBrokerIds(layout, id, BROKER_IDS).map(
        (peer) => `127.0.0.1:${p.egress(peer)}=${this.podAddress(peer)}:${p.sidecarReplication(peer)}`,
      ),
      // Without this pair the broker would be cut off from its controller, fenced, and lose its
      // partitions' leadership.
      ...(this.controllerThroughSidecar
        ? this.controllerVoters.map(
            (v) => `127.0.0.1:${p.sidecarControllerBase(id, CONTROLLER_ID) + v.id}=${v.address}`,
          )
        : []),
    ];
  }

  /**
   * A bare `socket.pipe()` relay (bare-pipe.ts) on sidecar `id`'s addresses, in its pod: stop the
   * sidecar first. For the benchmarks' floor arms; it has no admin endpoint.
   */
  async startBarePipe(id: number): Promise<ManagedProcess> {
    const pipe = new ManagedProcess(
      `bare-pipe-${id}`,
      ...this.placed(id, process.execPath, [
        '--import',
        'tsx',
        path.join(repoRoot(), 'e2e', 'src', 'cluster', 'bare-pipe.ts'),
        ...this.barePipePairs(id),
      ]),
      path.join(this.workDir, `bare-pipe-${id}.log`),
    );
    await pipe.waitForOutput(/bare pipe ready/, 30_000);
    return pipe;
  }

  async startSidecar(id: number): Promise<void> {
    const logDir = path.join(this.workDir, `sidecar-${id}`);
    mkdirSync(logDir, { recursive: true });
    // Opt-in (benchmarks): a V8 CPU profile of this sidecar, written when it exits. Not WALPROXY_*:
    // the sidecar's CLI reads those variables as its own flags.
    const profileDir = process.env.SIDECAR_CPU_PROF_DIR;
    const profile = profileDir
      ? [
          '--cpu-prof',
          `--cpu-prof-dir=${profileDir}`,
          `--cpu-prof-name=sidecar-${id}.${Date.now()}.cpuprofile`,
        ]
      : [];
    // V8's initial old generation as the Helm chart starts the sidecar (for the limit the sidecar
    // derives its bounds from here: the default), before the opt-in flags so that they can
    // override it (a bench's baseline arm: --initial-old-space-size=0 is V8's default).
    const heap = nodeHeapFlags(memoryBounds(DEFAULT_MEMORY_LIMIT_BYTES, 'default'));
    // Opt-in (benchmarks): node's own flags for the sidecar, e.g. a V8 heap setting to compare.
    const nodeFlags = (process.env.SIDECAR_NODE_FLAGS ?? '').split(/\s+/).filter((f) => f !== '');
    // Opt-in (benchmarks): extra environment for the sidecar only, "K=V K=V" (e.g. glibc's
    // MALLOC_* tunables), so that the brokers and client tools started beside it do not get it.
    const extraEnv = sidecarExtraEnv(process.env.SIDECAR_EXTRA_ENV);
    const sidecar = new ManagedProcess(
      `sidecar-${id}`,
      ...this.placed(id, process.execPath, [
        heap.initialOldSpace,
        ...nodeFlags,
        ...profile,
        profileDir ? unbundledSidecarEntry() : sidecarEntry(),
        ...this.sidecarArguments(id),
      ]),
      path.join(logDir, 'sidecar.log'),
      {
        ...sidecarProcessEnv(process.env),
        WALPROXY_LOG_LEVEL: process.env.WALPROXY_LOG_LEVEL ?? 'info',
        ...this.options.sidecarEnv,
        ...extraEnv,
      },
    );
    this.sidecars.set(id, sidecar);
    await sidecar.waitForOutput(/"msg":"sidecar ready"/, 30_000);
  }

  async stopSidecar(id: number, signal: NodeJS.Signals = 'SIGTERM', graceMs = 30_000): Promise<void> {
    await this.sidecars.get(id)?.stop(signal, graceMs);
  }

  /** The sidecar's counters, from its admin endpoint. */
  async sidecarCounters(id: number): Promise<SidecarCounters> {
    const response = await fetch(`${this.adminUrl(id)}/counters`);
    if (!response.ok) throw new Error(`sidecar ${id} counters: HTTP ${response.status}`);
    return (await response.json()) as SidecarCounters;
  }

  /**
   * Stops everything: brokers, then sidecars (as the kubelet stops a pod with a native sidecar: a
   * broker's controlled shutdown needs its controller, which it reaches through the sidecar), then
   * the controller. Logs and data are removed unless `keepLogs`.
   */
  async stop({ keepLogs = false }: { keepLogs?: boolean } = {}): Promise<void> {
    await Promise.all([...this.brokers.values()].map((b) => b.stop('SIGTERM', 15_000)));
    await Promise.all([...this.sidecars.values()].map((s) => s.stop('SIGTERM', 5_000)));
    await this.controller?.stop('SIGTERM', 10_000);
    if (keepLogs) {
      const kept = path.join(repoRoot(), 'e2e', '.runs', path.basename(this.workDir));
      mkdirSync(path.dirname(kept), { recursive: true });
      spawnSync('cp', ['-r', this.workDir, kept]);
      rmSync(this.workDir, { recursive: true, force: true });
      console.error(`[harness] cluster logs kept in ${kept}`);
    } else {
      rmSync(this.workDir, { recursive: true, force: true });
    }
  }
}

/**
 * The test runner's environment for a sidecar, without the harness's own WALPROXY_* switches:
 * the sidecar reads every WALPROXY_* variable as a flag (yargs env prefix) and refuses unknown
 * ones, so WALPROXY_KEEP_LOGS=1 would make every sidecar exit 2.
 */
export function sidecarProcessEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { WALPROXY_KEEP_LOGS: _keepLogs, SIDECAR_EXTRA_ENV: _extra, ...rest } = env;
  // The fuzz tests' seed and case counts (e2e/src/fuzz/mutations.ts) are the test run's, not flags.
  return Object.fromEntries(Object.entries(rest).filter(([name]) => !name.startsWith('WALPROXY_FUZZ_')));
}

/** SIDECAR_EXTRA_ENV's "K=V K=V" as variables; a word without '=' is an error, not ignored. */
export function sidecarExtraEnv(spec: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const word of (spec ?? '').split(/\s+/).filter((w) => w !== '')) {
    const eq = word.indexOf('=');
    if (eq <= 0) throw new Error(`SIDECAR_EXTRA_ENV: '${word}' is not NAME=value`);
    out[word.slice(0, eq)] = word.slice(eq + 1);
  }
  return out;
}

export interface SidecarCounters {
  brokerId: number;
  listeners: Record<string, ListenerCounters>;
  /** Present when the sidecar runs with a WAL store. */
  wal?: {
    produce: Record<string, number>;
    writer: Record<string, number>;
    metadata: Record<string, number>;
    fetchStrip?: Record<string, unknown>;
    fetchFill?: Record<string, unknown>;
    /** The sealing policy's latency-budget groups: each one's mode now. */
    sealing?: Array<{ budgetMs: number; mode: 'wal' | 'inline' }>;
  };
}

export async function waitForPort(
  port: number,
  timeoutMs: number,
  owner?: ManagedProcess,
  host = '127.0.0.1',
): Promise<void> {
  const net = await import('node:net');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host, port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (owner && !owner.running) {
      throw new Error(
        `${owner.name} exited before listening on ${port}; log ${owner.logFile}:\n${owner.output().slice(-3000)}`,
      );
    }
    if (Date.now() > deadline) throw new Error(`${host}:${port} not listening after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
