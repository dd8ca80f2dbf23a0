/**
 * `make bench-pass-through` (issue #13, "The plain pipe too"): what walproxy costs where it only
 * relays — no WAL — against the floor of this runtime, a bare Node `socket.pipe()` relay, in one
 * run. One topic with RF 1 on broker 1 (so no replication traffic rides along), 1 KiB records
 * from Kafka's ProducerPerformance (acks=1) and read back by ConsumerPerformance; the process in
 * front of broker 1 is, in interleaved rounds, walproxy's sidecar (no WAL flags) or the bare pipe
 * on the very same ports. Measured: CPU-seconds of that process from /proc/<pid>/stat per GiB of
 * record values moved, produce and consume apart. PASS_THROUGH_BASELINE adds a third arm (below).
 *
 * Writes `.runs/bench/pass-through.json`: {"arms": {"bare-pipe": {...}, "walproxy": {...}}}, each
 * with produce_cpu_s_per_gib and consume_cpu_s_per_gib (medians over the rounds). Prints figures;
 * asserts nothing.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { consumerPerf, producerPerf } from '../src/clients/java-tools.js';
import { withAdmin } from '../src/clients/kafkajs.js';
import { KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { repoRoot } from '../src/cluster/paths.js';
import type { ManagedProcess } from '../src/cluster/process.js';
import { runStamp } from './run-stamp.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/**
 * PASS_THROUGH_BASELINE=<sidecar entry>: a third arm, `walproxy-baseline`, runs that build of the
 * sidecar (an older commit's bundle copied aside) interleaved with the others, so a change is
 * measured against what it replaces in the same run.
 */
const BASELINE = process.env.PASS_THROUGH_BASELINE;
const RECORDS = Number(process.env.BENCH_RECORDS ?? 1_000_000);
const RECORD_SIZE = 1024;
const BROKER = 1;
const GIB = 2 ** 30;

