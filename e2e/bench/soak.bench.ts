/**
 * `make bench-soak` (issue #12, Measure): a memory soak. One 3-broker cluster with sidecars run
 * as the Helm chart runs them by default: a memory limit of SOAK_MEMORY_LIMIT_MB (512, the chart's
 * default `sidecar.resources.limits.memory`; here given as --memory-limit-bytes, which the
 * sidecar would read from its cgroup) and NODE_OPTIONS=--max-old-space-size at V8's share of it; every
 * other bound derived from the limit (no other memory flag). One WAL topic whose partitions are led by every broker, and
 * Kafka's ProducerPerformance making many small batches (linger.ms=0, batch.size=0: one record
 * per batch) at SOAK_BATCHES_PER_S per broker for SOAK_SECONDS. Every SOAK_SAMPLE_S it reads each
 * sidecar's VmRSS and VmHWM from /proc/<pid>/status and its /counters (batches copied into the
 * WAL, Produce requests, the batch index's size); a preloaded probe (soak-memory-probe.cjs) logs
 * the sidecar's process.memoryUsage() (JS heap, Buffers), which /metrics does not export.
 *
 * The rate asked for is a target: the batches/s reached are read from the leaders' sidecars
 * (`wal.produce.batchesCopied`), and the CPU every process used is reported beside them, so a
 * shortfall shows where the two cores went.
 *
 * Writes `.runs/bench/soak.json` (per-sidecar series, rates, peak RSS, flatness: the RSS slope of
 * a least-squares line over SOAK_STEADY_FROM_S..end in MB/min and max − min in that window) and
 * prints a table. Asserts nothing.
 *
 * Run: flock /tmp/walproxy-e2e.lock npx tsx e2e/bench/soak.bench.ts
 *   SOAK_SECONDS (600), SOAK_BATCHES_PER_S (5000, per broker), SOAK_SAMPLE_S (5),
 *   SOAK_PARTITIONS_PER_BROKER (12), SOAK_PRODUCERS (2), SOAK_RECORD_BYTES (256), SOAK_ACKS (1),
 *   SOAK_STEADY_FROM_S (60), SOAK_MEMORY_LIMIT_MB (512),
 *   SOAK_PROBE_SNAPSHOT_AT_S (none: seconds after each sidecar's start to write a heap snapshot at)
 * Again from a recorded run, starting nothing: npx tsx e2e/bench/soak.bench.ts --from .runs/bench/soak.json
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { memoryBounds } from '@walproxy/proxy';
import { kafkaToolJavaArgs, propertiesFile } from '../src/clients/java-tools.js';
import { createTopic, withAdmin } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster, type SidecarCounters } from '../src/cluster/kafka-cluster.js';
import { repoRoot } from '../src/cluster/paths.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { processCpuSeconds } from '../src/s3/s3-server.js';
import { startVersitygw } from '../src/s3/versitygw.js';
import { runStamp } from './run-stamp.js';
import {
  analyse,
  type HeapSample,
  type ProcSample,
  type RawSidecar,
  report,
  round,
  type SoakResult,
} from './soak-analysis.js';

function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name}=${raw}: expected a positive number`);
  return value;
}

const SECONDS = positive('SOAK_SECONDS', 600);
const BATCHES_PER_S = positive('SOAK_BATCHES_PER_S', 5_000);
const SAMPLE_S = positive('SOAK_SAMPLE_S', 5);
const PARTITIONS_PER_BROKER = Math.round(positive('SOAK_PARTITIONS_PER_BROKER', 12));
const PRODUCERS = Math.round(positive('SOAK_PRODUCERS', 2));
const RECORD_BYTES = Math.round(positive('SOAK_RECORD_BYTES', 256));
// acks=1 by default: the broker answers after its own append, so the producer's rate does not
// hang on the followers' round trips through the store; followers still replicate every batch
// through the WAL, which is what fills the sidecars' memory.
const ACKS = process.env.SOAK_ACKS ?? '1';
const STEADY_FROM_S = positive('SOAK_STEADY_FROM_S', 60);
const MEMORY_LIMIT_MB = Math.round(positive('SOAK_MEMORY_LIMIT_MB', 512));
const TOPIC = 'wal-soak';
const SNAPSHOTS = process.env.SOAK_PROBE_SNAPSHOT_AT_S ?? '';
const MB = 1024 * 1024;
/** V8's share of the limit, as the chart gives it (proxy/src/memory-budget.ts). */
const HEAP_MB = Math.floor(memoryBounds(MEMORY_LIMIT_MB * MB, 'flag').heapBytes / MB);
const RESULTS = path.join(repoRoot(), '.runs', 'bench', 'soak.json');

