import { type ChildProcess, spawn } from 'node:child_process';
import { kafkaLibDir, kafkaVersion } from '../cluster/paths.js';
import { killWithHarness } from '../cluster/process.js';
import { propertiesFile, runKafkaTool, toolsLogFlag } from './java-tools.js';

/** One acknowledged send, as the producer's callback reported it. */
export interface Acknowledgement {
  value: string;
  partition: number;
  offset: number;
  /** When the callback ran (the tool's System.currentTimeMillis()). */
  timestamp: number;
}

export interface VerifiableProducerResult {
  /** Values the producer's callback saw acknowledged, with where they landed and when. */
  acknowledged: Acknowledgement[];
  /** Values whose send failed (the callback got an exception). */
  failed: string[];
  code: number | null;
  /** The tool's log (WARN and above): why sends failed or the tool stopped. */
  stderr: string;
}

export interface VerifiableProducerOptions {
  bootstrap: string;
  topic: string;
  maxMessages: number;
  /** Messages per second (bounded load). */
  throughput: number;
  props?: Record<string, string | number>;
  timeoutMs?: number;
  /** Values become `<prefix>.<n>` (the tool's --value-prefix), to tell producers apart in one topic. */
  valuePrefix?: number;
  /**
   * Keys cycle through "0".."N-1" (the tool's --repeating-keys), so every partition gets records
   * all the time. Without keys the sticky partitioner stays on one partition until batch.size
   * bytes went there: seconds at a low rate, which would read as a stall of the others.
   */
  repeatingKeys?: number;
  /** Run the tool inside this network namespace (e.g. a zone's client namespace). */
  netns?: string;
}

function toolArgs(opts: VerifiableProducerOptions): string[] {
  const props = {
    // VerifiableProducer sets retries=0 itself, which idempotence refuses: retry until the
    // delivery timeout, as a default producer does.
    'enable.idempotence': 'true',
    retries: 2_147_483_647,
    'delivery.timeout.ms': 120_000,
    'request.timeout.ms': 10_000,
    ...opts.props,
  };
  return [
    '--bootstrap-server',
    opts.bootstrap,
    '--topic',
    opts.topic,
    '--max-messages',
    String(opts.maxMessages),
    '--throughput',
    String(opts.throughput),
    // One token: the argument parser would read a separate '-1' as an option.
    '--acks=-1',
    ...(opts.valuePrefix !== undefined ? ['--value-prefix', String(opts.valuePrefix)] : []),
    ...(opts.repeatingKeys !== undefined ? ['--repeating-keys', String(opts.repeatingKeys)] : []),
    '--producer.config',
    propertiesFile('verifiable', props),
  ];
}

function parseEvents(stdout: string): Pick<VerifiableProducerResult, 'acknowledged' | 'failed'> {
  const acknowledged: Acknowledgement[] = [];
  const failed: string[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const event = JSON.parse(line) as {
      name: string;
      timestamp: number;
      value?: string;
      partition?: number;
      offset?: number;
    };
    if (event.name === 'producer_send_success') {
      acknowledged.push({
        value: event.value!,
        partition: event.partition!,
        offset: event.offset!,
        timestamp: event.timestamp,
      });
    } else if (event.name === 'producer_send_error') failed.push(event.value ?? '?');
  }
  return { acknowledged, failed };
}

/**
 * Kafka's own VerifiableProducer (kafka-tools, used by Kafka's system tests): it sends
 * `maxMessages` values "0", "1", ... and prints one JSON event per callback, so what counts as
 * acknowledged is what the Java producer itself reported acknowledged, record by record.
 */
export async function verifiableProducer(opts: VerifiableProducerOptions): Promise<VerifiableProducerResult> {
  const result = await runKafkaTool('org.apache.kafka.tools.VerifiableProducer', toolArgs(opts), {
    timeoutMs: opts.timeoutMs ?? 300_000,
    ...(opts.netns ? { netns: opts.netns } : {}),
  });
  return { ...parseEvents(result.stdout), code: result.code, stderr: result.stderr };
}

/** A VerifiableProducer running in the background until `stop()` (or `maxMessages`). */
export interface RunningVerifiableProducer {
  /** Acknowledgements so far (read as the tool prints them: cheap to call often). */
  acknowledged(): Acknowledgement[];
  /** Resolves once the tool reported that its producer started (or it exited). */
  readonly started: Promise<void>;
  /**
   * SIGTERM: the tool's shutdown hook closes the producer, which completes (acknowledges or
   * fails) every send in flight before the JVM exits; SIGKILL after `graceMs`.
   */
  stop(graceMs?: number): Promise<VerifiableProducerResult>;
}

