import type { Argv } from 'yargs';
import { boolOption } from '../config/flag-values.js';
import { s3EncryptionFlagOptions, s3FlagOptions } from '../config/s3-flags.js';
import { securityFlagOptions } from '../config/security-flags.js';
import { parseSidecarConfig, SIDECAR_DEFAULTS } from '../config/sidecar-config.js';
import { parseTelemetryOptions, TELEMETRY_DEFAULTS } from '../config/telemetry-flags.js';
import { zoneFlagOptions } from '../config/zone-flags.js';
import { createLogger } from '../log.js';
import { Sidecar, SidecarConfigError } from '../sidecar.js';
import { readConfigFile } from './config-file.js';
import { EXIT_CONFIG_ERROR } from './terminal.js';

/** The flags of `walproxy sidecar`; each is also read from WALPROXY_<FLAG_IN_UPPER_SNAKE>. */
export function sidecarOptions(yargs: Argv): Argv {
  const options = s3EncryptionFlagOptions(s3FlagOptions(yargs))
    .config(
      'config',
      'YAML (or JSON) file of settings keyed by flag name; flags and WALPROXY_* variables win over it',
      readConfigFile,
    )
    .option('broker-id', {
      type: 'string',
      requiresArg: true,
      describe: 'node.id of the Kafka broker in this pod',
    })
    .option('client-listen', {
      type: 'string',
      describe: 'client ingress host:port; the broker advertises its CLIENT listener here',
    })
    .option('client-upstream', {
      type: 'string',
      describe: "the broker's CLIENT listener (host:port, usually on loopback)",
    })
    .option('replication-listen', {
      type: 'string',
      describe: 'replication ingress host:port; followers reach this broker here through their egress',
    })
    .option('replication-upstream', {
      type: 'string',
      describe: "the broker's REPLICATION (inter-broker) listener host:port",
    })
    .option('egress-listen-base', {
      type: 'string',
      requiresArg: true,
      describe:
        'egress for broker id N listens on base+N; brokers advertise REPLICATION at localhost:base+<their id>',
    })
    .option('egress-listen-host', {
      type: 'string',
      describe: 'address the egress listeners bind',
      default: SIDECAR_DEFAULTS['egress-listen-host'],
    })
    .option('egress-broker-ids', {
      type: 'string',
      array: true,
      describe:
        'broker ids to open an egress for (comma-separated or repeated); default: ids named in --peer-address except our own',
    })
    .option('peer-address-template', {
      type: 'string',
      describe: "replication ingress of broker {id}, e.g. 'kafka-{id}.kafka-headless:9193'",
    })
    .option('peer-address', {
      type: 'string',
      array: true,
      describe: 'replication ingress of one broker as <id>=<host:port> (repeatable); wins over the template',
    })
    .option('controller-listen-base', {
      type: 'string',
      requiresArg: true,
      describe:
        "the KRaft controller path: the listener for controller id V is on base+V; the broker's controller.quorum.voters names them, so its heartbeats stop when the sidecar does",
    })
    .option('controller-listen-host', {
      type: 'string',
      describe: "address the controller listeners bind (only this pod's broker dials them)",
      default: SIDECAR_DEFAULTS['controller-listen-host'],
    })
    .option('controller-address', {
      type: 'string',
      array: true,
      describe:
        'a controller voter as <id>=<host:port> (repeatable): its listener forwards there, bytes unread',
    })
    .option('admin-listen', {
      type: 'string',
      describe:
        "host:port of the admin HTTP server, or 'off': /healthz (liveness), /readyz (readiness: the broker's CLIENT listener answers, not draining; the store's state in the body), /metrics (Prometheus text), /counters (raw stats as JSON). Unauthenticated: keep it to the pod network (the chart's NetworkPolicy option)",
      default: SIDECAR_DEFAULTS['admin-listen'],
    })
    .option('max-frame-bytes', {
      type: 'string',
      requiresArg: true,
      describe: 'largest Kafka frame accepted; a larger one closes that connection',
      default: SIDECAR_DEFAULTS['max-frame-bytes'],
    })
    .option('max-buffered-bytes', {
      type: 'string',
      requiresArg: true,
      describe:
        "pause reading a side while the other side's send queue exceeds this; default: derived from --memory-limit-bytes",
    })
    .option('memory-limit-bytes', {
      type: 'string',
      requiresArg: true,
      describe:
        "memory the sidecar may use; every cache and queue bound is derived from it; default: the container's cgroup limit, else 536870912",
    })
    .option('drain-timeout-ms', {
      type: 'string',
      requiresArg: true,
      describe: 'on SIGTERM, how long in-flight requests may take before connections are closed',
      default: SIDECAR_DEFAULTS['drain-timeout-ms'],
    })
    .option(
      'fence-on-stop',
      boolOption(
        "true: on SIGTERM, first ask the controller (through the controller path) to fence the broker, so its leaderships move to the other replicas before the sidecar stops serving, as a broker's controlled shutdown moves them; the broker's next heartbeat through the restarted sidecar unfences it. false: the broker's partitions wait for the new sidecar",
        SIDECAR_DEFAULTS['fence-on-stop'],
      ),
    )
    .option('wal-store-url', {
      type: 'string',
      describe:
        'where WAL objects go: s3://bucket/prefix (S3 Express One Zone directory buckets included) or file:///dir; unset = no WAL',
    })
    .option('wal-topic', {
      type: 'string',
      array: true,
      describe:
        'topic name or glob (* and ?) whose produced batches go to the WAL (repeatable); __* topics never do',
    })
    .option('topic-config', {
      type: 'string',
      array: true,
      describe:
        'per-topic setting <topic-or-glob>:<key>=<value>, key one of wal, mode (auto|wal|inline), latency.budget.ms, target.bytes, durable.ack, max.hold.ms, zone.local, linger.ms (deprecated) (repeatable, later wins)',
    })
    .option('wal-latency-budget-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        'acks=all latency the WAL may add to a batch (1-60000): objects wait this less the store latency; per topic: latency.budget.ms (docs/cost.md)',
      default: SIDECAR_DEFAULTS['wal-latency-budget-ms'],
    })
    .option('wal-target-bytes', {
      type: 'string',
      requiresArg: true,
      describe: 'seal a WAL object when it reaches this size (the largest object); per topic: target.bytes',
      default: SIDECAR_DEFAULTS['wal-target-bytes'],
    })
    .option('wal-linger-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        'deprecated, use --wal-latency-budget-ms: when set, a batch waits at most this long in its object even where the budget allows more',
    })
    .option('wal-mode-exit-after-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        'mode=auto: a budget group leaves the WAL (replicates inline) after its objects paid too little for this long without a break',
      default: SIDECAR_DEFAULTS['wal-mode-exit-after-ms'],
    })
    .option('wal-mode-enter-after-objects', {
      type: 'string',
      requiresArg: true,
      describe:
        "mode=auto: a budget group enters the WAL only once this many of its objects in a row would each have paid (a producer's first requests after a quiet spell are no rate that pays)",
      default: SIDECAR_DEFAULTS['wal-mode-enter-after-objects'],
    })
    .option('wal-mode-min-dwell-ms', {
      type: 'string',
      requiresArg: true,
      describe: 'mode=auto: least time between two switches of a budget group (WAL, inline)',
      default: SIDECAR_DEFAULTS['wal-mode-min-dwell-ms'],
    })
    .option('wal-mode-rate-window-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        "mode=auto: time constant of a budget group's rate and saving estimates, and the wait before its first switch",
      default: SIDECAR_DEFAULTS['wal-mode-rate-window-ms'],
    })
    .option('cost-prices', {
      type: 'string',
      describe:
        'JSON file overriding prices of the built-in table (as walproxy cost --prices): the break-even of the sealing policy and the walproxy.cost.* metrics',
    })
    .option('cost-replication-factor', {
      type: 'string',
      requiresArg: true,
      describe: 'replication factor of the WAL topics, for break-even and the cost metrics',
      default: SIDECAR_DEFAULTS['cost-replication-factor'],
    })
    .option('cost-zones', {
      type: 'string',
      requiresArg: true,
      describe:
        'availability zones the replicas spread over, for break-even and the cost metrics (a follower in the leader zone saves nothing)',
      default: SIDECAR_DEFAULTS['cost-zones'],
    })
    .option(
      'wal-durable-ack',
      boolOption(
        'hold Produce responses until their batches are stored (true/false); with it a store outage fails produce (docs/configuration.md)',
        SIDECAR_DEFAULTS['wal-durable-ack'],
      ),
    )
    .option('wal-max-uploads-in-flight', {
      type: 'string',
      requiresArg: true,
      describe: 'concurrent object uploads',
      default: SIDECAR_DEFAULTS['wal-max-uploads-in-flight'],
    })
    .option('wal-upload-deadline-ms', {
      type: 'string',
      requiresArg: true,
      describe: 'time from seal to stored object, retries included; past it the batches count as not stored',
      default: SIDECAR_DEFAULTS['wal-upload-deadline-ms'],
    })
    .option('wal-max-pending-bytes', {
      type: 'string',
      requiresArg: true,
      describe:
        'bytes copied but not yet stored; past it new batches are not copied; default: derived from --memory-limit-bytes',
    })
    .option('wal-degrade-after-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        'a store call outstanding this long (or an object failing for good, or 3 failed attempts in a row) marks the store degraded: topics without durable ack replicate inline until a probe succeeds',
      default: SIDECAR_DEFAULTS['wal-degrade-after-ms'],
    })
    .option(
      'wal-seal-when-producers-wait',
      boolOption(
        'true: seal a WAL object before its linger ends once every producer that could add to it waits for it (a broker answers one request per connection at a time, and acks=all waits for the object); false: every object lingers its full time',
        SIDECAR_DEFAULTS['wal-seal-when-producers-wait'],
      ),
    )
    .option('wal-read-store-url', {
      type: 'string',
      array: true,
      describe:
        "follower side: other stores (URLs, globs) whose references may be read, e.g. each zone's S3 Express bucket (repeatable); the own --wal-store-url always",
    })
    .option('wal-read-store-max-open', {
      type: 'string',
      requiresArg: true,
      describe:
        'follower side: stores open at once that only a --wal-read-store-url glob allows; a reference to one more goes inline, counted (exact URLs do not count)',
      default: SIDECAR_DEFAULTS['wal-read-store-max-open'],
    })
    .option('wal-read-store-idle-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        'follower side: a peer store no reference named for this long is closed (reopened when one does)',
      default: SIDECAR_DEFAULTS['wal-read-store-idle-ms'],
    })
    .option('max-hold-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        "leader side: hold a follower's Fetch response at most this long for a batch still uploading, then send it inline",
      default: SIDECAR_DEFAULTS['max-hold-ms'],
    })
    .option('fill-deadline-ms', {
      type: 'string',
      requiresArg: true,
      describe:
        "follower side: release a follower's Fetch response at most this long after it arrived; references whose GET has not answered come inline next time",
      default: SIDECAR_DEFAULTS['fill-deadline-ms'],
    })
    .option('metadata-bootstrap', {
      type: 'string',
      array: true,
      describe: "bootstrap servers for the sidecar's own Kafka clients (default: --client-upstream)",
    })
    .option('metadata-topic', {
      type: 'string',
      describe: 'the WAL index topic',
      default: SIDECAR_DEFAULTS['metadata-topic'],
    })
    .option('metadata-topic-partitions', {
      type: 'string',
      requiresArg: true,
      describe: 'partitions of the metadata topic when walproxy creates it',
      default: SIDECAR_DEFAULTS['metadata-topic-partitions'],
    })
    .option('metadata-topic-replication-factor', {
      type: 'string',
      requiresArg: true,
      describe: 'replication factor of the metadata topic when walproxy creates it',
      default: SIDECAR_DEFAULTS['metadata-topic-replication-factor'],
    })
    .option('metadata-topic-retention-ms', {
      type: 'string',
      requiresArg: true,
      describe: 'retention.ms of the metadata topic when walproxy creates it',
      default: SIDECAR_DEFAULTS['metadata-topic-retention-ms'],
    })
    .option('otlp-endpoint', {
      type: 'string',
      describe:
        'OTLP/HTTP base URL of a collector (traces to /v1/traces, metrics to /v1/metrics); default $OTEL_EXPORTER_OTLP_ENDPOINT, unset = no OTLP export',
    })
    .option('otel-service-name', {
      type: 'string',
      describe: 'service.name of the exported telemetry',
      default: TELEMETRY_DEFAULTS['otel-service-name'],
    })
    .option('metrics-export-interval-ms', {
      type: 'string',
      requiresArg: true,
      describe: 'how often metrics are pushed over OTLP (1000–3600000)',
      default: TELEMETRY_DEFAULTS['metrics-export-interval-ms'],
    })
    .option('log-level', {
      type: 'string',
      describe: 'fatal, error, warn, info, debug, trace or silent',
      default: SIDECAR_DEFAULTS['log-level'],
    });
  return zoneFlagOptions(securityFlagOptions(options));
}

