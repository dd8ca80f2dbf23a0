/**
 * `make bench-replication` (issue #13): acks=all replication on the three-zone network (one network
 * namespace per broker pod, e2e/src/net/zone-network.ts; every byte between zones counted by the
 * kernel), four arms interleaved in one run:
 *   stock     stock Kafka, no sidecar: followers replicate across zones
 *   inline    a walproxy sidecar in every pod, topic not in the WAL: replication passes through
 *   wal       WAL topic, store = versitygw behind the store front with S3 Express One Zone-like
 *             first-byte latency (e2e/src/s3/store-front.ts)
 *   wal-moto  WAL topic, store = moto (Python, closes every connection)
 *   bare-pipe the inline arm's workload with each sidecar replaced by a bare Node `socket.pipe()`
 *             relay on the same addresses (e2e/src/cluster/bare-pipe.ts): what relaying alone
 *             costs in this topology, the floor of the sidecars' CPU
 * Rounds run the arms forward, then backward (ABBA…), so drift of the shared machine's load falls
 * on every arm alike. Each zone writes its own bucket; followers read the leader's zone bucket.
 *
 * Per arm and round: BENCH_BYTES of 512 B records at full speed (saturation throughput, sidecar
 * peak RSS), then BENCH_PHASE_SECONDS at 1 MB/s and at 5 MB/s (acks=all p50/p99 away from
 * saturation); then it waits until replication has settled. Sidecar CPU is /proc CPU of the three
 * sidecars over the whole arm; the store front's, versitygw's and moto's CPU is counted apart.
 *
 * Writes BENCH_OUT (default .runs/bench/replication.json):
 *   {"arms": {"stock"|"inline"|"wal"|"wal-moto": {mbps, p50_ms_1mbps, p99_ms_1mbps, p50_ms_5mbps,
 *    p99_ms_5mbps, sidecar_cpu_s_per_gb, sidecar_cpu_s_per_gb_saturation, peak_rss_mb, cross_zone_ratio, gets_per_object_per_follower,
 *    object_bytes_p50, linger_ms}}, "other_arms": {"bare-pipe"|"inline-baseline"|"wal-baseline": the
 *    same fields}, "by_phase": {"<arm>": {sidecar_cpu_s_per_gb, sidecar_syscalls_per_mb,
 *    sidecar_cpu_ms_per_object}}, "conditions": {...}, "rounds": [...], "steps_1mbps": {...}}
 * (definitions in docs/benchmarks.md). Prints figures; asserts nothing. Needs root.
 *
 * Environment: BENCH_ROUNDS (2), BENCH_BYTES (256e6 per arm and round), BENCH_PHASE_SECONDS (20),
 * BENCH_ARMS (stock,inline,wal,wal-moto,bare-pipe), BENCH_WARMUP_BYTES (64e6 per cluster start),
 * BENCH_WAL_LINGER_MS (10), BENCH_BROKER_PROPS (k=v,k=v: extra broker properties, e.g.
 * replica.fetch.min.bytes), BENCH_OUT, BENCH_STORE_LATENCY (s3-express | none | <p50>,<p99>: the store
 * front's first-byte latency); BENCH_REQUEST_LOG=1: the brokers' request log (DEBUG) during
 * every 1 MB/s phase, summarized (Produce and follower Fetch times at the leaders; costs CPU); SIDECAR_CPU_PROF_DIR=<dir>: a CPU profile of every sidecar
 * per walproxy arm and round (sidecars restarted around each arm), summarized per role.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openObjectStore } from '@walproxy/proxy';
import { type ProducerPerfResult, producerPerf, runKafkaTool } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, RACKS, type SidecarCounters } from '../src/cluster/kafka-cluster.js';
import { repoRoot } from '../src/cluster/paths.js';
import type { ManagedProcess } from '../src/cluster/process.js';
import { walSidecarEnv, zonalStoreFlags } from '../src/cluster/wal-settings.js';
import {
  crossZoneBytes,
  storeBytes,
  trafficSince,
  type Zone,
  ZoneNetwork,
  type ZoneTraffic,
  zoneNetworkAvailable,
} from '../src/net/zone-network.js';
import { type MotoServer, startMoto } from '../src/s3/moto.js';
import { processCpuSeconds, processSyscalls, type S3Server } from '../src/s3/s3-server.js';
import { type LatencySpec, type StoreFront, startStoreFront } from '../src/s3/store-front.js';
import { startVersitygw } from '../src/s3/versitygw.js';
import { formatSummary, type ProfiledArm, profileFiles, readProfiles, summarize } from './profile-summary.js';
import { runStamp } from './run-stamp.js';

const ARM_NAMES = [
  'stock',
  'inline',
  'wal',
  'wal-moto',
  'bare-pipe',
  'inline-baseline',
  'wal-baseline',
] as const;
type ArmName = (typeof ARM_NAMES)[number];
/**
 * BENCH_BASELINE=<sidecar entry> (an older commit's bundle copied aside) is what the
 * `inline-baseline` and `wal-baseline` arms run: `inline` and `wal` with that build of the sidecar,
 * interleaved with the others, so a change is measured against what it replaces in one run.
 */
const BASELINE = process.env.BENCH_BASELINE;
/**
 * BENCH_BASELINE_NODE_FLAGS="<node flags>": the baseline arms run with these flags for node (the
 * harness's SIDECAR_NODE_FLAGS), e.g. a V8 heap setting measured against the default in one run;
 * without BENCH_BASELINE they run this commit's build.
 */
const BASELINE_NODE_FLAGS = process.env.BENCH_BASELINE_NODE_FLAGS;
/**
 * BENCH_BASELINE_ENV="K=V K=V": the baseline arms' sidecars run with these variables too (the
 * harness's SIDECAR_EXTRA_ENV: the sidecars only, not the brokers or tools), e.g. glibc's MALLOC_*
 * tunables measured against the default in one run.
 */
const BASELINE_ENV = process.env.BENCH_BASELINE_ENV;
/** BENCH_BASELINE_WAL_LINGER_MS: the baseline arms' WAL linger (the trade of latency for objects per GB). */
const BASELINE_WAL_LINGER_MS =
  process.env.BENCH_BASELINE_WAL_LINGER_MS === undefined
    ? undefined
    : Number(process.env.BENCH_BASELINE_WAL_LINGER_MS);
/** The arm a baseline arm repeats with the other build. */
const workloadOf = (arm: ArmName): Exclude<ArmName, 'inline-baseline' | 'wal-baseline'> =>
  arm === 'inline-baseline' ? 'inline' : arm === 'wal-baseline' ? 'wal' : arm;
const isBaseline = (arm: ArmName) => arm !== workloadOf(arm);
/** The arms issue #13 names, the only ones in the JSON's `arms`. */
const ISSUE_ARMS: readonly string[] = ['stock', 'inline', 'wal', 'wal-moto'];
const isIssueArm = (arm: string) => ISSUE_ARMS.includes(arm);

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const RECORD_SIZE = 512;
const SATURATION_RECORDS = Math.round(Number(process.env.BENCH_BYTES ?? 256e6) / RECORD_SIZE);
const PHASE_SECONDS = Number(process.env.BENCH_PHASE_SECONDS ?? 20);
const WARMUP_RECORDS = Math.round(Number(process.env.BENCH_WARMUP_BYTES ?? 64e6) / RECORD_SIZE);
const WAL_LINGER_MS = Number(process.env.BENCH_WAL_LINGER_MS ?? 10);
/** The WAL linger a build's sidecars run with. */
const lingerOfBuild = (build: 'current' | 'baseline') =>
  build === 'baseline' && BASELINE_WAL_LINGER_MS !== undefined ? BASELINE_WAL_LINGER_MS : WAL_LINGER_MS;
