/**
 * A diagnosis aid for issue #24's rolling-restart goal (e2e/test/lifecycle-rolling-restart.test.ts):
 * one cluster under the test's load (two idempotent acks=all VerifiableProducers at 200 msg/s over
 * 3 partitions, a WAL topic and a plain one), each broker's sidecar (or, with ROLLING_KIND=broker,
 * each broker; ROLLING_STOCK=1 runs brokers without sidecars) restarted as the kubelet does it,
 * and for each restart a timeline against its SIGTERM: per partition the last acknowledgement
 * before and the first after, then the producers' WARN lines, the stopping sidecar's log, and the
 * brokers' and the controller's lines about leaders, fencing and ISRs in the same window.
 * Asserts nothing; prints.
 *
 * Run: flock /tmp/walproxy-e2e.lock npx tsx e2e/bench/rolling-restart-timeline.ts
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createTopic } from '../src/clients/kafkajs.js';
import {
  longestGap,
  type RunningVerifiableProducer,
  startVerifiableProducer,
} from '../src/clients/verifiable-producer.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { waitForFullIsr } from '../src/cluster/leadership.js';
import { repoRoot } from '../src/cluster/paths.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { startVersitygw } from '../src/s3/versitygw.js';

const TOPICS = ['wal-rolling', 'rolling'];
const STOCK = process.env.ROLLING_STOCK === '1';
const KIND = STOCK ? 'broker' : (process.env.ROLLING_KIND ?? 'sidecar');
const WINDOW_MS = Number(process.env.ROLLING_WINDOW_MS ?? 4_000);
const OUT_DIR = path.join(repoRoot(), '.runs', 'rolling-timeline', STOCK ? 'stock' : KIND);

/** "[2026-12-04 13:55:01,234] ..." (Kafka's log4j layout, local time) as epoch ms. */
function log4jTime(line: string): number | undefined {
  const m = /^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d),(\d{3})\]/.exec(line);
  return m ? new Date(`${m[1]}T${m[2]}.${m[3]}`).getTime() : undefined;
}

function linesIn(
  fileOrText: string,
  from: number,
  to: number,
  pattern: RegExp,
  time: (l: string) => number | undefined,
  maxChars = 260,
) {
  const text = fileOrText.includes('\n')
    ? fileOrText
    : existsSync(fileOrText)
      ? readFileSync(fileOrText, 'utf8')
      : '';
  return text
    .split('\n')
    .map((line) => ({ line, t: time(line) }))
    .filter((l) => l.t !== undefined && l.t >= from && l.t <= to && pattern.test(l.line))
    .map((l) => `  +${l.t! - from} ${l.line.slice(0, maxChars)}`);
}

const jsonTime = (line: string) => {
  if (!line.startsWith('{')) return undefined;
  const time = (JSON.parse(line) as { time?: string | number }).time;
  return typeof time === 'number' ? time : time ? Date.parse(time) : undefined;
};