/** Starts a VerifiableProducer that runs until stopped (bounded by `timeoutMs`, default 10 min). */
export function startVerifiableProducer(opts: VerifiableProducerOptions): RunningVerifiableProducer {
  const child: ChildProcess = spawn(
    'java',
    [
      '-Xmx256m',
      '-XX:+UseSerialGC',
      // C1 only, as the brokers and the other tools run in the tests (kafka-cluster.ts): at a
      // few hundred records a second C2 buys nothing, and its compiler threads took ~0.5 of a
      // core per producer for the first ~30 s (profiled beside a sidecar restart in
      // lifecycle-store), which the cluster under test then did not get. The producer is the
      // instrument here, not what is measured.
      '-XX:TieredStopAtLevel=1',
      toolsLogFlag(kafkaVersion()),
      '-cp',
      `${kafkaLibDir()}/*`,
      'org.apache.kafka.tools.VerifiableProducer',
      ...toolArgs(opts),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  killWithHarness(child);
  // Parsed line by line as it arrives: a test polling the acknowledgements of a producer that
  // runs for minutes must not parse its whole output on every poll.
  const events: Pick<VerifiableProducerResult, 'acknowledged' | 'failed'> = { acknowledged: [], failed: [] };
  let partialLine = '';
  let stderr = '';
  let onStarted: () => void = () => undefined;
  const started = new Promise<void>((resolve) => {
    onStarted = resolve;
  });
  child.stdout!.on('data', (d: Buffer) => {
    const text = partialLine + d.toString();
    const end = text.lastIndexOf('\n') + 1;
    partialLine = text.slice(end);
    const parsed = parseEvents(text.slice(0, end));
    for (const a of parsed.acknowledged) events.acknowledged.push(a);
    for (const f of parsed.failed) events.failed.push(f);
    if (text.includes('"startup_complete"')) onStarted();
  });
  child.stderr!.on('data', (d: Buffer) => {
    // The tail only: a producer retrying for minutes logs a line per retry.
    // (TOOLS_DEBUG_LOGGERS, a diagnosis run, keeps far more: its DEBUG lines are the point.)
    stderr = (stderr + d.toString()).slice(process.env.TOOLS_DEBUG_LOGGERS ? -50_000_000 : -200_000);
  });
  // 'close', not 'exit': the last acknowledgements may still be in the pipe when the JVM exits.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const guard = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 600_000);
  void exited.then(() => {
    clearTimeout(guard);
    onStarted();
  });
  process.once('exit', () => child.kill('SIGKILL'));
  return {
    acknowledged: () => events.acknowledged,
    started,
    async stop(graceMs = 30_000) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(timer);
      const rest = parseEvents(partialLine);
      return {
        acknowledged: [...events.acknowledged, ...rest.acknowledged],
        failed: [...events.failed, ...rest.failed],
        code,
        stderr,
      };
    },
  };
}

/**
 * The longest stretch without an acknowledgement that overlaps [from, to], per partition (a
 * partition stalls on its own: the others keep being acknowledged meanwhile). Stretches are
 * measured between consecutive acknowledgements of the partition, so one that began before
 * `from` counts whole; a partition not acknowledged again by `to` counts its stretch up to `to`.
 */
export function longestGapMs(acks: readonly Acknowledgement[], from: number, to: number): number {
  return longestGap(acks, from, to).ms;
}

/** The longest stretch as longestGapMs measures it, with where it was: its partition and start. */
export function longestGap(
  acks: readonly Acknowledgement[],
  from: number,
  to: number,
): { ms: number; partition: number; startedAt: number } {
  const byPartition = new Map<number, number[]>();
  for (const a of acks) {
    const times = byPartition.get(a.partition) ?? [];
    times.push(a.timestamp);
    byPartition.set(a.partition, times);
  }
  let longest = { ms: 0, partition: -1, startedAt: from };
  for (const [partition, times] of byPartition) {
    times.sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) {
      const [start, end] = [times[i - 1]!, times[i]!];
      if (end >= from && start <= to && end - start > longest.ms)
        longest = { ms: end - start, partition, startedAt: start };
    }
    const last = times.at(-1)!;
    if (last < to && to - Math.max(last, from) > longest.ms)
      longest = { ms: to - Math.max(last, from), partition, startedAt: Math.max(last, from) };
  }
  return longest;
}
