import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { consumeValues, createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import {
  type Acknowledgement,
  longestGap,
  type RunningVerifiableProducer,
  startVerifiableProducer,
} from '../src/clients/verifiable-producer.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { endOffsetTotal, waitForFullIsr } from '../src/cluster/leadership.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { startVersitygw, type VersitygwServer } from '../src/s3/versitygw.js';
import { compareReplicas } from '../src/wal/inspect.js';

// Issue 12, case 6: a rolling restart as Kubernetes does it (SIGTERM, wait for the exit, start
// again, wait until ready), under load, must cost no more than stock Kafka's broker restart. The
// stock figure is measured in the same run on a cluster without sidecars, restarting each broker
// the same way under the same load: the broker-alone restart of the walproxy cluster already
// goes through the sidecars, so it could not show what they add.
const WAL_TOPIC = 'wal-rolling';
const PLAIN_TOPIC = 'rolling';
const TOPICS = [WAL_TOPIC, PLAIN_TOPIC];
/** How long the load runs before the first restart. */
const STEADY_LOAD_MS = 8_000;

type Kind = 'sidecar' | 'broker' | 'pod';

interface Load {
  producers: RunningVerifiableProducer[];
  stop(): Promise<{ verifiable: Acknowledgement[][]; nonIdempotent: string[] }>;
}

/**
 * Idempotent acks=all VerifiableProducers on both topics (their acknowledgements carry
 * timestamps), and a non-idempotent kafkajs producer writing to both in turn.
 */
async function startLoad(bootstrap: string): Promise<Load> {
  const producers = TOPICS.map((topic) =>
    startVerifiableProducer({ bootstrap, topic, maxMessages: 1_000_000, throughput: 200, repeatingKeys: 30 }),
  );
  const kafka = kafkaClient(bootstrap, 'walproxy-e2e-rolling', {
    retries: 60,
    initialRetryTime: 100,
    maxRetryTime: 1_000,
  });
  const producer = kafka.producer({ idempotent: false, maxInFlightRequests: 1 });
  await producer.connect();
  const acked: string[] = [];
  let stopping = false;
  const sending = (async () => {
    // Bounded: 20,000 sends or 10 minutes, whichever comes first.
    const deadline = Date.now() + 600_000;
    for (let i = 0; i < 20_000 && !stopping && Date.now() < deadline; i++) {
      const value = `n-${i}`;
      await producer.send({ topic: TOPICS[i % 2]!, acks: -1, messages: [{ value }] });
      acked.push(value);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const started = Date.now();
  while (producers.some((p) => new Set(p.acknowledged().map((a) => a.partition)).size < 3)) {
    if (Date.now() - started > 60_000) throw new Error('load not acknowledged on every partition');
    await new Promise((r) => setTimeout(r, 200));
  }
  // A rolling restart meets a cluster that has been serving: the first restart is taken after
  // STEADY_LOAD_MS of load, not the moment every partition has an acknowledgement. Restarting at
  // once measured the clients' start-up too: the first sidecar restart was the slowest sidecar
  // restart in all five such runs (624-886 ms, ending as the old sidecar exited; the others
  // 204-573 ms), stock's first restart its slowest in three of five; after 8 s of load the first
  // sidecar restart took 359 and 265 ms (docs/operations.md). Both arms wait the same.
  await new Promise((r) => setTimeout(r, STEADY_LOAD_MS));
  return {
    producers,
    async stop() {
      stopping = true;
      await sending;
      await producer.disconnect();
      const results = await Promise.all(producers.map((p) => p.stop()));
      return { verifiable: results.map((r) => r.acknowledged), nonIdempotent: acked };
    },
  };
}

interface Restart {
  kind: Kind;
  id: number;
  from: number;
  /** When the stopped processes had exited. */
  stopped: number;
  to: number;
}

/** One restart as the kubelet does it, from its SIGTERM until the pod is ready and in sync again. */
async function restart(cluster: KafkaCluster, kind: Kind, id: number): Promise<Restart> {
  const from = Date.now();
  if (kind !== 'sidecar') await cluster.stopBroker(id);
  // A native sidecar stops after the broker has exited.
  if (kind !== 'broker') await cluster.stopSidecar(id);
  const stopped = Date.now();
  // ... and starts first.
  if (kind !== 'broker') await cluster.startSidecar(id);
  if (kind !== 'sidecar') await cluster.startBroker(id);
  const to = Date.now();
  await waitForFullIsr(cluster.bootstrap(), TOPICS);
  return { kind, id, from, stopped, to };
}

/**
 * The longest stretch without an acknowledgement on any partition of any VerifiableProducer, and
 * a line saying where it fell (topic, partition, start and end against the SIGTERM, the exit and
 * the start), for whoever has to explain a slow one.
 */
function gap(load: Load, r: Restart, arm: 'stock' | 'walproxy' = 'walproxy'): number {
  const gaps = load.producers.map((p, i) => ({
    topic: TOPICS[i]!,
    ...longestGap(p.acknowledged(), r.from, r.to),
  }));
  const worst = gaps.reduce((a, b) => (b.ms > a.ms ? b : a));
  console.log(
    `[rolling] ${arm} ${r.kind} ${r.id}: longest ${worst.ms} ms on ${worst.topic}-${worst.partition}, from +${worst.startedAt - r.from} to +${worst.startedAt + worst.ms - r.from} ms after the SIGTERM; stopped at +${r.stopped - r.from}, started at +${r.to - r.from}`,
  );
  return worst.ms;
}

async function checkNothingLost(cluster: KafkaCluster, acked: Awaited<ReturnType<Load['stop']>>) {
  const bootstrap = cluster.bootstrap();
  const read = new Map<string, string[]>();
  for (const topic of TOPICS)
    read.set(topic, await consumeValues(bootstrap, topic, await endOffsetTotal(bootstrap, topic)));
  TOPICS.forEach((topic, i) => {
    const values = read.get(topic)!;
    const seen = new Set(values);
    // Every acknowledged value is there, and the idempotent producer wrote none twice
    expect(acked.verifiable[i]!.filter((a) => !seen.has(a.value)).map((a) => a.value)).toEqual([]);
    expect(values.filter((v) => !v.startsWith('n-')).length).toBe(
      new Set(values.filter((v) => !v.startsWith('n-'))).size,
    );
  });
  const all = new Set([...read.values()].flat());
  expect(acked.nonIdempotent.filter((v) => !all.has(v))).toEqual([]);
  for (const topic of TOPICS) expect(await compareReplicas(cluster.workDirDataDirs(), topic, 3)).toEqual([]);
}

/** Stock's figure is the median of this many rounds of three broker restarts. */
const STOCK_ROUNDS = 2;
/** Sidecar restarts are cheap (no broker restart): two rounds, as many samples as stock's. */
const SIDECAR_ROUNDS = 2;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : Math.round((sorted[mid - 1]! + sorted[mid]!) / 2);
}

const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const clusters: KafkaCluster[] = [];
let store: VersitygwServer | undefined;
let failed = false;
afterAll(async () => {
  for (const c of clusters) await c.stop({ keepLogs: failed });
  await store?.stop();
});

describe('rolling restarts under load', () => {
  it('resume acknowledgements by themselves after each sidecar, each broker and each pod restart, fencing no broker and losing nothing', async () => {
    try {
      // Given (stock) a cluster without sidecars under load, each broker restarted in turn
      const stock = await KafkaCluster.start({ sidecars: false });
      clusters.push(stock);
      for (const topic of TOPICS) await createTopic(stock.bootstrap(), topic, { partitions: 3 });
      const stockLoad = await startLoad(stock.bootstrap());
      const stockGaps: number[] = [];
      for (let round = 0; round < STOCK_ROUNDS; round++)
        for (const id of BROKER_IDS)
          stockGaps.push(gap(stockLoad, await restart(stock, 'broker', id), 'stock'));
      await checkNothingLost(stock, await stockLoad.stop());
      await stock.stop();
      clusters.pop();
      const stockMedianMs = median(stockGaps);
      const stockWorstMs = Math.max(...stockGaps);

      // Given the same behind walproxy, WAL topic included. Its store is a versitygw of its own,
      // not the suite's moto: moto (Python) spent ~30 % of a core on this load's WAL objects
      // (measured from /proc, 2026-12-05), CPU that stock's baseline, which has no store, never
      // pays, taken from the brokers on two shared cores: with moto even the broker-alone
      // restarts behind walproxy, stock Kafka's own controlled shutdown, took 2.0-2.4x stock's median;
      // with versitygw 0.85x. On AWS the store (S3 Express) runs on no pod's cores.
      const { s3 } = inject('cluster');
      store = await startVersitygw();
      await store.createBucket(s3.bucket);
      const cluster = await KafkaCluster.start({
        sidecars: true,
        sidecarArgs: () =>
          walSidecarArgs({ ...s3, endpoint: store!.endpoint, prefix: `rolling-${Date.now()}/` }),
        sidecarEnv: walSidecarEnv(),
      });
      clusters.push(cluster);
      for (const topic of TOPICS) await createTopic(cluster.bootstrap(), topic, { partitions: 3 });
      const load = await startLoad(cluster.bootstrap());
      const controllerLog = (line: string) =>
        readFileSync(cluster.controllerLogFile(), 'utf8').split(line).length - 1;
      // A broker whose session timed out (its heartbeats stopped): what a sidecar restart must not cause
      const fencings = () => controllerLog('Fencing broker');
      // A broker fenced because its heartbeat asked (WantFence): what a sidecar's stop asks for,
      // so that the broker's leaderships move before the sidecar stops serving
      const fencingsAsked = () => controllerLog('has requested and been granted fencing');

      // When each sidecar, then each broker, then each pod restarts as Kubernetes restarts them
      const gaps: Record<Kind, number[]> = { sidecar: [], broker: [], pod: [] };
      const fencedBeforeSidecars = fencings();
      const askedBeforeSidecars = fencingsAsked();
      for (let round = 0; round < SIDECAR_ROUNDS; round++)
        for (const id of BROKER_IDS) gaps.sidecar.push(gap(load, await restart(cluster, 'sidecar', id)));
      const fencedBySidecarRestarts = fencings() - fencedBeforeSidecars;
      const fencingsAskedBySidecarRestarts = fencingsAsked() - askedBeforeSidecars;
      for (const id of BROKER_IDS) gaps.broker.push(gap(load, await restart(cluster, 'broker', id)));
      for (const id of BROKER_IDS) gaps.pod.push(gap(load, await restart(cluster, 'pod', id)));
      const acked = await load.stop();
      // From each sidecar's logs: how long its stops took, and how long its broker's controller
      // path was down (from `sidecar stopped`, the last thing a stop does, to the next `sidecar ready`)
      const stopLines: number[] = [];
      const controllerDownMs: number[] = [];
      for (const id of BROKER_IDS) {
        let stoppedAt: number | undefined;
        for (const line of readFileSync(cluster.sidecars.get(id)!.logFile, 'utf8').split('\n')) {
          if (!line.startsWith('{')) continue;
          const entry = JSON.parse(line) as { msg: string; time: string; stopMs?: number };
          if (entry.msg === 'sidecar stopped') {
            stopLines.push(entry.stopMs!);
            stoppedAt = Date.parse(entry.time);
          } else if (entry.msg === 'sidecar ready' && stoppedAt !== undefined) {
            controllerDownMs.push(Date.parse(entry.time) - stoppedAt);
            stoppedAt = undefined;
          }
        }
      }
      console.log(
        `[rolling] longest stretch without an ack (ms): stock broker ${stockGaps}; sidecar ${gaps.sidecar}; broker ${gaps.broker}; pod ${gaps.pod}; sidecar stops took ${stopLines} ms; controller path down ${controllerDownMs} ms; brokers fenced by sidecar restarts: session timeouts ${fencedBySidecarRestarts}, asked ${fencingsAskedBySidecarRestarts}`,
      );

      // Then every restart's partitions were acknowledged again by themselves, within 9 s (a
      // partition stalled past that has not recovered as stock does), and each step (sidecar
      // alone, broker alone, pod) cost at most 2x a stock broker restart of the same run (issue
      // #24): its median restart against stock's median, and its worst against stock's worst. Like
      // against like: a step's worst of three against stock's median would fail stock against
      // itself (its own worst exceeded 2x its median in 2 of the 10 runs in docs/operations.md).
      for (const kind of ['sidecar', 'broker', 'pod'] as const) {
        const [kindMedian, kindWorst] = [median(gaps[kind]), Math.max(...gaps[kind])];
        console.log(
          `[rolling] ${kind}: median ${kindMedian} ms = ${(kindMedian / stockMedianMs).toFixed(2)}x stock's median ${stockMedianMs} ms; worst ${kindWorst} ms = ${(kindWorst / stockWorstMs).toFixed(2)}x stock's worst ${stockWorstMs} ms (load ${loadAverage()})`,
        );
        expect(kindWorst, kind).toBeLessThan(9_000);
        expect(kindMedian, `${kind}: median against stock's median`).toBeLessThanOrEqual(2 * stockMedianMs);
        expect(kindWorst, `${kind}: worst against stock's worst`).toBeLessThanOrEqual(2 * stockWorstMs);
      }
      // And each sidecar's stop had the controller fence its broker first (its leaderships moved
      // while the sidecar still served; restart() waited for the full ISRs, so each was unfenced
      // again by its own heartbeat through the new sidecar), and none was fenced for a session
      // that timed out
      expect(fencingsAskedBySidecarRestarts).toBe(BROKER_IDS.length * SIDECAR_ROUNDS);
      expect(fencedBySidecarRestarts).toBe(0);
      // And nothing acknowledged was lost, and the replicas are identical
      await checkNothingLost(cluster, acked);
    } catch (error) {
      failed = true;
      throw error;
    }
  });
});
