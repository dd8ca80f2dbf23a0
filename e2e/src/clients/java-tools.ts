import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { kafkaLibDir, kafkaLogging, kafkaVersion } from '../cluster/paths.js';
import { type RunResult, runBounded } from './run-bounded.js';

const TOOLS_LOG4J2 = `appender.err.type=Console
appender.err.name=STDERR
appender.err.target=SYSTEM_ERR
appender.err.layout.type=PatternLayout
appender.err.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=WARN
rootLogger.appenderRef.err.ref=STDERR
`;

/** The same for Kafka 3.x (log4j 1.x through reload4j). */
const TOOLS_LOG4J1 = `log4j.rootLogger=WARN, STDERR
log4j.appender.STDERR=org.apache.log4j.ConsoleAppender
log4j.appender.STDERR.Target=System.err
log4j.appender.STDERR.layout=org.apache.log4j.PatternLayout
log4j.appender.STDERR.layout.ConversionPattern=[%d] %p %m (%c)%n
`;

/** The JVM flag pointing the tool's logging backend at a WARN-to-stderr configuration. */
export function toolsLogFlag(version: string): string {
  if (kafkaLogging(version) === 'reload4j') {
    const file = path.join(os.tmpdir(), 'walproxy-tools-log4j.properties');
    writeFileSync(file, TOOLS_LOG4J1);
    return `-Dlog4j.configuration=file:${file}`;
  }
  // Diagnosis (e2e/bench/rolling-restart-timeline.ts): TOOLS_DEBUG_LOGGERS="a.b.C,d.e" logs those
  // loggers at DEBUG as well, into a file of their own so the plain configuration stays as it is.
  const debug = (process.env.TOOLS_DEBUG_LOGGERS ?? '').split(',').filter(Boolean);
  const extra = debug.map((logger, i) => `logger.d${i}.name=${logger}\nlogger.d${i}.level=DEBUG\n`).join('');
  const file = path.join(os.tmpdir(), `walproxy-tools-log4j2${debug.length ? '-debug' : ''}.properties`);
  writeFileSync(file, TOOLS_LOG4J2 + extra);
  return `-Dlog4j2.configurationFile=${file}`;
}

/**
 * The protocol versions a Kafka release speaks on the paths walproxy decodes, at the cluster's
 * default metadata.version: the newest Produce and Fetch of its Java client (which walproxy's
 * ApiVersions cap, Produce 13 / Fetch 18, lowers for newer clients), and the Fetch version of its
 * replica fetcher, which is fixed by metadata.version and never negotiated
 * (`MetadataVersion#fetchRequestVersion`). Read from the released jars: ApiKeys.latestVersion()
 * and MetadataVersion.LATEST_PRODUCTION. 4.2–4.4 add no Produce or Fetch version.
 */
export function javaProtocolVersions(version = kafkaVersion()): {
  produce: number;
  fetch: number;
  replicaFetch: number;
} {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (major === 3 && minor === 9) return { produce: 11, fetch: 17, replicaFetch: 17 };
  if (major === 4 && minor === 0) return { produce: 12, fetch: 17, replicaFetch: 17 };
  if (major === 4 && minor >= 1) return { produce: 13, fetch: 18, replicaFetch: 18 };
  throw new Error(`no protocol versions recorded for Kafka ${version} (known: 3.9, 4.0, 4.1–4.4)`);
}

export type ToolResult = RunResult;

let propertiesFiles = 0;

/** Writes client properties to a fresh temporary `.properties` file and returns its path. */
export function propertiesFile(kind: string, props: Record<string, string | number>): string {
  const file = path.join(os.tmpdir(), `walproxy-${kind}-${process.pid}-${++propertiesFiles}.properties`);
  writeFileSync(
    file,
    `${Object.entries(props)
      .map(([k, v]) => `${k}=${v}`)
      .join('\n')}\n`,
  );
  return file;
}

/**
 * Runs a Java main class from the resolved Kafka jars (the perf tools, kafka-topics, the log
 * dump tool), bounded by `timeoutMs`.
 */
export function runKafkaTool(
  mainClass: string,
  args: string[],
  {
    timeoutMs = 300_000,
    heap = '512m',
    version = kafkaVersion(),
    netns,
  }: { timeoutMs?: number; heap?: string; version?: string; netns?: string } = {},
): Promise<ToolResult> {
  const javaArgs = kafkaToolJavaArgs(mainClass, args, { heap, version });
  return runBounded('java', javaArgs, { timeoutMs, label: mainClass, ...(netns ? { netns } : {}) });
}

/**
 * The `java` arguments that run a Kafka main class from the resolved jars, logging WARN and above
 * to stderr: for callers that manage the process themselves (a soak stops its load generator at a
 * deadline and reads its output as it comes).
 */
export function kafkaToolJavaArgs(
  mainClass: string,
  args: string[],
  { heap = '512m', version = kafkaVersion() }: { heap?: string; version?: string } = {},
): string[] {
  return [
    `-Xmx${heap}`,
    '-XX:+UseSerialGC',
    toolsLogFlag(version),
    '-cp',
    `${kafkaLibDir(version)}/*`,
    mainClass,
    ...args,
  ];
}

export interface ProducerPerfResult {
  records: number;
  recordsPerSec: number;
  mbPerSec: number;
  avgLatencyMs: number;
  maxLatencyMs: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  p999Ms: number;
  /** With `printMetrics`: the producer's metrics at the end, `group:name:{tags}` → value. */
  metrics?: Record<string, number>;
}

