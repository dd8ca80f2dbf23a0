// `walproxy sidecar`'s flags (raw values as yargs collects them) into one validated SidecarConfig.
import { readFileSync } from 'node:fs';
import { DEFAULT_PRICES, mergePrices, type PriceTable } from '../cost/prices.js';
import { FETCH_FILL_DEADLINE_MS } from '../filters/fetch-fill.js';
import { MIN_MEMORY_LIMIT_BYTES } from '../memory-budget.js';
import type { HostPort } from '../net/proxy-listener.js';
import type { ObjectStoreOptions } from '../store/index.js';
import { parseTopicConfig, type TopicRule, type TopicSettings } from '../topics/topic-policy.js';
import { WAL_DEFAULTS } from '../wal/defaults.js';
import { WAL_WRITER_DEFAULTS, WAL_WRITER_LIMITS } from '../wal/index.js';
import { PEER_STORE_DEFAULTS } from '../wal/peer-store-readers.js';
import { LATENCY_BUDGET_LIMITS, SEALING_DEFAULTS } from '../wal/sealing-policy.js';
import {
  addressTemplate,
  boolFlag,
  brokerAddresses,
  brokerIds,
  FlagErrors,
  flagText,
  hostPortFlag,
  list,
  parseHostPort,
  parseNumber,
  present,
  flag as readFlag,
} from './flag-values.js';
import { parseS3EncryptionFlags, parseS3Flags } from './s3-flags.js';
import {
  type KafkaClientSecurity,
  type ListenerTlsConfig,
  type PeerTlsConfig,
  parseSecurityFlags,
  SECURITY_DEFAULTS,
} from './security-flags.js';
import { parseZoneConfig, type ZoneConfig } from './zone-flags.js';

/** The WAL (leader side): where objects go, which topics, how they are packed. */
export interface WalConfig {
  storeUrl: string;
  storeOptions: ObjectStoreOptions;
  /** Settings every topic starts from (wal: false), then `rules` in order. */
  defaults: TopicSettings;
  rules: TopicRule[];
  maxUploadsInFlight: number;
  uploadDeadlineMs: number;
  /** --wal-max-pending-bytes when given; absent: derived from the memory limit (memory-budget.ts). */
  maxPendingBytes?: number;
  /** A store call outstanding this long marks the store degraded (StoreHealth). */
  degradeAfterMs: number;
  /**
   * Seal an object before its linger ends once every producer that could add to it waits for it
   * (producer-waits.ts). Off: every object lingers its full time.
   */
  sealWhenProducersWait: boolean;
  /** How long the leader side holds a follower's Fetch response for a batch still uploading. */
  maxHoldMs: number;
  /** Other stores (URL globs) the follower side may read references from: peers in other zones. */
  readStoreUrls: string[];
  /** Stores open at once that only a glob of readStoreUrls allows (PeerStoreReaders). */
  readStoreMaxOpen: number;
  /** A peer store unread this long is closed (PeerStoreReaders). */
  readStoreIdleMs: number;
  /** Follower side: the latest a follower's Fetch response leaves, however slow the store's GETs. */
  fillDeadlineMs: number;
  /** What the sealing policy prices objects with, and its hysteresis (docs/cost.md). */
  cost: CostPolicyConfig;
  metadata: {
    /** Bootstrap servers for the sidecar's own Kafka clients; default: the local broker. */
    bootstrap: string[];
    topic: string;
    partitions: number;
    replicationFactor: number;
    retentionMs: number;
  } & KafkaClientSecurity;
}

/** The sealing policy's prices, the cluster's layout and the mode switches' timers. */
export interface CostPolicyConfig {
  prices: PriceTable;
  replicationFactor: number;
  zones: number;
  /** A group leaves the WAL after its objects paid too little for this long. */
  exitAfterMs: number;
  /** A group enters the WAL only after this many of its objects in a row would each have paid. */
  enterAfterPayingObjects: number;
  /** Least time between two switches of a group. */
  minDwellMs: number;
  /** Time constant of a group's rate and saving estimates; also the wait before its first switch. */
  rateWindowMs: number;
}