const lingerOf = (arm: ArmName) => lingerOfBuild(isBaseline(arm) ? 'baseline' : 'current');
const ARMS: ArmName[] = (process.env.BENCH_ARMS ?? 'stock,inline,wal,wal-moto,bare-pipe')
  .split(',')
  .map((a) => a.trim())
  .filter((a): a is ArmName => {
    if (!(ARM_NAMES as readonly string[]).includes(a)) throw new Error(`BENCH_ARMS: unknown arm ${a}`);
    if (
      a.endsWith('-baseline') &&
      !BASELINE &&
      !BASELINE_NODE_FLAGS &&
      !BASELINE_ENV &&
      BASELINE_WAL_LINGER_MS === undefined
    )
      throw new Error(
        `BENCH_ARMS: ${a} needs BENCH_BASELINE, BENCH_BASELINE_NODE_FLAGS, BENCH_BASELINE_ENV or BENCH_BASELINE_WAL_LINGER_MS`,
      );
    return true;
  });
const BROKER_PROPS: Record<string, string> = Object.fromEntries(
  (process.env.BENCH_BROKER_PROPS ?? '')
    .split(',')
    .filter((kv) => kv.includes('='))
    .map((kv) => [kv.slice(0, kv.indexOf('=')).trim(), kv.slice(kv.indexOf('=') + 1).trim()]),
);
const OUT = process.env.BENCH_OUT ?? path.join(repoRoot(), '.runs', 'bench', 'replication.json');
const REQUEST_LOG = process.env.BENCH_REQUEST_LOG === '1';
/**
 * BENCH_STORE_LATENCY: the store front's first-byte latency for every request — `s3-express` (the
 * default: S3 Express One Zone's p50 3 ms, p99 ~14 ms), `none`, or `<p50>,<p99>` in ms. For
 * diagnosis: how much of the WAL arms' latency is the store's.
 */
const STORE_LATENCY = storeLatencyFrom(process.env.BENCH_STORE_LATENCY ?? 's3-express');

function storeLatencyFrom(text: string): LatencySpec {
  if (text === 'none' || text === 's3-express') return text;
  const [p50Ms, p99Ms] = text.split(',').map(Number);
  if (p50Ms === undefined || p99Ms === undefined || !(p50Ms >= 0) || !(p99Ms >= p50Ms))
    throw new Error(`BENCH_STORE_LATENCY: 'none', 's3-express' or '<p50>,<p99>' (ms), not '${text}'`);
  return { p50Ms, p99Ms };
}
const PROFILE_DIR = process.env.SIDECAR_CPU_PROF_DIR;
// The harness profiles every sidecar it starts while this is set: only the arms' sidecars should be.
delete process.env.SIDECAR_CPU_PROF_DIR;
// A profiled sidecar runs this commit's unbundled code (kafka-cluster.ts), whatever the build.
if (PROFILE_DIR && ARMS.some(isBaseline))
  throw new Error('the baseline arms cannot be profiled: SIDECAR_CPU_PROF_DIR runs this commit');

/** 2,000 and 10,000 records/s of 512 B: 1.02 and 5.12 MB/s. */
const RATES = { '1mbps': 2_000, '5mbps': 10_000 } as const;
const PRODUCER_PROPS = { 'linger.ms': 5, 'batch.size': 65_536 };
const PARTITIONS = 6;
/** GB produced in each phase of an arm's round. */
const PHASE_GB: Record<string, number> = {
  saturation: (SATURATION_RECORDS * RECORD_SIZE) / 1e9,
  ...Object.fromEntries(
    Object.entries(RATES).map(([k, rate]) => [k, (rate * PHASE_SECONDS * RECORD_SIZE) / 1e9]),
  ),
};
/** RF 3 on three brokers: every partition, hence every object of its leader, has two followers. */
const FOLLOWERS_PER_OBJECT = 2;
const BUCKETS = BROKER_IDS.map((id) => `walproxy-${RACKS[id]}`);

/** The per-step histograms of the sidecars (Prometheus names), read around the 1 MB/s phase. */
const STEP_HISTOGRAMS = {
  'seal age (first batch to seal: the WAL linger)': 'walproxy_wal_object_age',
  'upload queue (sealed, waiting for a slot)': 'walproxy_wal_upload_queue_duration',
  'PUT (one attempt)': 'walproxy_wal_upload_attempt_duration',
  'upload (seal to stored)': 'walproxy_wal_upload_duration',
  "leader: follower's Fetch response held for uploads": 'walproxy_fetch_hold_duration',
  'follower: fill (GETs + rebuilt response)': 'walproxy_fetch_fill_duration',
  'leader: Produce response held for the store (durable ack)': 'walproxy_produce_durable_ack_duration',
} as const;

interface Histogram {
  /** Upper bound → cumulative count, every label set summed. */
  buckets: Map<number, number>;
  sum: number;
  count: number;
}

interface StepStats {
  count: number;
  mean_ms: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
}

/** Percentiles of the brokers' request log times for one kind of request, in ms. */
interface RequestTimes {
  count: number;
  per_second: number;
  total_p50_ms: number | null;
  total_p99_ms: number | null;
  remote_p50_ms: number | null;
  remote_p99_ms: number | null;
  local_p50_ms: number | null;
  queue_p50_ms: number | null;
  send_p50_ms: number | null;
}

interface RoundResult {
  arm: ArmName;
  round: number;
  load_average_start: number[];
  load_average_end: number[];
  saturation: ProducerPerfResult;
  latency: Record<keyof typeof RATES, ProducerPerfResult>;
  produced_bytes: number;
  cross_zone_bytes: number;
  /** The same per phase (each until replication settled). */
  cross_zone_bytes_by_phase: Record<string, number>;
  store_bytes: number;
  sidecar_cpu_s: number | null;
  /**
   * The sidecars' CPU per phase (each until replication settled): at saturation it is the cost of
   * the bytes; at the fixed-rate phases mostly the cost of each request and object.
   */
  sidecar_cpu_s_by_phase: Record<string, number> | null;
  /** WAL objects the sidecars uploaded per phase (their counters). */
  objects_by_phase: Record<string, number> | null;
  /** The sidecars' read and write system calls per phase (/proc/<pid>/io), summed. */
  sidecar_syscalls_by_phase: Record<string, { reads: number; writes: number }> | null;
  broker_cpu_s: number;
  store_cpu_s: Record<string, number>;
  peak_rss_mb: number | null;
  object_gets: number | null;
  objects: number | null;
  objects_uploaded_counter: number | null;
  object_sizes: number[];
  fill_fallbacks: Record<string, number> | null;
  steps_1mbps: Record<string, StepStats> | null;
  /** BENCH_REQUEST_LOG: at the leaders during the 1 MB/s phase, by kind of request. */
  request_log_1mbps: Record<string, RequestTimes> | null;
  /** BENCH_REQUEST_LOG: the producer's own timings of the 1 MB/s phase (ms, averages). */
  producer_metrics_1mbps: Record<string, number> | null;
  /** The sidecars' counters (summed) moved during the 1 MB/s phase. */
  sidecar_counters_1mbps: Record<string, number> | null;
  settle_seconds: number;
  /** When the arm's figures were taken, in µs of process.hrtime (a CPU profile's clock). */
  window_us: [number, number];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function round3(n: number | null): number | null {
  return n === null ? null : Math.round(n * 1000) / 1000;
}

/** Resets the peak resident set size the kernel tracks for `pid` (proc(5), clear_refs 5). */
function resetPeakRss(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

function peakRssMb(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0) / 1024;
}

function loadAverage(): number[] {
  return os.loadavg().map((l) => Math.round(l * 100) / 100);
}

/** Every sidecar's histograms `names`, summed over sidecars and label sets. */
async function histograms(cluster: KafkaCluster, names: readonly string[]): Promise<Map<string, Histogram>> {
  const out = new Map<string, Histogram>(
    names.map((n) => [n, { buckets: new Map<number, number>(), sum: 0, count: 0 }]),
  );
  for (const id of BROKER_IDS) {
    const text = await (await fetch(`${cluster.adminUrl(id)}/metrics`)).text();
    for (const line of text.split('\n')) {
      const m = /^(walproxy_\w+?)_(bucket|sum|count)(\{[^}]*\})? ([\d.eE+-]+|\+Inf|NaN)$/.exec(line);
      const h = m && out.get(m[1]!);
      if (!h) continue;
      const value = Number(m[4]);
      if (m[2] === 'sum') h.sum += value;
      else if (m[2] === 'count') h.count += value;
      else {
        const le = /le="([^"]+)"/.exec(m[3] ?? '')?.[1];
        const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
        h.buckets.set(bound, (h.buckets.get(bound) ?? 0) + value);
      }
    }
  }
  return out;
}