/** Parses ProducerPerformance's summary line. */
export function parseProducerPerf(stdout: string): ProducerPerfResult {
  const summary = stdout
    .trim()
    .split('\n')
    .reverse()
    .find((line) => line.includes('50th'));
  const m = summary?.match(
    /(\d+) records sent, ([\d.]+) records\/sec \(([\d.]+) MB\/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th/,
  );
  if (!m) throw new Error(`no ProducerPerformance summary in output:\n${stdout.slice(-2000)}`);
  return {
    records: Number(m[1]),
    recordsPerSec: Number(m[2]),
    mbPerSec: Number(m[3]),
    avgLatencyMs: Number(m[4]),
    maxLatencyMs: Number(m[5]),
    p50Ms: Number(m[6]),
    p95Ms: Number(m[7]),
    p99Ms: Number(m[8]),
    p999Ms: Number(m[9]),
  };
}

export interface ProducerPerfOptions {
  bootstrap: string;
  topic: string;
  records: number;
  recordSize: number;
  throughput?: number;
  props?: Record<string, string | number>;
  timeoutMs?: number;
  /** Run the tool inside this network namespace (e.g. a zone's client namespace). */
  netns?: string;
  /** `--print-metrics`: the client's own timings (queue time, request latency per node...). */
  printMetrics?: boolean;
}

/**
 * ProducerPerformance paced at `mbps` (10⁶ bytes a second) for `seconds`: the record count and
 * the records-per-second throttle derived from the record size; it may take up to
 * `timeoutFactor` × `seconds` (default 20) before it is killed.
 */
export function producerPerfAtRate(
  opts: Omit<ProducerPerfOptions, 'records' | 'throughput' | 'timeoutMs'> & {
    mbps: number;
    seconds: number;
    timeoutFactor?: number;
  },
): Promise<ProducerPerfResult> {
  const { mbps, seconds, timeoutFactor = 20, ...rest } = opts;
  return producerPerf({
    ...rest,
    records: Math.round((mbps * 1e6 * seconds) / opts.recordSize),
    throughput: (mbps * 1e6) / opts.recordSize,
    timeoutMs: timeoutFactor * seconds * 1000,
  });
}

export async function producerPerf(opts: ProducerPerfOptions): Promise<ProducerPerfResult> {
  const props = { 'bootstrap.servers': opts.bootstrap, acks: 'all', ...opts.props };
  const result = await runKafkaTool(
    'org.apache.kafka.tools.ProducerPerformance',
    [
      '--topic',
      opts.topic,
      '--num-records',
      String(opts.records),
      '--record-size',
      String(opts.recordSize),
      '--throughput',
      String(opts.throughput ?? -1),
      // A file, not --producer-props: that flag splits each pair on '=' and refuses values
      // holding one (sasl.jaas.config does).
      '--producer.config',
      propertiesFile('producer', props),
      ...(opts.printMetrics ? ['--print-metrics'] : []),
    ],
    { timeoutMs: opts.timeoutMs ?? 300_000, ...(opts.netns ? { netns: opts.netns } : {}) },
  );
  if (result.code !== 0)
    throw new Error(`ProducerPerformance exited ${result.code}:\n${result.stderr.slice(-3000)}`);
  const parsed = parseProducerPerf(result.stdout);
  return opts.printMetrics ? { ...parsed, metrics: parseClientMetrics(result.stdout) } : parsed;
}

/** `--print-metrics` lines: `group:name:{tags}  : value`, tags kept in the key. */
function parseClientMetrics(stdout: string): Record<string, number> {
  const metrics: Record<string, number> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([\w-]+:[\w-]+:\{[^}]*\})\s*:\s*(\S+)$/.exec(line.trim());
    if (m && Number.isFinite(Number(m[2]))) metrics[m[1]!] = Number(m[2]);
  }
  return metrics;
}

/** Runs ConsumerPerformance and returns how many records it consumed. */
export async function consumerPerf(opts: {
  bootstrap: string;
  topic: string;
  records: number;
  group?: string;
  timeoutMs?: number;
  /** Consumer properties (e.g. security settings), passed as a `--consumer.config` file. */
  props?: Record<string, string>;
  /** Run the tool inside this network namespace (e.g. a zone's client namespace). */
  netns?: string;
}): Promise<{ records: number; stdout: string }> {
  const config = opts.props ? ['--consumer.config', propertiesFile('consumer', opts.props)] : [];
  const result = await runKafkaTool(
    'org.apache.kafka.tools.ConsumerPerformance',
    [
      ...config,
      '--bootstrap-server',
      opts.bootstrap,
      '--topic',
      opts.topic,
      '--messages',
      String(opts.records),
      '--group',
      opts.group ?? `perf-${Date.now()}`,
      '--timeout',
      '60000',
    ],
    { timeoutMs: opts.timeoutMs ?? 300_000, ...(opts.netns ? { netns: opts.netns } : {}) },
  );
  if (result.code !== 0)
    throw new Error(`ConsumerPerformance exited ${result.code}:\n${result.stderr.slice(-3000)}`);
  return { records: parseConsumedRecords(result.stdout), stdout: result.stdout };
}

function parseConsumedRecords(stdout: string): number {
  const lines = stdout.trim().split('\n');
  const header = lines.findIndex((l) => l.includes('nMsg'));
  if (header < 0) throw new Error(`no ConsumerPerformance table in output:\n${stdout.slice(-2000)}`);
  const columns = lines[header]!.split(',').map((c) => c.trim());
  const column = columns.findIndex((c) => c.includes('nMsg') && !c.includes('sec'));
  return lines
    .slice(header + 1)
    .map((l) => Number(l.split(',')[column]))
    .filter((n) => Number.isFinite(n))
    .reduce((max, n) => Math.max(max, n), 0);
}