/** The validated configuration of `walproxy sidecar`. */
export interface SidecarConfig {
  brokerId: number;
  clientListen: HostPort;
  clientUpstream: HostPort;
  replicationListen?: HostPort;
  replicationUpstream?: HostPort;
  /** Egress for broker id N listens on egressListenHost:egressListenBase+N. */
  egressListenBase?: number;
  egressListenHost: string;
  egressBrokerIds: number[];
  /** Where broker id N's replication ingress is: explicit entries win over the template. */
  peerAddresses: Map<number, HostPort>;
  peerAddressTemplate?: string;
  /**
   * The KRaft controller path (fate sharing): the listener for controller voter V is on
   * controllerListenHost:controllerListenBase+V and forwards, unread, to controllerAddresses[V].
   * The broker's controller.quorum.voters names these listeners, so a dead sidecar stops its
   * broker's heartbeats and the controller fences it as it would a dead broker.
   */
  controllerListenBase?: number;
  controllerListenHost: string;
  controllerAddresses: Map<number, HostPort>;
  adminListen?: HostPort;
  maxFrameBytes: number;
  /** --max-buffered-bytes when given; absent: derived from the memory limit. */
  maxBufferedBytes?: number;
  /** --memory-limit-bytes when given; absent: the cgroup's limit, else the default (memory-budget.ts). */
  memoryLimitBytes?: number;
  drainTimeoutMs: number;
  /**
   * At a stop, ask the controller (through the controller path) to fence the broker first, so its
   * leaderships move to the other replicas before the sidecar stops serving; the broker's next
   * heartbeat through the restarted sidecar unfences it.
   */
  fenceOnStop: boolean;
  logLevel: string;
  /** TLS termination on the client ingress. */
  clientTls?: ListenerTlsConfig;
  /** TLS termination on the replication ingress (peer certificates required by default). */
  replicationTls?: ListenerTlsConfig;
  /** TLS from the egress listeners to the peers' replication ingress. */
  peerTls?: PeerTlsConfig;
  /** Absent: no WAL, the sidecar forwards transparently. */
  wal?: WalConfig;
  /** Zone-local routing of clients (docs/zone-local.md); absent: no client is routed by zone. */
  zone?: ZoneConfig;
}

/** Raw values as yargs collects them from flags and WALPROXY_* env vars. */
export type RawSidecarOptions = Record<string, unknown>;

export const SIDECAR_DEFAULTS = {
  'egress-listen-host': '127.0.0.1',
  'controller-listen-host': '127.0.0.1',
  'admin-listen': '0.0.0.0:9180',
  // Kafka's socket.request.max.bytes default: no legitimate request is larger.
  'max-frame-bytes': 104_857_600,
  'drain-timeout-ms': 10_000,
  'fence-on-stop': 'true',
  'log-level': 'info',
  // The WAL's shape, each value with its reason, in one place (wal/defaults.ts).
  'wal-target-bytes': WAL_DEFAULTS.objectBytes,
  'wal-latency-budget-ms': WAL_DEFAULTS.latencyBudgetMs,
  'cost-replication-factor': 3,
  'cost-zones': 3,
  'wal-mode-exit-after-ms': SEALING_DEFAULTS.exitAfterMs,
  'wal-mode-enter-after-objects': SEALING_DEFAULTS.enterAfterPayingObjects,
  'wal-mode-min-dwell-ms': SEALING_DEFAULTS.minDwellMs,
  'wal-mode-rate-window-ms': SEALING_DEFAULTS.rateWindowMs,
  // Off: a store outage must never fail or slow a produce (issue #12); a topic opts in with
  // --topic-config <topic>:durable.ack=true and pays for it (docs/configuration.md).
  'wal-durable-ack': 'false',
  'wal-max-uploads-in-flight': WAL_WRITER_DEFAULTS.maxUploadsInFlight,
  'wal-upload-deadline-ms': WAL_WRITER_DEFAULTS.uploadDeadlineMs,
  'wal-degrade-after-ms': WAL_WRITER_DEFAULTS.degradeAfterMs,
  'wal-seal-when-producers-wait': 'true',
  'max-hold-ms': 200,
  'fill-deadline-ms': FETCH_FILL_DEADLINE_MS,
  'wal-read-store-max-open': PEER_STORE_DEFAULTS.maxGlobStores,
  'wal-read-store-idle-ms': PEER_STORE_DEFAULTS.idleMs,
  'metadata-topic': '__remote_wal_log_metadata',
  'metadata-topic-partitions': 3,
  'metadata-topic-replication-factor': 3,
  // Longer than the WAL topics' local retention is the design's rule; an hour suits 10-20 ms objects.
  'metadata-topic-retention-ms': 3_600_000,
  's3-sse': 'none',
  ...SECURITY_DEFAULTS,
} as const;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function hostPort(
  raw: RawSidecarOptions,
  flag: string,
  errors: FlagErrors,
  required: boolean,
): HostPort | undefined {
  if (required && !present(raw[flag])) errors.add(flag, 'is required (host:port)');
  return hostPortFlag(raw, flag, errors);
}