async function main(): Promise<void> {
  const gw = STOCK ? undefined : await startVersitygw();
  const s3 = gw && {
    endpoint: gw.endpoint,
    bucket: 'walproxy-rolling',
    prefix: 'wal/',
    walTopicGlob: 'wal-*',
  };
  if (gw && s3) await gw.createBucket(s3.bucket);
  const cluster = await KafkaCluster.start(
    STOCK
      ? { sidecars: false }
      : { sidecars: true, sidecarArgs: () => walSidecarArgs(s3!), sidecarEnv: walSidecarEnv() },
  );
  const producers: RunningVerifiableProducer[] = [];
  const stderrTails: string[] = [];
  const windows: { label: string; from: number; to: number }[] = [];
  try {
    for (const topic of TOPICS) await createTopic(cluster.bootstrap(), topic, { partitions: 3 });
    for (const topic of TOPICS)
      producers.push(
        startVerifiableProducer({
          bootstrap: cluster.bootstrap(),
          topic,
          maxMessages: 1_000_000,
          throughput: 200,
          repeatingKeys: 30,
        }),
      );
    await new Promise((r) => setTimeout(r, 8_000));
    for (const id of BROKER_IDS) {
      const from = Date.now();
      if (KIND !== 'sidecar') await cluster.stopBroker(id);
      if (KIND !== 'broker') await cluster.stopSidecar(id);
      const stopped = Date.now();
      if (KIND !== 'broker') await cluster.startSidecar(id);
      if (KIND !== 'sidecar') await cluster.startBroker(id);
      const started = Date.now();
      await waitForFullIsr(cluster.bootstrap(), TOPICS);
      await new Promise((r) => setTimeout(r, 1_500));
      const to = from + WINDOW_MS;
      // The window is read only once it has passed: an acknowledgement still to come would
      // otherwise look like a stretch running to the window's end.
      await new Promise((r) => setTimeout(r, Math.max(0, to - Date.now())));
      windows.push({ label: `${KIND} ${id}`, from, to });
      console.log(
        `\n=== ${STOCK ? 'stock ' : ''}${KIND} ${id}: SIGTERM at 0, exited +${stopped - from}, started +${started - from} ms`,
      );
      producers.forEach((p, i) => {
        const acks = p.acknowledged();
        // The test's own measure (longestGap), one partition at a time
        for (const partition of [...new Set(acks.map((a) => a.partition))].sort((x, y) => x - y)) {
          const longest = longestGap(
            acks.filter((a) => a.partition === partition),
            from,
            to,
          );
          console.log(
            `  ${TOPICS[i]}-${partition}: longest ${longest.ms} ms, from +${longest.startedAt - from} to +${longest.startedAt + longest.ms - from}`,
          );
        }
      });
      const sidecarLog = cluster.sidecars.get(id)?.logFile;
      if (sidecarLog) {
        console.log(' sidecar log:');
        for (const l of linesIn(sidecarLog, from - 50, to, /./, jsonTime)) console.log(l);
      }
      // A follower that fetched from the new leader before the leader applied the change is
      // answered UNKNOWN_LEADER_EPOCH and sets the partition aside for replica.fetch.backoff.ms
      // (docs/operations.md, "Found"); logged only with
      // BROKER_DEBUG_LOGGERS=kafka.server.ReplicaFetcherThread.
      const earlyFetches = BROKER_IDS.flatMap((b) =>
        linesIn(
          path.join(cluster.workDir, `broker-${b}`, 'logs', 'server.log'),
          from,
          to,
          /smaller leader epoch/,
          log4jTime,
        ),
      ).length;
      console.log(` followers answered UNKNOWN_LEADER_EPOCH by a new leader: ${earlyFetches} partition(s)`);
      console.log(' brokers and controller:');
      const interesting =
        /fenc|Fenc|leader|Leader|Shutdown|shutdown|ISR|isr|NOT_LEADER|disconnect|Disconnect|unfenc|Unfenc|epoch/;
      for (const b of BROKER_IDS) {
        const file = path.join(cluster.workDir, `broker-${b}`, 'logs', 'server.log');
        const lines = linesIn(file, from - 50, to, interesting, log4jTime);
        console.log(`  broker ${b}: ${lines.length} lines`);
        for (const l of lines.slice(0, 25)) console.log(`  ${l}`);
      }
      for (const l of linesIn(cluster.controllerLogFile(), from - 50, to, interesting, log4jTime).slice(
        0,
        25,
      ))
        console.log(`  controller ${l}`);
    }
  } finally {
    for (const p of producers) {
      const result = await p.stop();
      stderrTails.push(result.stderr);
    }
    // Every producer line of each window, in a file per window (DEBUG runs write thousands).
    mkdirSync(OUT_DIR, { recursive: true });
    for (const w of windows) {
      const lines = stderrTails.flatMap((tail, i) =>
        // Whole lines: a Produce request's partitions are at the end of its DEBUG line.
        linesIn(tail, w.from - 50, w.to, /./, log4jTime, Number.POSITIVE_INFINITY).map(
          (l) => `${TOPICS[i]} ${l}`,
        ),
      );
      const file = path.join(OUT_DIR, `${w.label.replace(' ', '-')}.producers.log`);
      writeFileSync(file, `${lines.join('\n')}\n`);
      console.log(`\n producers' lines around ${w.label}: ${lines.length} in ${file}; the first 12:`);
      for (const l of lines.slice(0, 12)) console.log(`  ${l}`);
    }
    await cluster.stop({ keepLogs: process.env.ROLLING_KEEP_LOGS === '1' });
    await gw?.stop();
  }
}

await main();