/** Quantile `q` of the observations between two readings, linearly interpolated within a bucket. */
function histogramQuantile(before: Histogram, after: Histogram, q: number): number | null {
  const bounds = [...after.buckets.keys()].sort((a, b) => a - b);
  const total = after.count - before.count;
  if (total <= 0) return null;
  let lower = 0;
  let below = 0;
  for (const bound of bounds) {
    const cumulative = (after.buckets.get(bound) ?? 0) - (before.buckets.get(bound) ?? 0);
    if (cumulative >= q * total) {
      if (!Number.isFinite(bound)) return lower;
      const inBucket = cumulative - below;
      return inBucket > 0 ? lower + ((bound - lower) * (q * total - below)) / inBucket : bound;
    }
    lower = bound;
    below = cumulative;
  }
  return null;
}

function stepStats(before: Map<string, Histogram>, after: Map<string, Histogram>): Record<string, StepStats> {
  const steps: Record<string, StepStats> = {};
  for (const [label, name] of Object.entries(STEP_HISTOGRAMS)) {
    const b = before.get(name)!;
    const a = after.get(name)!;
    const count = a.count - b.count;
    steps[label] = {
      count,
      mean_ms: count > 0 ? round3((a.sum - b.sum) / count) : null,
      p50_ms: round3(histogramQuantile(b, a, 0.5)),
      p99_ms: round3(histogramQuantile(b, a, 0.99)),
    };
  }
  return steps;
}

/** The WAL objects in every zone's bucket of `server`, by key, with their sizes. */
async function walObjects(server: S3Server): Promise<Map<string, number>> {
  const objects = new Map<string, number>();
  for (const bucket of BUCKETS) {
    const store = openObjectStore(`s3://${bucket}/wal`, {
      region: 'us-east-1',
      endpoint: server.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    try {
      for await (const o of store.list('')) objects.set(`${bucket}/${o.key}`, o.size);
    } finally {
      await store.close();
    }
  }
  return objects;
}

/** The producer's averages that split its latency: time in its accumulator, request round trips. */
function producerTimings(metrics: Record<string, number>): Record<string, number> {
  const wanted = [
    'record-queue-time-avg',
    'record-queue-time-max',
    'request-latency-avg',
    'request-latency-max',
    'records-per-request-avg',
    'batch-size-avg',
  ];
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(metrics)) {
    const [group, name] = key.split(':');
    if (group === 'producer-metrics' && wanted.includes(name!)) out[name!] = round3(value)!;
  }
  return out;
}

/** Every number in the sidecars' WAL counters, flattened (`fetchStrip.inline.notInWal`) and summed. */
function flatCounters(all: readonly SidecarCounters[]): Record<string, number> {
  const out: Record<string, number> = {};
  const walk = (prefix: string, value: unknown) => {
    if (typeof value === 'number') out[prefix] = (out[prefix] ?? 0) + value;
    else if (value !== null && typeof value === 'object')
      for (const [k, v] of Object.entries(value)) walk(prefix ? `${prefix}.${k}` : k, v);
  };
  for (const c of all) walk('', c.wal ?? {});
  return out;
}

function countersSince(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after)
      .map(([k, v]) => [k, v - (before[k] ?? 0)] as const)
      .filter(([, d]) => d !== 0),
  );
}

/** Sets the level of every broker's request logger (a dynamic broker-logger config). */
async function setRequestLogLevel(cluster: KafkaCluster, level: 'DEBUG' | 'WARN'): Promise<void> {
  await Promise.all(
    BROKER_IDS.map(async (id) => {
      const result = await runKafkaTool('org.apache.kafka.tools.ConfigCommand', [
        '--bootstrap-server',
        cluster.directBootstrap(),
        '--entity-type',
        'broker-loggers',
        '--entity-name',
        String(id),
        '--alter',
        '--add-config',
        `kafka.request.logger=${level}`,
      ]);
      if (result.code !== 0) throw new Error(`ConfigCommand for broker ${id}: ${result.stderr.slice(-2000)}`);
    }),
  );
}

function serverLog(cluster: KafkaCluster, id: number): string {
  return path.join(cluster.workDir, `broker-${id}`, 'logs', 'server.log');
}

/**
 * Produce requests from clients and Fetch requests from followers, as the leaders' request logs
 * timed them ("Completed request:{json}": total, queue, local, remote = purgatory, send), from
 * each log's byte offset in `from` on.
 */
function requestTimes(cluster: KafkaCluster, from: Map<number, number>, seconds: number) {
  const kinds = new Map<
    string,
    { total: number[]; remote: number[]; local: number[]; queue: number[]; send: number[] }
  >();
  for (const id of BROKER_IDS) {
    const text = readFileSync(serverLog(cluster, id))
      .subarray(from.get(id) ?? 0)
      .toString('utf8');
    for (const line of text.split('\n')) {
      const at = line.indexOf('Completed request:');
      if (at < 0) continue;
      const json = line.slice(at + 'Completed request:'.length).replace(/ \(kafka\.request\.logger\)$/, '');
      let r: {
        requestHeader?: { requestApiKey?: number; clientId?: string };
        totalTimeMs?: number;
        requestQueueTimeMs?: number;
        localTimeMs?: number;
        remoteTimeMs?: number;
        sendTimeMs?: number;
      };
      try {
        r = JSON.parse(json);
      } catch {
        continue;
      }
      const key = r.requestHeader?.requestApiKey;
      const client = r.requestHeader?.clientId ?? '';
      const kind =
        key === 0 && client.startsWith('perf-producer')
          ? 'Produce (producer, at the leader)'
          : key === 1 && /^broker-\d+-fetcher/.test(client)
            ? 'Fetch (follower, at the leader)'
            : undefined;
      if (kind === undefined) continue;
      let k = kinds.get(kind);
      if (!k) {
        k = { total: [], remote: [], local: [], queue: [], send: [] };
        kinds.set(kind, k);
      }
      k.total.push(r.totalTimeMs ?? 0);
      k.remote.push(r.remoteTimeMs ?? 0);
      k.local.push(r.localTimeMs ?? 0);
      k.queue.push(r.requestQueueTimeMs ?? 0);
      k.send.push(r.sendTimeMs ?? 0);
    }
  }
  const q = (xs: number[], p: number) => {
    if (xs.length === 0) return null;
    const sorted = [...xs].sort((a, b) => a - b);
    return round3(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!);
  };
  return Object.fromEntries(
    [...kinds].map(([kind, k]) => [
      kind,
      {
        count: k.total.length,
        per_second: Math.round((1000 * k.total.length) / seconds) / 1000,
        total_p50_ms: q(k.total, 0.5),
        total_p99_ms: q(k.total, 0.99),
        remote_p50_ms: q(k.remote, 0.5),
        remote_p99_ms: q(k.remote, 0.99),
        local_p50_ms: q(k.local, 0.5),
        queue_p50_ms: q(k.queue, 0.5),
        send_p50_ms: q(k.send, 0.5),
      } satisfies RequestTimes,
    ]),
  );
}