function integer(
  raw: RawSidecarOptions,
  flag: string,
  errors: FlagErrors,
  min: number,
  max: number,
): number | undefined {
  return readFlag(raw, flag, errors, (text) => parseNumber(text, min, max, true));
}

/**
 * Validates everything at once, so an operator sees every bad setting in one run, each on one
 * line naming the flag and the reason.
 */
export function parseSidecarConfig(raw: RawSidecarOptions): { config: SidecarConfig } | { errors: string[] } {
  const errors = new FlagErrors();
  const withDefaults: RawSidecarOptions = {
    ...SIDECAR_DEFAULTS,
    ...Object.fromEntries(Object.entries(raw).filter(([, v]) => present(v))),
  };

  const brokerId = integer(withDefaults, 'broker-id', errors, 0, 2_147_483_647);
  if (!present(withDefaults['broker-id']))
    errors.add('broker-id', 'is required (the node.id of the broker in this pod)');
  const clientListen = hostPort(withDefaults, 'client-listen', errors, true);
  const clientUpstream = hostPort(withDefaults, 'client-upstream', errors, true);
  const replicationListen = hostPort(withDefaults, 'replication-listen', errors, false);
  const replicationUpstream = hostPort(withDefaults, 'replication-upstream', errors, false);
  if ((replicationListen === undefined) !== (replicationUpstream === undefined) && errors.list.length === 0) {
    errors.add(
      replicationListen ? 'replication-upstream' : 'replication-listen',
      'is required when the other replication flag is set',
    );
  }
  const egressListenBase = integer(withDefaults, 'egress-listen-base', errors, 1, 65_535);
  const egressListenHost =
    flagText(withDefaults, 'egress-listen-host') ?? SIDECAR_DEFAULTS['egress-listen-host'];

  const peerAddresses = brokerAddresses(list(withDefaults['peer-address']), 'peer-address', errors);
  const template = addressTemplate(
    withDefaults,
    'peer-address-template',
    'kafka-{id}.kafka-headless:9193',
    errors,
  );

  const rawIds = list(withDefaults['egress-broker-ids']);
  const egressBrokerIds = brokerIds(rawIds, 'egress-broker-ids', errors);
  if (rawIds.length === 0) egressBrokerIds.push(...[...peerAddresses.keys()].filter((id) => id !== brokerId));
  if (egressBrokerIds.length > 0 && egressListenBase === undefined) {
    errors.add(
      'egress-listen-base',
      'is required when egress broker ids are given (egress for broker N listens on base+N)',
    );
  }
  if (egressListenBase !== undefined) {
    for (const id of egressBrokerIds) {
      if (egressListenBase + id > 65_535)
        errors.add('egress-listen-base', `base ${egressListenBase} + broker id ${id} is past port 65535`);
      if (!peerAddresses.has(id) && template === undefined) {
        errors.add(
          'peer-address',
          `no address for broker ${id}: give --peer-address=${id}=host:port or --peer-address-template`,
        );
      }
    }
  }

  const controllers = parseControllerFlags(withDefaults, errors, {
    host: egressListenHost,
    ports: egressListenBase === undefined ? [] : egressBrokerIds.map((id) => egressListenBase + id),
  });

  const adminRaw = flagText(withDefaults, 'admin-listen');
  const adminListen = adminRaw === 'off' ? undefined : hostPort(withDefaults, 'admin-listen', errors, false);
  const maxFrameBytes = integer(withDefaults, 'max-frame-bytes', errors, 1024, 2_147_483_647);
  const maxBufferedBytes = integer(withDefaults, 'max-buffered-bytes', errors, 16_384, 1_073_741_824);
  const memoryLimitBytes = integer(
    withDefaults,
    'memory-limit-bytes',
    errors,
    MIN_MEMORY_LIMIT_BYTES,
    2 ** 50,
  );
  const drainTimeoutMs = integer(withDefaults, 'drain-timeout-ms', errors, 0, 600_000);
  const fenceOnStop = boolFlag(withDefaults, 'fence-on-stop', errors);
  const logLevel = flagText(withDefaults, 'log-level') ?? SIDECAR_DEFAULTS['log-level'];
  if (!LOG_LEVELS.includes(logLevel))
    errors.add('log-level', `'${logLevel}' is not one of ${LOG_LEVELS.join(', ')}`);

  const security = parseSecurityFlags(withDefaults, errors, {
    // The zone ingress takes peers with the replication ingress's certificate and CA.
    replicationListen: replicationListen !== undefined || present(withDefaults['zone-ingress-listen']),
    egressCount: egressBrokerIds.length,
  });
  const wal = parseWalConfig(withDefaults, errors, clientUpstream, security.metadataClient);
  const zone = parseZoneConfig(withDefaults, errors, { brokerId, replicationEgressIds: egressBrokerIds });
  if (zone?.ingressListen && !zone.allowUnauthenticatedPeers) {
    const refusal = zoneIngressAuthRefusal(security.replicationTls);
    if (refusal !== undefined) errors.add('zone-ingress-listen', refusal);
  }

  if (errors.list.length > 0) return { errors: errors.list };
  const config: SidecarConfig = {
    brokerId: brokerId!,
    clientListen: clientListen!,
    clientUpstream: clientUpstream!,
    egressListenHost,
    egressBrokerIds,
    peerAddresses,
    controllerListenHost: controllers.host,
    controllerAddresses: controllers.addresses,
    maxFrameBytes: maxFrameBytes!,
    drainTimeoutMs: drainTimeoutMs!,
    fenceOnStop: fenceOnStop!,
    logLevel,
  };
  if (maxBufferedBytes !== undefined) config.maxBufferedBytes = maxBufferedBytes;
  if (memoryLimitBytes !== undefined) config.memoryLimitBytes = memoryLimitBytes;
  if (controllers.base !== undefined) config.controllerListenBase = controllers.base;
  if (replicationListen) config.replicationListen = replicationListen;
  if (replicationUpstream) config.replicationUpstream = replicationUpstream;
  if (egressListenBase !== undefined) config.egressListenBase = egressListenBase;
  if (template !== undefined) config.peerAddressTemplate = template;
  if (adminListen) config.adminListen = adminListen;
  if (security.clientTls) config.clientTls = security.clientTls;
  if (security.replicationTls) config.replicationTls = security.replicationTls;
  if (security.peerTls) config.peerTls = security.peerTls;
  if (wal) config.wal = wal;
  if (zone) config.zone = zone;
  return { config };
}