function cpuSeconds(pid: number): number {
  // /proc/<pid>/stat fields 14 and 15: utime and stime in clock ticks (100 per second on Linux).
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

type Arm = 'walproxy' | 'bare-pipe' | 'walproxy-baseline';

async function main(): Promise<void> {
  const run = runStamp();
  const cluster = await KafkaCluster.start({ sidecars: true, jvmProfile: 'throughput' });
  let pipe: ManagedProcess | undefined;
  try {
    const p = cluster.ports;
    /** The sidecar build on broker 1's ports now; undefined while the bare pipe holds them. */
    let sidecarBuild: Arm | undefined = 'walproxy';
    const useArm = async (arm: Arm): Promise<number> => {
      if (arm === 'bare-pipe') {
        if (!pipe) {
          await cluster.stopSidecar(BROKER);
          sidecarBuild = undefined;
          // Every address sidecar 1 listens on, each to the same upstream (kafka-cluster.ts).
          pipe = await cluster.startBarePipe(BROKER);
        }
        return pipe.pid!;
      }
      if (sidecarBuild !== arm) {
        if (pipe) {
          await pipe.stop();
          pipe = undefined;
        } else await cluster.stopSidecar(BROKER);
        // The harness reads SIDECAR_ENTRY when it starts a sidecar (e2e/src/cluster/paths.ts).
        if (arm === 'walproxy-baseline') process.env.SIDECAR_ENTRY = BASELINE;
        else delete process.env.SIDECAR_ENTRY;
        await cluster.startSidecar(BROKER);
        sidecarBuild = arm;
      }
      return cluster.sidecars.get(BROKER)!.pid!;
    };
    const bootstrap = `127.0.0.1:${p.sidecarClient(BROKER)}`;
    const armOrder: Arm[] = ['walproxy', 'bare-pipe', ...(BASELINE ? (['walproxy-baseline'] as const) : [])];
    const results: Partial<Record<Arm, { produce: number[]; consume: number[] }>> = {};
    for (const arm of armOrder) results[arm] = { produce: [], consume: [] };
    let topicNo = 0;
    // Round -1 warms up the brokers' JIT (C2 here) and is not recorded.
    // Rounds alternate the order (forward, then backward): the machine warms up over a run (the
    // brokers' JIT, page cache), and an arm always first in its round would pay for it.
    for (let round = -1; round < ROUNDS; round++) {
      for (const arm of round % 2 === 0 ? armOrder : [...armOrder].reverse()) {
        const pid = await useArm(arm);
        const topic = `bench-pass-through-${topicNo++}`;
        await withAdmin(cluster.directBootstrap(), async (admin) => {
          // A sidecar's stop fences its broker (BrokerFence) until the broker's next heartbeat
          // through whatever took the ports over: a fenced broker cannot take a replica.
          const deadline = Date.now() + 30_000;
          while (!(await admin.describeCluster()).brokers.some((b) => b.nodeId === BROKER)) {
            if (Date.now() > deadline) throw new Error(`broker ${BROKER} still fenced after 30 s`);
            await new Promise((r) => setTimeout(r, 250));
          }
          return admin.createTopics({
            topics: [
              {
                topic,
                replicaAssignment: [0, 1, 2].map((partition) => ({ partition, replicas: [BROKER] })),
              },
            ],
          });
        });
        const records = round < 0 ? Math.min(RECORDS, 200_000) : RECORDS;
        const gib = (records * RECORD_SIZE) / GIB;
        let before = cpuSeconds(pid);
        await producerPerf({
          bootstrap,
          topic,
          records,
          recordSize: RECORD_SIZE,
          props: { acks: 1, 'linger.ms': 5, 'batch.size': 65_536 },
        });
        const produce = (cpuSeconds(pid) - before) / gib;
        before = cpuSeconds(pid);
        const consumed = await consumerPerf({ bootstrap, topic, records });
        if (consumed.records < records) throw new Error(`${arm}: consumed ${consumed.records} of ${records}`);
        const consume = (cpuSeconds(pid) - before) / gib;
        console.log(
          `round ${round} ${arm.padEnd(17)} produce ${produce.toFixed(2)} CPU-s/GiB, consume ${consume.toFixed(2)} CPU-s/GiB`,
        );
        if (round >= 0) {
          results[arm]!.produce.push(produce);
          results[arm]!.consume.push(consume);
        }
      }
    }
    const arms = Object.fromEntries(
      Object.entries(results).map(([arm, r]) => [
        arm,
        { produce_cpu_s_per_gib: median(r.produce), consume_cpu_s_per_gib: median(r.consume) },
      ]),
    );
    const out = path.join(repoRoot(), '.runs', 'bench');
    mkdirSync(out, { recursive: true });
    writeFileSync(path.join(out, 'pass-through.json'), `${JSON.stringify({ run, arms }, null, 2)}\n`);
    const w = arms.walproxy!;
    const b = arms['bare-pipe']!;
    console.log(`\n| arm | produce CPU-s/GiB | consume CPU-s/GiB |\n|---|---|---|`);
    for (const [arm, r] of Object.entries(arms))
      console.log(
        `| ${arm} | ${r.produce_cpu_s_per_gib.toFixed(2)} | ${r.consume_cpu_s_per_gib.toFixed(2)} |`,
      );
    console.log(
      `walproxy / bare-pipe: produce ${(w.produce_cpu_s_per_gib / b.produce_cpu_s_per_gib).toFixed(2)}x, consume ${(w.consume_cpu_s_per_gib / b.consume_cpu_s_per_gib).toFixed(2)}x`,
    );
    const base = arms['walproxy-baseline'];
    if (base)
      console.log(
        `walproxy / walproxy-baseline: produce ${(w.produce_cpu_s_per_gib / base.produce_cpu_s_per_gib).toFixed(2)}x, consume ${(w.consume_cpu_s_per_gib / base.consume_cpu_s_per_gib).toFixed(2)}x; walproxy-baseline / bare-pipe: produce ${(base.produce_cpu_s_per_gib / b.produce_cpu_s_per_gib).toFixed(2)}x, consume ${(base.consume_cpu_s_per_gib / b.consume_cpu_s_per_gib).toFixed(2)}x`,
      );
  } finally {
    await pipe?.stop();
    await cluster.stop();
  }
}

await main();