interface Stores {
  versitygw: S3Server;
  front: StoreFront;
  moto: MotoServer;
}

type StoreName = 'versitygw' | 'moto';

/** The one cluster alive at a time (so no idle cluster's traffic is counted in another's arm). */
class Bench {
  cluster: KafkaCluster | undefined;
  kind: 'stock' | 'walproxy' | undefined;
  store: StoreName = 'versitygw';
  /** Which sidecar build runs: this commit's, or BENCH_BASELINE. */
  build: 'current' | 'baseline' = 'current';
  version = '';
  /** The bare pipes on the sidecars' addresses while the bare-pipe arm runs (the sidecars stopped). */
  pipes: Map<number, ManagedProcess> | undefined;
  #warmups = 0;

  constructor(
    readonly zones: ZoneNetwork,
    readonly stores: Stores,
  ) {}

  storeOf(arm: ArmName): StoreName | undefined {
    const workload = workloadOf(arm);
    return workload === 'wal' ? 'versitygw' : workload === 'wal-moto' ? 'moto' : undefined;
  }

  /** Brings up what `arm` runs on: the stock cluster, or the walproxy one on the arm's store. */
  async ready(arm: ArmName, profileDir: string | undefined): Promise<void> {
    // Before a stock arm the whole cluster stops (the pipes with it).
    if (this.pipes && arm !== 'bare-pipe' && arm !== 'stock') await this.#sidecarsBack();
    const kind = arm === 'stock' ? 'stock' : 'walproxy';
    const store = this.storeOf(arm);
    const build = isBaseline(arm) ? 'baseline' : 'current';
    // The harness reads SIDECAR_ENTRY whenever it starts a sidecar (e2e/src/cluster/paths.ts).
    if (build === 'baseline' && BASELINE) process.env.SIDECAR_ENTRY = BASELINE;
    else delete process.env.SIDECAR_ENTRY;
    if (build === 'baseline' && BASELINE_NODE_FLAGS) process.env.SIDECAR_NODE_FLAGS = BASELINE_NODE_FLAGS;
    else delete process.env.SIDECAR_NODE_FLAGS;
    if (build === 'baseline' && BASELINE_ENV) process.env.SIDECAR_EXTRA_ENV = BASELINE_ENV;
    else delete process.env.SIDECAR_EXTRA_ENV;
    if (this.kind !== kind) {
      await this.stop();
      this.build = build;
      if (store) this.store = store;
      console.error(
        `[bench] starting the ${kind} cluster${kind === 'walproxy' ? ` (store ${this.store})` : ''}`,
      );
      this.cluster = await this.#start(kind);
      this.kind = kind;
      this.version = this.cluster.version;
      await this.#warmUp(WARMUP_RECORDS);
    } else if ((store && store !== this.store) || (kind === 'walproxy' && build !== this.build)) {
      if (store) this.store = store;
      this.build = build;
      console.error(`[bench] restarting the sidecars on store ${this.store}, ${build} build`);
      await this.restartSidecars();
      await this.#warmUp(Math.round(WARMUP_RECORDS / 2));
    }
    if (arm === 'bare-pipe' && !this.pipes) {
      const c = this.cluster!;
      console.error('[bench] replacing the sidecars by bare pipes');
      await Promise.all(BROKER_IDS.map((id) => c.stopSidecar(id)));
      this.pipes = new Map();
      for (const id of BROKER_IDS) this.pipes.set(id, await c.startBarePipe(id));
      await this.#warmUp(Math.round(WARMUP_RECORDS / 2));
    }
    if (profileDir !== undefined && kind === 'walproxy' && !this.pipes) {
      mkdirSync(profileDir, { recursive: true });
      process.env.SIDECAR_CPU_PROF_DIR = profileDir;
      try {
        await this.restartSidecars();
      } finally {
        delete process.env.SIDECAR_CPU_PROF_DIR;
      }
    }
  }

  /** Ends the profiled sidecars of an arm (they write their profiles) and starts unprofiled ones. */
  async endProfile(): Promise<void> {
    await this.restartSidecars();
  }

  /** Stops the bare pipes and starts the sidecars again on their addresses. */
  async #sidecarsBack(): Promise<void> {
    const pipes = this.pipes!;
    this.pipes = undefined;
    await Promise.all([...pipes.values()].map((p) => p.stop()));
    const c = this.cluster!;
    await Promise.all(BROKER_IDS.map((id) => c.startSidecar(id)));
  }

  async restartSidecars(): Promise<void> {
    const c = this.cluster!;
    await Promise.all(BROKER_IDS.map((id) => c.stopSidecar(id)));
    await Promise.all(BROKER_IDS.map((id) => c.startSidecar(id)));
  }

  async #start(kind: 'stock' | 'walproxy'): Promise<KafkaCluster> {
    const common = {
      zones: this.zones,
      jvmProfile: 'throughput' as const,
      brokerProperties: BROKER_PROPS,
    };
    if (kind === 'stock') return KafkaCluster.start({ ...common, sidecars: false });
    return KafkaCluster.start({
      ...common,
      sidecarEnv: walSidecarEnv(),
      // Read at every sidecar start, so a restart switches the store.
      sidecarArgs: (id) => [
        ...zonalStoreFlags(
          RACKS[id]!,
          this.store === 'moto' ? this.stores.moto.endpoint : this.stores.front.endpoint,
        ),
        '--wal-topic=wal-*',
        // Through the WAL whatever its objects cost: the arms measure the WAL at a fixed linger
        // (a cap on the default budget's), not the sealing policy's choice (make bench-cost does).
        '--topic-config=wal-*:mode=wal',
        `--wal-linger-ms=${lingerOfBuild(this.build)}`,
        // A stopped sidecar exits soon (and writes its CPU profile) instead of draining for 10 s.
        '--drain-timeout-ms=2000',
      ],
    });
  }

  async #warmUp(records: number): Promise<void> {
    if (records <= 0) return;
    const c = this.cluster!;
    const topic = `${this.kind === 'stock' ? 'stock' : 'wal'}-warmup-${this.#warmups++}`;
    await createTopic(c.bootstrap(), topic, { partitions: PARTITIONS });
    await producerPerf({
      bootstrap: c.bootstrap(),
      topic,
      records,
      recordSize: RECORD_SIZE,
      props: PRODUCER_PROPS,
      timeoutMs: 600_000,
    });
  }

  async stop(): Promise<void> {
    const c = this.cluster;
    if (!c) return;
    this.cluster = undefined;
    this.kind = undefined;
    const pipes = this.pipes;
    this.pipes = undefined;
    await Promise.all([...(pipes?.values() ?? [])].map((p) => p.stop()));
    // The sidecars first, each with the time to write a CPU profile; then the brokers.
    await Promise.all(BROKER_IDS.map((id) => c.stopSidecar(id)));
    // WALPROXY_KEEP_LOGS=1 keeps the cluster's logs, as for the e2e tests (e.g. a sidecar's
    // --trace-gc output through SIDECAR_NODE_FLAGS).
    await c.stop({ keepLogs: process.env.WALPROXY_KEEP_LOGS === '1' });
  }
}