/** VmRSS and VmHWM of `pid` in MB (proc(5)). */
function procMemory(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

/**
 * The memory limit of the cgroup `pid` runs in, as the kernel states it (cgroup v2 memory.max, or
 * v1 memory.limit_in_bytes), or undefined where none is readable: what a sidecar deriving its
 * bounds from the cgroup would find.
 */
function cgroupMemoryLimit(pid: number): string | undefined {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.map((l) => /^\d+:memory:(.*)$/.exec(l)?.[1]).find((p) => p !== undefined);
  const v2 = lines.find((l) => l.startsWith('0::'))?.slice(3);
  const candidates = [
    ...(v1 === undefined ? [] : [path.join('/sys/fs/cgroup/memory', v1, 'memory.limit_in_bytes')]),
    ...(v2 === undefined ? [] : [path.join('/sys/fs/cgroup', v2, 'memory.max')]),
  ];
  const file = candidates.find((f) => existsSync(f));
  return file ? `${readFileSync(file, 'utf8').trim()} (${file})` : undefined;
}

/** Busy and total jiffies of the whole machine (/proc/stat's first line). */
function machineJiffies(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

async function counters(cluster: KafkaCluster, id: number): Promise<SidecarCounters> {
  // A heap snapshot (SOAK_PROBE_SNAPSHOT_AT_S) stops the sidecar for seconds: wait it out then.
  const timeoutMs = SNAPSHOTS ? 60_000 : 3_000;
  const response = await fetch(`${cluster.adminUrl(id)}/counters`, {
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!response.ok) throw new Error(`sidecar ${id} counters: HTTP ${response.status}`);
  return (await response.json()) as SidecarCounters;
}

function produceRequests(c: SidecarCounters): number {
  const requests = c.listeners.client?.requests ?? {};
  return Object.entries(requests)
    .filter(([name]) => name.startsWith('Produce '))
    .reduce((n, [, count]) => n + count, 0);
}

/** One ProducerPerformance process, its interval lines kept as they come. */
interface LoadProcess {
  child: ChildProcess;
  intervals: { recordsPerSec: number; avgLatencyMs: number; maxLatencyMs: number }[];
  tail: string;
  exited: Promise<number | null>;
}

function startProducer(bootstrap: string, recordsPerSec: number): LoadProcess {
  const props = {
    'bootstrap.servers': bootstrap,
    acks: ACKS,
    'linger.ms': 0,
    // 0: a batch holds one record, so records/s are batches/s; the uniform sticky partitioner
    // also moves on after every batch.size bytes, spreading the records over every partition.
    'batch.size': 0,
  };
  const args = kafkaToolJavaArgs(
    'org.apache.kafka.tools.ProducerPerformance',
    [
      '--topic',
      TOPIC,
      // More than the soak needs: the load runs until the soak stops it at its deadline.
      '--num-records',
      String(Math.ceil(recordsPerSec * (SECONDS + 60))),
      '--record-size',
      String(RECORD_BYTES),
      '--throughput',
      String(recordsPerSec),
      '--producer.config',
      propertiesFile('soak-producer', props),
    ],
    { heap: '256m' },
  );
  const child = spawn('java', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const load: LoadProcess = {
    child,
    intervals: [],
    tail: '',
    exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const m =
        /records sent, ([\d.]+) records\/sec .*?, ([\d.]+) ms avg latency, ([\d.]+) ms max latency/.exec(
          line,
        );
      if (m && !line.includes('50th')) {
        load.intervals.push({
          recordsPerSec: Number(m[1]),
          avgLatencyMs: Number(m[2]),
          maxLatencyMs: Number(m[3]),
        });
      }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    load.tail = (load.tail + chunk.toString('utf8')).slice(-4_000);
  });
  return load;
}

async function stopProducer(load: LoadProcess): Promise<void> {
  if (load.child.exitCode !== null || load.child.signalCode !== null) return;
  load.child.kill('SIGTERM');
  const timer = setTimeout(() => load.child.kill('SIGKILL'), 10_000);
  await load.exited;
  clearTimeout(timer);
}

/** The sidecar's own account of the memory bound it derived (its `memory bounds` log line), if it logs one. */
function memoryBoundsLine(logFile: string): unknown {
  const text = readFileSync(logFile, 'utf8').slice(0, 1_000_000);
  const line = text.split('\n').find((l) => /memory bounds/i.test(l));
  if (!line) return null;
  try {
    return JSON.parse(line);
  } catch {
    return line;
  }
}

function heapSeries(probeDir: string, pid: number, t0: number): HeapSample[] {
  const file = path.join(probeDir, `${pid}.jsonl`);
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, number>)
    .map((m) => ({
      t_s: round((m.t! - t0) / 1000),
      rss_mb: round(m.rss! / MB),
      heap_used_mb: round(m.heapUsed! / MB),
      heap_total_mb: round(m.heapTotal! / MB),
      external_mb: round(m.external! / MB),
      array_buffers_mb: round(m.arrayBuffers! / MB),
    }));
}

/** Heap snapshots the probe wrote (SOAK_PROBE_SNAPSHOT_AT_S), moved to .runs/bench/soak-snapshots/. */
function keepHeapSnapshots(probeDir: string): void {
  const snapshots = readdirSync(probeDir).filter((f) => f.endsWith('.heapsnapshot'));
  if (snapshots.length === 0) return;
  const into = path.join(path.dirname(RESULTS), 'soak-snapshots');
  mkdirSync(into, { recursive: true });
  for (const f of snapshots) renameSync(path.join(probeDir, f), path.join(into, f));
  console.error(
    `soak: ${snapshots.length} heap snapshots in ${into} (compare two: npx tsx e2e/bench/heap-diff.ts A B)`,
  );
}

async function leadersPerBroker(bootstrap: string): Promise<Record<number, number>> {
  return withAdmin(bootstrap, async (admin) => {
    const metadata = await admin.fetchTopicMetadata({ topics: [TOPIC] });
    const leaders: Record<number, number> = Object.fromEntries(BROKER_IDS.map((id) => [id, 0]));
    for (const p of metadata.topics[0]?.partitions ?? []) leaders[p.leader] = (leaders[p.leader] ?? 0) + 1;
    return leaders;
  });
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const probeDir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-soak-probe-'));
  const gw = await startVersitygw();
  const s3 = { endpoint: gw.endpoint, bucket: 'walproxy-soak', prefix: 'wal/', walTopicGlob: 'wal-*' };
  let cluster: KafkaCluster | undefined;
  const loads: LoadProcess[] = [];
  let failure: string | undefined;
  try {
    await gw.createBucket(s3.bucket);
    cluster = await KafkaCluster.start({
      sidecars: true,
      jvmProfile: 'throughput',
      // A heap snapshot stops a sidecar for seconds, and with it its broker's heartbeats (they
      // pass through it): without a longer session the controller fences that broker and its
      // leaderships move, which is not the load being diagnosed (seen: two of three fenced).
      ...(SNAPSHOTS ? { brokerProperties: { 'broker.session.timeout.ms': '60000' } } : {}),
      sidecarArgs: () => walSidecarArgs(s3, [`--memory-limit-bytes=${MEMORY_LIMIT_MB * MB}`]),
      sidecarEnv: {
        ...walSidecarEnv(),
        // As the chart sets it (deploy/helm/walproxy/templates/_sidecar.tpl): V8's share of the limit.
        NODE_OPTIONS: `--max-old-space-size=${HEAP_MB} --require ${path.join(import.meta.dirname, 'soak-memory-probe.cjs')}`,
        SOAK_PROBE_DIR: probeDir,
        SOAK_PROBE_INTERVAL_MS: String(SAMPLE_S * 1000),
        SOAK_PROBE_SNAPSHOT_AT_S: SNAPSHOTS,
      },
    });
    const bootstrap = cluster.bootstrap();
    await createTopic(bootstrap, TOPIC, { partitions: PARTITIONS_PER_BROKER * BROKER_IDS.length });
    const leaders = await leadersPerBroker(bootstrap);
    const pids = new Map(BROKER_IDS.map((id) => [id, cluster!.sidecars.get(id)!.pid!]));
    const brokerPids = BROKER_IDS.map((id) => cluster!.brokers.get(id)!.pid!);
    const series = new Map<number, ProcSample[]>(BROKER_IDS.map((id) => [id, []]));

    const sample = async (t0: number) => {
      const t_s = round((Date.now() - t0) / 1000);
      await Promise.all(
        BROKER_IDS.map(async (id) => {
          const sidecar = cluster!.sidecars.get(id)!;
          if (!sidecar.running)
            throw new Error(`sidecar ${id} exited during the soak; log ${sidecar.logFile}`);
          const memory = procMemory(pids.get(id)!);
          const c = await counters(cluster!, id);
          const index = (c.wal as { batchIndex?: { entries: number; allocatedBytes: number } } | undefined)
            ?.batchIndex;
          series.get(id)!.push({
            t_s,
            rss_mb: round(memory.rss),
            hwm_mb: round(memory.hwm),
            batches_copied: c.wal?.produce.batchesCopied ?? 0,
            produce_requests: produceRequests(c),
            index_entries: index?.entries ?? 0,
            index_mb: round((index?.allocatedBytes ?? 0) / MB),
            pending_mb: round((c.wal?.writer.pendingBytes ?? 0) / MB),
          });
        }),
      );
    };

    const cpu = () => ({
      sidecars: [...pids.values()].map(processCpuSeconds),
      brokers: brokerPids.map(processCpuSeconds),
      s3: processCpuSeconds(gw.pid),
      machine: machineJiffies(),
    });
    const t0 = Date.now();
    await sample(t0);
    const cpuBefore = cpu();
    const perProducer = (BATCHES_PER_S * BROKER_IDS.length) / PRODUCERS;
    for (let i = 0; i < PRODUCERS; i++) loads.push(startProducer(bootstrap, perProducer));
    console.error(
      `soak: ${SECONDS} s at ${BATCHES_PER_S} batches/s per broker (${PRODUCERS} producers × ${perProducer}/s, acks=${ACKS}, ${RECORD_BYTES} B records), ${PARTITIONS_PER_BROKER * BROKER_IDS.length} partitions, leaders ${JSON.stringify(leaders)}`,
    );
    const deadline = t0 + SECONDS * 1000;
    let producerCpu = 0;
    const producerCpuSeen = new Map<number, number>();
    for (let k = 1; ; k++) {
      const next = t0 + k * SAMPLE_S * 1000;
      if (next > deadline) break;
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
      const exited = loads.find((l) => l.child.exitCode !== null || l.child.signalCode !== null);
      if (exited) {
        failure = `a producer exited early (code ${exited.child.exitCode}):\n${exited.tail}`;
        break;
      }
      for (const l of loads) producerCpuSeen.set(l.child.pid!, processCpuSeconds(l.child.pid!));
      try {
        await sample(t0);
      } catch (error) {
        failure = String(error);
        break;
      }
      if (k % Math.max(1, Math.round(60 / SAMPLE_S)) === 0) {
        const line = BROKER_IDS.map((id) => {
          const s = series.get(id)!;
          const last = s.at(-1)!;
          const prev = s.at(-1 - Math.round(60 / SAMPLE_S)) ?? s[0]!;
          const rate = (last.batches_copied - prev.batches_copied) / (last.t_s - prev.t_s);
          return `sidecar ${id} ${last.rss_mb} MB RSS, ${rate.toFixed(0)} batches/s`;
        }).join('; ');
        console.error(`soak t=${series.get(1)!.at(-1)!.t_s} s: ${line}`);
      }
    }
    const cpuAfter = cpu();
    producerCpu = [...producerCpuSeen.values()].reduce((a, b) => a + b, 0);
    await Promise.all(loads.map(stopProducer));

    const wallS = series.get(1)!.at(-1)!.t_s - series.get(1)![0]!.t_s || 1;
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const cores = (before: number[], after: number[]) => round((sum(after) - sum(before)) / wallS, 2);
    const machine = cpuAfter.machine;
    const cpuCores = {
      sidecars: cores(cpuBefore.sidecars, cpuAfter.sidecars),
      brokers: cores(cpuBefore.brokers, cpuAfter.brokers),
      s3: round((cpuAfter.s3 - cpuBefore.s3) / wallS, 2),
      producers: round(producerCpu / wallS, 2),
      machine_busy: round(
        ((machine.busy - cpuBefore.machine.busy) / (machine.total - cpuBefore.machine.total)) *
          os.cpus().length,
        2,
      ),
      machine_cores: os.cpus().length,
    };
    const finalCounters = Object.fromEntries(
      await Promise.all(BROKER_IDS.map(async (id) => [id, await counters(cluster!, id).catch(() => null)])),
    );

    const sidecars = BROKER_IDS.map((id) => {
      const raw: RawSidecar = {
        broker_id: id,
        pid: pids.get(id)!,
        partitions_led: leaders[id] ?? 0,
        memory_bounds_log: memoryBoundsLine(cluster!.sidecars.get(id)!.logFile),
        cgroup_memory_limit: cgroupMemoryLimit(pids.get(id)!) ?? null,
        series: series.get(id)!,
        heap_series: heapSeries(probeDir, pids.get(id)!, t0),
      };
      return { ...analyse(raw, STEADY_FROM_S), ...raw };
    });
    const result: SoakResult = {
      date: startedAt.toISOString(),
      run: runStamp(startedAt),
      kafka_version: cluster.version,
      command: 'flock /tmp/walproxy-e2e.lock npx tsx e2e/bench/soak.bench.ts',
      settings: {
        seconds: SECONDS,
        batches_per_s_per_broker_target: BATCHES_PER_S,
        sample_s: SAMPLE_S,
        partitions: PARTITIONS_PER_BROKER * BROKER_IDS.length,
        producers: PRODUCERS,
        record_bytes: RECORD_BYTES,
        acks: ACKS,
        steady_from_s: STEADY_FROM_S,
        sidecar_memory_flags: `--memory-limit-bytes=${MEMORY_LIMIT_MB * MB}, NODE_OPTIONS=--max-old-space-size=${HEAP_MB} (the chart's way of running a ${MEMORY_LIMIT_MB}Mi limit)`,
        s3: 'versitygw on loopback',
      },
      failure: failure ?? null,
      load_average: readFileSync('/proc/loadavg', 'utf8').trim(),
      cpu_cores: cpuCores,
      producer_records_per_s: loads.map((l) => {
        const steady = l.intervals.slice(1);
        return steady.length ? round(sum(steady.map((i) => i.recordsPerSec)) / steady.length, 0) : null;
      }),
      producer_avg_latency_ms: loads.map((l) => {
        const steady = l.intervals.slice(1);
        return steady.length ? round(sum(steady.map((i) => i.avgLatencyMs)) / steady.length) : null;
      }),
      // ProducerPerformance's own 5 s reports: records/s and the latency its backlog adds.
      producer_intervals: loads.map((l) => l.intervals),
      sidecars,
      final_counters: finalCounters,
    };
    mkdirSync(path.dirname(RESULTS), { recursive: true });
    writeFileSync(RESULTS, `${JSON.stringify(result, null, 1)}\n`);
    report(result);
    console.log(`results: ${RESULTS}`);
    if (failure) console.error(`soak: stopped early: ${failure}`);
  } catch (error) {
    failure = String(error);
    throw error;
  } finally {
    await Promise.all(loads.map(stopProducer));
    await cluster?.stop({ keepLogs: failure !== undefined });
    await gw.stop();
    keepHeapSnapshots(probeDir);
    rmSync(probeDir, { recursive: true, force: true });
    if (failure) process.exitCode = 1;
  }
}

// `--from <soak.json>`: print the tables again from a recorded run (the analysis is recomputed
// from its series), without starting anything.
const fromIndex = process.argv.indexOf('--from');
if (fromIndex >= 0) {
  const recorded = JSON.parse(readFileSync(process.argv[fromIndex + 1] ?? RESULTS, 'utf8')) as SoakResult;
  recorded.sidecars = recorded.sidecars.map((raw) => ({
    ...raw,
    ...analyse(raw, recorded.settings.steady_from_s),
  }));
  report(recorded);
} else {
  await main();
}