/**
 * Why the zone ingress may not take peers with this replication TLS, or undefined when it may:
 * what a peer sends there is filled from the stores and handed to the broker before the broker
 * authenticated anybody (zone-local produce), so only sidecars holding a certificate from the
 * peer CA may connect (docs/security.md, "The zone ingress").
 */
export function zoneIngressAuthRefusal(replicationTls: ListenerTlsConfig | undefined): string | undefined {
  const how =
    'the zone ingress takes only peer sidecars authenticated by mutual TLS: set --replication-tls-cert, --replication-tls-key and --replication-tls-ca (with --replication-tls-client-auth=required, the default); a test rig without certificates may set --zone-ingress-unauthenticated=true';
  if (replicationTls === undefined) return `has no TLS: ${how}`;
  if (replicationTls.clientAuth !== 'required')
    return `--replication-tls-client-auth=${replicationTls.clientAuth} lets peers in without a certificate: ${how}`;
  return undefined;
}

/**
 * --controller-listen-base, --controller-listen-host and --controller-address: one opaque
 * listener per controller voter. `taken`: the egress ports, which must not collide with them.
 */
function parseControllerFlags(
  raw: RawSidecarOptions,
  errors: FlagErrors,
  taken: { host: string; ports: number[] },
): { base?: number; host: string; addresses: Map<number, HostPort> } {
  const host = flagText(raw, 'controller-listen-host') ?? SIDECAR_DEFAULTS['controller-listen-host'];
  const addresses = new Map<number, HostPort>();
  for (const entry of list(raw['controller-address'])) {
    const match = /^(\d+)=(.+)$/.exec(entry);
    const address = match ? parseHostPort(match[2]!) : undefined;
    if (!match || typeof address !== 'object') {
      errors.add('controller-address', `'${entry}' is not <controller-id>=<host:port>`);
      continue;
    }
    addresses.set(Number(match[1]), address);
  }
  const base = integer(raw, 'controller-listen-base', errors, 1, 65_535);
  if (addresses.size > 0 && base === undefined && !present(raw['controller-listen-base'])) {
    errors.add(
      'controller-listen-base',
      'is required with --controller-address (the listener for controller id V is on base+V)',
    );
  }
  if (base !== undefined && addresses.size === 0) {
    errors.add(
      'controller-address',
      'is required with --controller-listen-base: <controller-id>=<host:port> of each voter',
    );
  }
  if (base !== undefined) {
    for (const id of addresses.keys()) {
      const port = base + id;
      if (port > 65_535)
        errors.add('controller-listen-base', `base ${base} + controller id ${id} is past port 65535`);
      else if (host === taken.host && taken.ports.includes(port)) {
        errors.add('controller-listen-base', `port ${port} (controller ${id}) is also an egress port`);
      }
    }
  }
  return { ...(base !== undefined ? { base } : {}), host, addresses };
}