async function settle(zones: ZoneNetwork): Promise<number> {
  // Until replication is done: under 200 KB a second between zones and to the store, twice.
  const start = Date.now();
  let previous = zones.traffic();
  let quiet = 0;
  while (Date.now() - start < 60_000 && quiet < 2) {
    await sleep(1_000);
    const now = zones.traffic();
    const moved = trafficSince(previous, now);
    quiet = crossZoneBytes(moved) + storeBytes(moved) < 200_000 ? quiet + 1 : 0;
    previous = now;
  }
  return (Date.now() - start) / 1000;
}

async function objectGets(arm: ArmName, stores: Stores): Promise<number | undefined> {
  arm = workloadOf(arm);
  if (arm === 'wal') {
    const counters = (await stores.front.stats()).counters;
    return Object.values(counters).reduce((n, byOp) => n + byOp.get.requests, 0);
  }
  if (arm === 'wal-moto') return stores.moto.objectRequests().GET ?? 0;
  return undefined;
}

async function runArm(bench: Bench, arm: ArmName, round: number): Promise<RoundResult> {
  const c = bench.cluster!;
  const zones = bench.zones;
  const stores = bench.stores;
  const bootstrap = c.bootstrap();
  const prefix = arm === 'stock' ? 'stock' : arm === 'inline' ? 'inline' : arm;
  const topics = {
    saturation: `${prefix}-r${round}-saturation`,
    '1mbps': `${prefix}-r${round}-1mbps`,
    '5mbps': `${prefix}-r${round}-5mbps`,
  };
  for (const topic of Object.values(topics)) await createTopic(bootstrap, topic, { partitions: PARTITIONS });
  const wal = bench.storeOf(arm);
  const server = wal === 'moto' ? stores.moto : wal === 'versitygw' ? stores.versitygw : undefined;
  // The relays in front of the brokers: the sidecars, or the bare pipes in their place.
  const pipes = bench.pipes;
  const sidecarPids = pipes
    ? BROKER_IDS.map((id) => pipes.get(id)!.pid!)
    : c.withSidecars
      ? BROKER_IDS.map((id) => c.sidecars.get(id)!.pid!)
      : [];
  const brokerPids = BROKER_IDS.map((id) => c.brokers.get(id)!.pid!);
  const storePids: Record<string, number> = {
    'store front': stores.front.pid,
    versitygw: stores.versitygw.pid,
    moto: stores.moto.pid,
  };
  const cpu = (pids: readonly number[]) => pids.reduce((n, pid) => n + processCpuSeconds(pid), 0);
  const syscalls = () =>
    sidecarPids
      .map(processSyscalls)
      .reduce((a, b) => ({ reads: a.reads + b.reads, writes: a.writes + b.writes }), {
        reads: 0,
        writes: 0,
      });
  const counters = async () =>
    c.withSidecars && !pipes ? Promise.all(BROKER_IDS.map((id) => c.sidecarCounters(id))) : undefined;

  const loadStart = loadAverage();
  const objectsBefore = server ? await walObjects(server) : undefined;
  const getsBefore = await objectGets(arm, stores);
  const countersBefore = await counters();
  for (const pid of sidecarPids) resetPeakRss(pid);
  const sidecarCpuBefore = cpu(sidecarPids);
  const brokerCpuBefore = cpu(brokerPids);
  const storeCpuBefore = Object.fromEntries(
    Object.entries(storePids).map(([k, pid]) => [k, processCpuSeconds(pid)]),
  );
  const trafficBefore: ZoneTraffic = zones.traffic();
  const windowStart = Number(process.hrtime.bigint() / 1000n);

  // Each phase ends once replication has settled, so the next one starts with no backlog and
  // its bytes between zones are its own.
  const crossZoneByPhase: Record<string, number> = {};
  const sidecarCpuByPhase: Record<string, number> = {};
  const objectsByPhase: Record<string, number> = {};
  const syscallsByPhase: Record<string, { reads: number; writes: number }> = {};
  const objectsUploaded = async () =>
    (await counters())?.reduce((n, x) => n + Number(x.wal?.writer.objectsUploaded ?? 0), 0) ?? 0;
  let settleSeconds = 0;
  const phase = async <T>(name: string, run: () => Promise<T>): Promise<T> => {
    const before = zones.traffic();
    const cpuBefore = cpu(sidecarPids);
    const syscallsBefore = syscalls();
    const objectsAtStart = wal ? await objectsUploaded() : 0;
    const result = await run();
    settleSeconds += await settle(zones);
    crossZoneByPhase[name] = crossZoneBytes(trafficSince(before, zones.traffic()));
    sidecarCpuByPhase[name] = cpu(sidecarPids) - cpuBefore;
    const syscallsAfter = syscalls();
    syscallsByPhase[name] = {
      reads: syscallsAfter.reads - syscallsBefore.reads,
      writes: syscallsAfter.writes - syscallsBefore.writes,
    };
    if (wal) objectsByPhase[name] = (await objectsUploaded()) - objectsAtStart;
    return result;
  };
  const saturation = await phase('saturation', () =>
    producerPerf({
      bootstrap,
      topic: topics.saturation,
      records: SATURATION_RECORDS,
      recordSize: RECORD_SIZE,
      props: PRODUCER_PROPS,
      timeoutMs: 900_000,
    }),
  );
  // The peak of the saturation phase, the followers' catch-up included.
  const peak = sidecarPids.length > 0 ? Math.max(...sidecarPids.map(peakRssMb)) : null;
  const latency = {} as Record<keyof typeof RATES, ProducerPerfResult>;
  let steps: Record<string, StepStats> | null = null;
  let requestLog: Record<string, RequestTimes> | null = null;
  let countersMoved: Record<string, number> | null = null;
  for (const [name, rate] of Object.entries(RATES) as [keyof typeof RATES, number][]) {
    const names = Object.values(STEP_HISTOGRAMS);
    const before = wal && name === '1mbps' ? await histograms(c, names) : undefined;
    const logged = REQUEST_LOG && name === '1mbps';
    const countersAtStart = name === '1mbps' ? await counters() : undefined;
    const logFrom = new Map(BROKER_IDS.map((id) => [id, statSync(serverLog(c, id)).size]));
    if (logged) await setRequestLogLevel(c, 'DEBUG');
    const started = Date.now();
    latency[name] = await phase(name, async () => {
      const result = await producerPerf({
        bootstrap,
        topic: topics[name],
        records: rate * PHASE_SECONDS,
        recordSize: RECORD_SIZE,
        throughput: rate,
        props: PRODUCER_PROPS,
        timeoutMs: 600_000,
        printMetrics: logged,
      });
      if (logged) {
        await setRequestLogLevel(c, 'WARN');
        requestLog = requestTimes(c, logFrom, (Date.now() - started) / 1000);
      }
      return result;
    });
    if (before) steps = stepStats(before, await histograms(c, names));
    const countersAtEnd = countersAtStart ? await counters() : undefined;
    if (countersAtStart && countersAtEnd)
      countersMoved = countersSince(flatCounters(countersAtStart), flatCounters(countersAtEnd));
  }
  const windowEnd = Number(process.hrtime.bigint() / 1000n);

  const traffic = trafficSince(trafficBefore, zones.traffic());
  const objectsAfter = server ? await walObjects(server) : undefined;
  const getsAfter = await objectGets(arm, stores);
  const countersAfter = await counters();
  const newObjects = objectsAfter ? [...objectsAfter].filter(([key]) => !objectsBefore!.has(key)) : [];
  const sum = (list: typeof countersAfter, pick: (x: NonNullable<typeof list>[number]) => number) =>
    (list ?? []).reduce((n, x) => n + pick(x), 0);
  const uploaded = (x: NonNullable<typeof countersAfter>[number]) =>
    Number(x.wal?.writer.objectsUploaded ?? 0);
  const fallbacks = (x: NonNullable<typeof countersAfter>[number]) =>
    ((x.wal?.fetchFill as { fallbacks?: Record<string, number> } | undefined)?.fallbacks ?? {}) as Record<
      string,
      number
    >;
  let fillFallbacks: Record<string, number> | null = null;
  if (wal && countersAfter && countersBefore) {
    fillFallbacks = {};
    for (const [i, after] of countersAfter.entries()) {
      for (const [k, v] of Object.entries(fallbacks(after)))
        fillFallbacks[k] = (fillFallbacks[k] ?? 0) + v - (fallbacks(countersBefore[i]!)[k] ?? 0);
    }
  }
  const produced =
    (SATURATION_RECORDS + Object.values(RATES).reduce((n, r) => n + r * PHASE_SECONDS, 0)) * RECORD_SIZE;
  const result: RoundResult = {
    arm,
    round,
    load_average_start: loadStart,
    load_average_end: loadAverage(),
    saturation,
    latency,
    produced_bytes: produced,
    cross_zone_bytes: crossZoneBytes(traffic),
    cross_zone_bytes_by_phase: crossZoneByPhase,
    store_bytes: storeBytes(traffic),
    sidecar_cpu_s: sidecarPids.length > 0 ? cpu(sidecarPids) - sidecarCpuBefore : null,
    sidecar_cpu_s_by_phase: sidecarPids.length > 0 ? sidecarCpuByPhase : null,
    objects_by_phase: wal ? objectsByPhase : null,
    sidecar_syscalls_by_phase: sidecarPids.length > 0 ? syscallsByPhase : null,
    broker_cpu_s: cpu(brokerPids) - brokerCpuBefore,
    store_cpu_s: Object.fromEntries(
      Object.entries(storePids).map(([k, pid]) => [k, processCpuSeconds(pid) - storeCpuBefore[k]!]),
    ),
    peak_rss_mb: peak,
    object_gets: getsAfter !== undefined && getsBefore !== undefined ? getsAfter - getsBefore : null,
    objects: wal ? newObjects.length : null,
    objects_uploaded_counter: wal ? sum(countersAfter, uploaded) - sum(countersBefore, uploaded) : null,
    object_sizes: newObjects.map(([, size]) => size),
    fill_fallbacks: fillFallbacks,
    steps_1mbps: steps,
    request_log_1mbps: requestLog,
    producer_metrics_1mbps: latency['1mbps'].metrics ? producerTimings(latency['1mbps'].metrics) : null,
    sidecar_counters_1mbps: countersMoved,
    settle_seconds: settleSeconds,
    window_us: [windowStart, windowEnd],
  };
  const gb = produced / 1e9;
  console.error(
    `[bench] round ${round} ${arm}: ${saturation.mbPerSec} MB/s; 1 MB/s p50/p99 ${latency['1mbps'].p50Ms}/${latency['1mbps'].p99Ms} ms; 5 MB/s ${latency['5mbps'].p50Ms}/${latency['5mbps'].p99Ms} ms; cross-zone ${(result.cross_zone_bytes / 1e6 / gb).toFixed(1)} MB/GB; sidecar CPU ${result.sidecar_cpu_s === null ? '-' : (result.sidecar_cpu_s / gb).toFixed(1)} s/GB; peak RSS ${peak?.toFixed(0) ?? '-'} MB; objects ${result.objects ?? '-'} (counter ${result.objects_uploaded_counter ?? '-'}), GETs ${result.object_gets ?? '-'}; fallbacks ${JSON.stringify(fillFallbacks)}; load ${loadStart.join(' ')} → ${result.load_average_end.join(' ')}`,
  );
  return result;
}