export async function runSidecar(argv: Record<string, unknown>): Promise<void> {
  const parsed = parseSidecarConfig(argv);
  const telemetry = parseTelemetryOptions(argv);
  const errors = [
    ...('errors' in parsed ? parsed.errors : []),
    ...('errors' in telemetry ? telemetry.errors : []),
  ];
  if ('errors' in parsed || 'errors' in telemetry) {
    for (const error of errors) process.stderr.write(`walproxy sidecar: ${error}\n`);
    process.exit(EXIT_CONFIG_ERROR);
  }
  const { config } = parsed;
  const log = createLogger(config.logLevel);
  let sidecar: Sidecar | undefined;
  let started = false;
  let stopping = false;
  /** A signal that came before start() finished: acted on once it has. */
  let pending: string | undefined;
  const shutdown = (signal: string) => {
    if (stopping) return;
    // A SIGTERM while the listeners open (or the telemetry SDK loads just after `sidecar ready`)
    // must not kill the process by the signal's default action: stop cleanly once started.
    if (!started || sidecar === undefined) {
      pending ??= signal;
      return;
    }
    stopping = true;
    log.info({ signal }, 'stopping');
    // Every step of stop() is bounded; this bounds the sum, should one of them not be.
    const guard = setTimeout(() => {
      log.warn({ afterMs: config.drainTimeoutMs + STOP_GUARD_MS }, 'stop did not finish; exiting anyway');
      process.exit(0);
    }, config.drainTimeoutMs + STOP_GUARD_MS);
    guard.unref();
    void sidecar.stop().then(() => process.exit(0));
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  try {
    sidecar = new Sidecar(config, log, undefined, telemetry.options);
    await sidecar.start();
  } catch (error) {
    if (error instanceof SidecarConfigError) {
      process.stderr.write(`walproxy sidecar: ${error.message}\n`);
      process.exit(EXIT_CONFIG_ERROR);
    }
    log.fatal({ error: (error as Error).message }, 'sidecar failed to start');
    process.exitCode = 1;
    return;
  }
  started = true;
  if (pending !== undefined) shutdown(pending);
}

/** Past --drain-timeout-ms plus this, a stop that has not finished exits anyway. */
const STOP_GUARD_MS = 5_000;