function parseWalConfig(
  raw: RawSidecarOptions,
  errors: FlagErrors,
  clientUpstream: HostPort | undefined,
  metadataClient: KafkaClientSecurity,
): WalConfig | undefined {
  const walTopics = list(raw['wal-topic']);
  const topicConfigs = list(raw['topic-config']);
  const storeUrl = flagText(raw, 'wal-store-url');
  if (storeUrl === undefined) {
    if (walTopics.length > 0 || topicConfigs.length > 0) {
      errors.add(
        'wal-store-url',
        'is required when --wal-topic or --topic-config is given (s3://bucket/prefix or file:///dir)',
      );
    }
    return undefined;
  }
  if (!/^(s3|file):\/\//.test(storeUrl))
    errors.add('wal-store-url', `'${storeUrl}' is not s3://bucket/prefix or file:///dir`);
  const rules: TopicRule[] = walTopics.map((pattern) => ({ pattern, settings: { wal: true } }));
  for (const text of topicConfigs) {
    const rule = parseTopicConfig(text);
    if (typeof rule === 'string') errors.add('topic-config', rule);
    else rules.push(rule);
  }
  const { targetBytes, lingerMs } = WAL_WRITER_LIMITS;
  const maxHoldMs = integer(raw, 'max-hold-ms', errors, 0, 60_000);
  // Past 10 s a slow store could hold a follower near replica.lag.time.max.ms (30 s by default).
  const fillDeadlineMs = integer(raw, 'fill-deadline-ms', errors, 0, 10_000);
  const readStoreMaxOpen = integer(raw, 'wal-read-store-max-open', errors, 0, 1024);
  const readStoreIdleMs = integer(raw, 'wal-read-store-idle-ms', errors, 1_000, 86_400_000);
  const defaults: Partial<TopicSettings> = {
    wal: false,
    latencyBudgetMs: integer(
      raw,
      'wal-latency-budget-ms',
      errors,
      LATENCY_BUDGET_LIMITS.min,
      LATENCY_BUDGET_LIMITS.max,
    ),
    targetBytes: integer(raw, 'wal-target-bytes', errors, targetBytes.min, targetBytes.max),
    durableAck: boolFlag(raw, 'wal-durable-ack', errors),
    mode: 'auto',
    maxHoldMs,
    zoneLocal: false,
  };
  // Deprecated: only a cap on the budget's linger, so it has no default.
  const linger = integer(raw, 'wal-linger-ms', errors, lingerMs.min, lingerMs.max);
  if (linger !== undefined) defaults.lingerMs = linger;
  const cost = parseCostPolicy(raw, errors);
  const maxUploadsInFlight = integer(raw, 'wal-max-uploads-in-flight', errors, 1, 256);
  const uploadDeadlineMs = integer(raw, 'wal-upload-deadline-ms', errors, 100, 600_000);
  const maxPendingBytes = integer(raw, 'wal-max-pending-bytes', errors, 1_048_576, 8 * 1_073_741_824);
  const degradeAfterMs = integer(raw, 'wal-degrade-after-ms', errors, 10, 600_000);
  const storeOptions = { ...parseS3Flags(raw, errors), ...parseS3EncryptionFlags(raw, errors, storeUrl) };
  const metadataBootstrap = list(raw['metadata-bootstrap']);
  if (metadataBootstrap.length === 0 && metadataClient.tls) {
    // Brokers advertise the client ingress, so after bootstrap the client dials TLS endpoints
    // by their advertised names; the loopback upstream speaks no TLS and carries no such name.
    errors.add(
      'metadata-bootstrap',
      "is required when the sidecar's own client uses TLS (--metadata-tls): a client ingress by a name in its certificate, e.g. kafka-0.kafka-headless:9192",
    );
  }
  if (metadataBootstrap.length === 0 && clientUpstream && !metadataClient.tls)
    metadataBootstrap.push(`${clientUpstream.host}:${clientUpstream.port}`);
  for (const address of metadataBootstrap) {
    if (typeof parseHostPort(address) === 'string')
      errors.add('metadata-bootstrap', `'${address}' is not host:port`);
  }
  const partitions = integer(raw, 'metadata-topic-partitions', errors, 1, 10_000);
  const replicationFactor = integer(raw, 'metadata-topic-replication-factor', errors, 1, 32);
  const retentionMs = integer(raw, 'metadata-topic-retention-ms', errors, 60_000, 2_147_483_647);
  if (errors.list.length > 0) return undefined;
  return {
    storeUrl,
    storeOptions,
    defaults: defaults as TopicSettings,
    rules,
    cost: cost!,
    maxUploadsInFlight: maxUploadsInFlight!,
    uploadDeadlineMs: uploadDeadlineMs!,
    ...(maxPendingBytes !== undefined ? { maxPendingBytes } : {}),
    degradeAfterMs: degradeAfterMs!,
    sealWhenProducersWait: boolFlag(raw, 'wal-seal-when-producers-wait', errors) ?? true,
    maxHoldMs: maxHoldMs!,
    readStoreUrls: list(raw['wal-read-store-url']),
    readStoreMaxOpen: readStoreMaxOpen!,
    readStoreIdleMs: readStoreIdleMs!,
    fillDeadlineMs: fillDeadlineMs!,
    metadata: {
      bootstrap: metadataBootstrap,
      topic: flagText(raw, 'metadata-topic') ?? SIDECAR_DEFAULTS['metadata-topic'],
      partitions: partitions!,
      replicationFactor: replicationFactor!,
      retentionMs: retentionMs!,
      ...metadataClient,
    },
  };
}

function parseCostPolicy(raw: RawSidecarOptions, errors: FlagErrors): CostPolicyConfig | undefined {
  let prices: PriceTable | undefined = DEFAULT_PRICES;
  const file = flagText(raw, 'cost-prices');
  if (file !== undefined) {
    try {
      const merged = mergePrices(JSON.parse(readFileSync(file, 'utf8')), file);
      if ('errors' in merged) {
        for (const e of merged.errors) errors.add('cost-prices', e);
        prices = undefined;
      } else {
        prices = merged.prices;
      }
    } catch (error) {
      errors.add('cost-prices', `cannot read ${file}: ${(error as Error).message}`);
      prices = undefined;
    }
  }
  const replicationFactor = integer(raw, 'cost-replication-factor', errors, 1, 32);
  const zones = integer(raw, 'cost-zones', errors, 1, 32);
  const exitAfterMs = integer(raw, 'wal-mode-exit-after-ms', errors, 0, 3_600_000);
  const enterAfterPayingObjects = integer(raw, 'wal-mode-enter-after-objects', errors, 1, 10_000);
  const minDwellMs = integer(raw, 'wal-mode-min-dwell-ms', errors, 0, 3_600_000);
  const rateWindowMs = integer(raw, 'wal-mode-rate-window-ms', errors, 100, 3_600_000);
  if (
    prices === undefined ||
    replicationFactor === undefined ||
    zones === undefined ||
    exitAfterMs === undefined ||
    enterAfterPayingObjects === undefined ||
    minDwellMs === undefined ||
    rateWindowMs === undefined
  )
    return undefined;
  return { prices, replicationFactor, zones, exitAfterMs, enterAfterPayingObjects, minDwellMs, rateWindowMs };
}

/** The replication ingress of broker `id`: an explicit --peer-address, else the template. */
export function peerAddress(config: SidecarConfig, id: number): HostPort {
  const explicit = config.peerAddresses.get(id);
  if (explicit) return explicit;
  const resolved = parseHostPort(config.peerAddressTemplate!.replaceAll('{id}', String(id)));
  if (typeof resolved === 'string') throw new Error(resolved);
  return resolved;
}