/** The issue's figures per arm, from all its rounds. */
function armFigures(arm: ArmName, rounds: readonly RoundResult[], all: readonly RoundResult[]) {
  const total = (pick: (r: RoundResult) => number) => rounds.reduce((n, r) => n + pick(r), 0);
  const gb = total((r) => r.produced_bytes) / 1e9;
  const crossPerGb = (rs: readonly RoundResult[]) =>
    rs.reduce((n, r) => n + r.cross_zone_bytes, 0) / (rs.reduce((n, r) => n + r.produced_bytes, 0) / 1e9);
  const stock = all.filter((r) => r.arm === 'stock');
  const wal = workloadOf(arm) === 'wal' || arm === 'wal-moto';
  const objects = total((r) => r.objects ?? 0);
  return {
    mbps: round3(median(rounds.map((r) => r.saturation.mbPerSec))),
    p50_ms_1mbps: median(rounds.map((r) => r.latency['1mbps'].p50Ms)),
    p99_ms_1mbps: median(rounds.map((r) => r.latency['1mbps'].p99Ms)),
    p50_ms_5mbps: median(rounds.map((r) => r.latency['5mbps'].p50Ms)),
    p99_ms_5mbps: median(rounds.map((r) => r.latency['5mbps'].p99Ms)),
    sidecar_cpu_s_per_gb: arm === 'stock' ? null : round3(total((r) => r.sidecar_cpu_s ?? 0) / gb),
    // Issue #26: the full-speed phase only (by_phase's saturation figure), where the machine is
    // saturated and idle settling time does not count.
    sidecar_cpu_s_per_gb_saturation:
      arm === 'stock'
        ? null
        : round3(
            total((r) => r.sidecar_cpu_s_by_phase?.saturation ?? 0) / (PHASE_GB.saturation! * rounds.length),
          ),
    peak_rss_mb: arm === 'stock' ? null : round3(Math.max(...rounds.map((r) => r.peak_rss_mb ?? 0))),
    cross_zone_ratio:
      stock.length > 0 ? Math.round((1e5 * crossPerGb(rounds)) / crossPerGb(stock)) / 1e5 : null,
    gets_per_object_per_follower:
      wal && objects > 0 ? round3(total((r) => r.object_gets ?? 0) / (objects * FOLLOWERS_PER_OBJECT)) : null,
    object_bytes_p50: wal ? median(rounds.flatMap((r) => r.object_sizes)) : null,
    linger_ms: wal ? lingerOf(arm) : null,
  };
}

/**
 * Issue #26's goals, each as measured in this run against the arm it is relative to (printed,
 * never asserted: a benchmark reports).
 */
