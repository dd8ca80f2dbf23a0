/**
 * `make bench`: produce throughput and latency with the Java perf producer, directly to the
 * brokers (DIRECT listener) versus through the sidecars (client ingress), interleaved in one run
 * on one cluster so drift on this shared machine hits both arms alike. Replication goes through
 * the sidecars in both arms; what differs is the client path.
 *
 * Prints figures only; nothing is asserted. Recorded in docs/benchmarks.md.
 */
import { readFileSync } from 'node:fs';
import { type ProducerPerfResult, producerPerf } from '../src/clients/java-tools.js';
import { createTopic } from '../src/clients/kafkajs.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RECORDS = Number(process.env.BENCH_RECORDS ?? 300_000);
const RECORD_SIZE = 512;
/** Fixed rate for the latency runs (records/s): well under saturation, so latency is not queueing. */
const LATENCY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 5_000);
const LATENCY_RECORDS = LATENCY_RATE * 20;

function cpuSeconds(pid: number): number {
  // /proc/<pid>/stat fields 14 and 15: utime and stime in clock ticks (100 per second on Linux).
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const cluster = await KafkaCluster.start({ sidecars: true, jvmProfile: 'throughput' });
  try {
    const arms = { direct: cluster.directBootstrap(), sidecar: cluster.bootstrap() } as const;
    const sidecarPids = BROKER_IDS.map((id) => cluster.sidecars.get(id)!.pid!);
    const sidecarCpu = () => sidecarPids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
    const results: Record<
      string,
      { max: ProducerPerfResult[]; fixed: ProducerPerfResult[]; cpu: number; mb: number }
    > = {
      direct: { max: [], fixed: [], cpu: 0, mb: 0 },
      sidecar: { max: [], fixed: [], cpu: 0, mb: 0 },
    };
    let topicNo = 0;
    // Round -1 warms up the JIT (brokers run with C2 here) and is not recorded.
    for (let round = -1; round < ROUNDS; round++) {
      for (const [arm, bootstrap] of Object.entries(arms)) {
        const topic = `bench-overhead-${topicNo++}`;
        await createTopic(cluster.directBootstrap(), topic, { partitions: 6, replicationFactor: 3 });
        const cpuBefore = sidecarCpu();
        const max = await producerPerf({
          bootstrap,
          topic,
          records: RECORDS,
          recordSize: RECORD_SIZE,
          props: { 'linger.ms': 5 },
        });
        const cpu = sidecarCpu() - cpuBefore;
        const fixed = await producerPerf({
          bootstrap,
          topic,
          records: LATENCY_RECORDS,
          recordSize: RECORD_SIZE,
          throughput: LATENCY_RATE,
          props: { 'linger.ms': 0 },
        });
        if (round < 0) continue;
        results[arm]!.cpu += cpu;
        results[arm]!.mb += (RECORDS * RECORD_SIZE) / 1e6;
        results[arm]!.max.push(max);
        results[arm]!.fixed.push(fixed);
        console.error(
          `round ${round + 1} ${arm}: ${max.mbPerSec} MB/s max; at ${LATENCY_RATE} rec/s p50 ${fixed.p50Ms} ms p99 ${fixed.p99Ms} ms`,
        );
      }
    }
    const d = results.direct!;
    const s = results.sidecar!;
    const row = (name: string, r: typeof d) =>
      `| ${name} | ${median(r.max.map((x) => x.mbPerSec)).toFixed(1)} | ${median(r.max.map((x) => x.p99Ms))} | ${median(r.fixed.map((x) => x.p50Ms))} | ${median(r.fixed.map((x) => x.p99Ms))} | ${median(r.fixed.map((x) => x.avgLatencyMs)).toFixed(2)} |`;
    console.log(
      `Kafka ${cluster.version}, ${ROUNDS} interleaved rounds, ${RECORDS} x ${RECORD_SIZE} B at max rate, then ${LATENCY_RECORDS} at ${LATENCY_RATE} rec/s, acks=all, RF=3, 6 partitions (medians)`,
    );
    console.log(
      '| path | max MB/s | p99 ms at max | p50 ms at fixed rate | p99 ms at fixed rate | avg ms at fixed rate |',
    );
    console.log('|---|---|---|---|---|---|');
    console.log(row('direct', d));
    console.log(row('through sidecars', s));
    const ratio = median(s.max.map((x) => x.mbPerSec)) / median(d.max.map((x) => x.mbPerSec));
    const addedP99 = median(s.fixed.map((x) => x.p99Ms)) - median(d.fixed.map((x) => x.p99Ms));
    const addedAvg = median(s.fixed.map((x) => x.avgLatencyMs)) - median(d.fixed.map((x) => x.avgLatencyMs));
    console.log(`throughput through sidecars / direct: ${(ratio * 100).toFixed(1)}% (target >= 95%)`);
    console.log(
      `added latency at fixed rate: p99 ${addedP99} ms (target <= 1 ms), avg ${addedAvg.toFixed(2)} ms`,
    );
    // The sidecar arm's client path crosses a sidecar; in both arms replication does too, so the
    // difference of the two arms' sidecar CPU is the client path's cost.
    const clientPathCpu = s.cpu - d.cpu;
    console.log(
      `sidecar CPU for the client path: ${((clientPathCpu / s.mb) * 1000).toFixed(1)} ms per MB produced = ${((clientPathCpu / s.mb) * 1000).toFixed(0)} millicores per MB/s`,
    );
    console.log(
      `sidecar CPU incl. replication: direct arm ${((d.cpu / d.mb) * 1000).toFixed(1)} ms/MB, sidecar arm ${((s.cpu / s.mb) * 1000).toFixed(1)} ms/MB`,
    );
  } finally {
    await cluster.stop();
  }
}

await main();