function printGoals(figures: Record<string, ReturnType<typeof armFigures>>): void {
  const { stock, wal, inline } = figures;
  const floor = figures['bare-pipe'];
  const lines: string[] = [];
  const line = (goal: string, value: string, met: boolean) =>
    lines.push(`| ${goal} | ${value} | ${met ? 'met' : 'not met'} |`);
  if (stock && wal) {
    for (const rate of ['1mbps', '5mbps'] as const) {
      for (const [q, bound] of [
        ['p50', 10],
        ['p99', 25],
      ] as const) {
        const w = wal[`${q}_ms_${rate}`];
        const st = stock[`${q}_ms_${rate}`];
        if (w === null || st === null) continue;
        line(`wal ${q} at ${rate} ≤ stock + ${bound} ms`, `${(w - st).toFixed(1)} ms added`, w - st <= bound);
      }
    }
    if (wal.mbps !== null && stock.mbps !== null) {
      const share = wal.mbps / stock.mbps;
      line('wal MB/s ≥ 70 % of stock', `${(100 * share).toFixed(0)} %`, share >= 0.7);
    }
  }
  const cpu = (a: ReturnType<typeof armFigures> | undefined) => a?.sidecar_cpu_s_per_gb_saturation ?? null;
  const floorCpu = cpu(floor);
  if (floorCpu !== null && floorCpu > 0) {
    for (const [arm, bound] of [
      ['wal', 3],
      ['inline', 1.5],
    ] as const) {
      const armCpu = cpu(arm === 'wal' ? wal : inline);
      if (armCpu !== null)
        line(
          `${arm} saturation CPU-s/GB ≤ ${bound}× bare-pipe`,
          `${(armCpu / floorCpu).toFixed(2)}×`,
          armCpu <= bound * floorCpu,
        );
    }
  }
  if (lines.length === 0) return;
  console.log('\nIssue #26 goals, this run:\n| goal | measured | |\n|---|---:|---|');
  for (const l of lines) console.log(l);
}

/**
 * Beside the issue's figures (kept apart so that `arms` holds exactly the fields it names): the
 * sidecars' CPU per phase, since the fixed-rate phases pay per request and per object while
 * saturation pays per byte, and per object uploaded in the phase.
 */
function armPhases(arm: ArmName, rounds: readonly RoundResult[]) {
  const total = (pick: (r: RoundResult) => number) => rounds.reduce((n, r) => n + pick(r), 0);
  const wal = workloadOf(arm) === 'wal' || arm === 'wal-moto';
  return {
    sidecar_cpu_s_per_gb:
      arm === 'stock'
        ? null
        : Object.fromEntries(
            Object.entries(PHASE_GB).map(([phase, phaseGb]) => [
              phase,
              round3(total((r) => r.sidecar_cpu_s_by_phase?.[phase] ?? 0) / (phaseGb * rounds.length)),
            ]),
          ),
    // Each socket write on loopback runs the receiver's network stack in the writer's time: how
    // many a phase took per MB produced says how much of the CPU is per write, not per byte.
    sidecar_syscalls_per_mb:
      arm === 'stock'
        ? null
        : Object.fromEntries(
            Object.entries(PHASE_GB).map(([phase, phaseGb]) => {
              const per = (pick: (x: { reads: number; writes: number }) => number) =>
                round3(
                  total((r) => pick(r.sidecar_syscalls_by_phase?.[phase] ?? { reads: 0, writes: 0 })) /
                    (phaseGb * 1000 * rounds.length),
                );
              return [phase, { reads: per((x) => x.reads), writes: per((x) => x.writes) }];
            }),
          ),
    sidecar_cpu_ms_per_object: !wal
      ? null
      : Object.fromEntries(
          Object.keys(PHASE_GB).map((phase) => {
            const count = total((r) => r.objects_by_phase?.[phase] ?? 0);
            const cpuMs = 1000 * total((r) => r.sidecar_cpu_s_by_phase?.[phase] ?? 0);
            return [phase, count > 0 ? round3(cpuMs / count) : null];
          }),
        ),
  };
}

/** The per-step means of an arm at 1 MB/s, over its rounds (observation-weighted). */
function armSteps(rounds: readonly RoundResult[]): Record<string, StepStats> | null {
  const withSteps = rounds.filter((r) => r.steps_1mbps !== null);
  if (withSteps.length === 0) return null;
  const out: Record<string, StepStats> = {};
  for (const label of Object.keys(STEP_HISTOGRAMS)) {
    const each = withSteps.map((r) => r.steps_1mbps![label]!);
    const count = each.reduce((n, s) => n + s.count, 0);
    out[label] = {
      count,
      mean_ms: count > 0 ? round3(each.reduce((n, s) => n + (s.mean_ms ?? 0) * s.count, 0) / count) : null,
      p50_ms: median(each.flatMap((s) => (s.p50_ms === null ? [] : [s.p50_ms]))),
      p99_ms: median(each.flatMap((s) => (s.p99_ms === null ? [] : [s.p99_ms]))),
    };
  }
  return out;
}

async function main(): Promise<void> {
  if (!zoneNetworkAvailable()) throw new Error('the replication benchmark needs root, ip and nft');
  const startedAt = new Date();
  const zones = ZoneNetwork.create(new Map(BROKER_IDS.map((id) => [id, RACKS[id] as Zone])));
  const results: RoundResult[] = [];
  const profiles: {
    arm: ArmName;
    round: number;
    dir: string;
    gb: number;
    sidecarCpuS: number;
    window: { startUs: number; endUs: number };
  }[] = [];
  let bench: Bench | undefined;
  const started: { stop(): Promise<void> }[] = [];
  try {
    const at = { netns: zones.store.netns, host: zones.store.address };
    const versitygw = await startVersitygw(at);
    started.push(versitygw);
    const front = await startStoreFront({ upstream: versitygw, ...at, latency: STORE_LATENCY });
    started.push(front);
    const moto = await startMoto(at);
    started.push(moto);
    for (const bucket of BUCKETS) {
      await versitygw.createBucket(bucket);
      await moto.createBucket(bucket);
    }
    bench = new Bench(zones, { versitygw, front, moto });
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? ARMS : [...ARMS].reverse();
      for (const arm of order) {
        const profileDir =
          PROFILE_DIR !== undefined && arm !== 'stock' && arm !== 'bare-pipe'
            ? path.resolve(PROFILE_DIR, `${arm}-r${round}`)
            : undefined;
        await bench.ready(arm, profileDir);
        const result = await runArm(bench, arm, round);
        results.push(result);
        if (profileDir !== undefined) {
          await bench.endProfile();
          profiles.push({
            arm,
            round,
            dir: profileDir,
            gb: result.produced_bytes / 1e9,
            sidecarCpuS: result.sidecar_cpu_s ?? 0,
            window: { startUs: result.window_us[0], endUs: result.window_us[1] },
          });
        }
      }
    }
  } finally {
    await bench?.stop();
    for (const s of started.reverse()) await s.stop().catch(() => undefined);
    zones.remove();
  }

  const figures = Object.fromEntries(
    ARMS.map((arm) => [
      arm,
      armFigures(
        arm,
        results.filter((r) => r.arm === arm),
        results,
      ),
    ]),
  );
  // `arms` holds exactly the arms issue #13 names; the floor and baseline arms sit beside it.
  const arms = Object.fromEntries(Object.entries(figures).filter(([arm]) => isIssueArm(arm)));
  const otherArms = Object.fromEntries(Object.entries(figures).filter(([arm]) => !isIssueArm(arm)));
  const byPhase = Object.fromEntries(
    ARMS.map((arm) => [
      arm,
      armPhases(
        arm,
        results.filter((r) => r.arm === arm),
      ),
    ]),
  );
  const steps = Object.fromEntries(
    ARMS.flatMap((arm) => {
      const s = armSteps(results.filter((r) => r.arm === arm));
      return s ? [[arm, s]] : [];
    }),
  );
  const conditions = {
    kafka: bench?.version,
    started: startedAt.toISOString(),
    minutes: Math.round((Date.now() - startedAt.getTime()) / 600) / 100,
    rounds: ROUNDS,
    arm_order: 'round 0 forward, round 1 backward, …',
    saturation_bytes_per_arm_round: SATURATION_RECORDS * RECORD_SIZE,
    phase_seconds: PHASE_SECONDS,
    record_bytes: RECORD_SIZE,
    producer: { acks: 'all', ...PRODUCER_PROPS },
    partitions: PARTITIONS,
    replication_factor: 3,
    broker_properties: BROKER_PROPS,
    store_front_latency: STORE_LATENCY,
    wal_linger_ms: WAL_LINGER_MS,
    cpus: os.cpus().length,
    load_average_end: loadAverage(),
  };
  mkdirSync(path.dirname(OUT), { recursive: true });
  writeFileSync(
    OUT,
    `${JSON.stringify({ run: runStamp(startedAt), arms, other_arms: otherArms, by_phase: byPhase, conditions, steps_1mbps: steps, rounds: results.map(({ object_sizes, ...r }) => ({ ...r, object_sizes_count: object_sizes.length })) }, null, 2)}\n`,
  );

  console.log(`\nKafka ${bench?.version}; ${JSON.stringify(conditions)}`);
  console.log(
    '\n| arm | MB/s | p50 / p99 ms at 1 MB/s | p50 / p99 ms at 5 MB/s | sidecar CPU-s per GB | peak RSS MB | cross-zone vs stock | GETs per object per follower | object p50 KB | WAL linger ms |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  const show = (v: number | null, digits = 1) => (v === null ? '-' : v.toFixed(digits));
  for (const [arm, a] of Object.entries(figures)) {
    console.log(
      `| ${arm} | ${show(a.mbps)} | ${show(a.p50_ms_1mbps, 0)} / ${show(a.p99_ms_1mbps, 0)} | ${show(a.p50_ms_5mbps, 0)} / ${show(a.p99_ms_5mbps, 0)} | ${show(a.sidecar_cpu_s_per_gb)} | ${show(a.peak_rss_mb, 0)} | ${a.cross_zone_ratio === null ? '-' : `${(100 * a.cross_zone_ratio).toFixed(2)} %`} | ${show(a.gets_per_object_per_follower, 2)} | ${a.object_bytes_p50 === null ? '-' : (a.object_bytes_p50 / 1000).toFixed(0)} | ${a.linger_ms ?? '-'} |`,
    );
  }
  console.log(
    '\nPer round: CPU-s per produced GB (the store processes counted apart from the sidecars); cross-zone MB per produced GB by phase:',
  );
  console.log(
    '| round | arm | MB/s | sidecars | sidecars saturation / 1 MB/s / 5 MB/s (ms per object) | brokers | store front | versitygw | moto | cross-zone saturation / 1 MB/s / 5 MB/s | load avg (1 min) start → end |',
  );
  console.log('|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|');
  const phaseGb = PHASE_GB;
  for (const r of results) {
    const gb = r.produced_bytes / 1e9;
    const byPhase = Object.entries(r.cross_zone_bytes_by_phase)
      .map(([k, bytes]) => (bytes / 1e6 / phaseGb[k]!).toFixed(1))
      .join(' / ');
    const sidecarsByPhase =
      r.sidecar_cpu_s_by_phase === null
        ? '-'
        : Object.entries(r.sidecar_cpu_s_by_phase)
            .map(([k, cpuS]) => {
              const objects = r.objects_by_phase?.[k];
              const perObject = objects ? ` (${((1000 * cpuS) / objects).toFixed(2)})` : '';
              return `${(cpuS / phaseGb[k]!).toFixed(1)}${perObject}`;
            })
            .join(' / ');
    console.log(
      `| ${r.round} | ${r.arm} | ${r.saturation.mbPerSec.toFixed(1)} | ${r.sidecar_cpu_s === null ? '-' : (r.sidecar_cpu_s / gb).toFixed(1)} | ${sidecarsByPhase} | ${(r.broker_cpu_s / gb).toFixed(1)} | ${(r.store_cpu_s['store front']! / gb).toFixed(1)} | ${(r.store_cpu_s.versitygw! / gb).toFixed(1)} | ${(r.store_cpu_s.moto! / gb).toFixed(1)} | ${byPhase} | ${r.load_average_start[0]} → ${r.load_average_end[0]} |`,
    );
  }
  printGoals(figures);
  for (const [arm, s] of Object.entries(steps)) {
    console.log(`\nPer step at 1 MB/s, ${arm} (sidecar histograms; p50/p99 interpolated within buckets):`);
    console.log('| step | observations | mean ms | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|');
    for (const [label, st] of Object.entries(s))
      console.log(
        `| ${label} | ${st.count} | ${show(st.mean_ms)} | ${show(st.p50_ms)} | ${show(st.p99_ms)} |`,
      );
  }
  for (const r of results) {
    if (r.request_log_1mbps === null) continue;
    console.log(`\nBrokers' request log at 1 MB/s, ${r.arm} round ${r.round} (ms; remote = purgatory):`);
    console.log(
      '| request | per s | total p50 / p99 | remote p50 / p99 | local p50 | request queue p50 | send p50 |\n|---|---:|---:|---:|---:|---:|---:|',
    );
    for (const [kind, t] of Object.entries(r.request_log_1mbps))
      console.log(
        `| ${kind} | ${t.per_second} | ${t.total_p50_ms} / ${t.total_p99_ms} | ${t.remote_p50_ms} / ${t.remote_p99_ms} | ${t.local_p50_ms} | ${t.queue_p50_ms} | ${t.send_p50_ms} |`,
      );
  }
  for (const r of results) {
    if (r.producer_metrics_1mbps)
      console.log(
        `\nProducer's own timings at 1 MB/s, ${r.arm} round ${r.round}: ${JSON.stringify(r.producer_metrics_1mbps)}`,
      );
    if (r.sidecar_counters_1mbps && r.arm !== 'stock')
      console.log(
        `Sidecar counters moved at 1 MB/s, ${r.arm} round ${r.round}: ${JSON.stringify(r.sidecar_counters_1mbps)}`,
      );
  }
  for (const p of profiles) {
    const files = profileFiles([p.dir]);
    if (files.length === 0) {
      console.log(`\nno CPU profile written in ${p.dir}`);
      continue;
    }
    // The arm's window only: not the sidecars' start (module loading) nor their shutdown.
    const summary = summarize(readProfiles(files), p.window);
    const arm: ProfiledArm = { gb: p.gb, cpuSeconds: p.sidecarCpuS, window: p.window };
    writeFileSync(path.join(p.dir, 'arm.json'), `${JSON.stringify(arm)}\n`);
    const table = formatSummary(summary, p.gb, p.sidecarCpuS);
    writeFileSync(path.join(p.dir, 'summary.md'), `${table}\n`);
    console.log(
      `\nCPU profile, ${p.arm} round ${p.round} (${files.length} sidecars, ${p.dir}); /proc CPU of the sidecars ${(p.sidecarCpuS / p.gb).toFixed(1)} s per GB:`,
    );
    console.log(table);
  }
  console.log(`\nwrote ${OUT}`);
}

await main();
