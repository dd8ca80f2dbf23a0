import { afterEach, describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient, underReplicated, withAdmin } from '../src/clients/kafkajs.js';
import { counterDelta, counterSnapshot, counters } from '../src/cluster/cluster-info.js';
import { compareReplicas, readPartitionLog } from '../src/wal/inspect.js';

const TOPIC = 'wal-nodurable-outage';
const PARTITIONS = 3;
const OUTAGE_MS = 30_000;

let paused: number | undefined;
afterEach(() => {
  if (paused !== undefined) process.kill(paused, 'SIGCONT');
  paused = undefined;
});

/** The high watermark of each partition. */
async function highWatermarks(bootstrap: string): Promise<number[]> {
  const offsets = await withAdmin(bootstrap, (admin) => admin.fetchTopicOffsets(TOPIC));
  return offsets.sort((a, b) => a.partition - b.partition).map((o) => Number(o.high));
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe('object store outage during replication', () => {
  it('replication goes on inline, the ISR stays full and the high watermark advances; references resume after', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: PARTITIONS });
    const producer = kafkaClient(cluster.bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    let sent = 0;
    const send = async (n: number) => {
      for (let i = 0; i < n; i++) {
        await producer.send({
          topic: TOPIC,
          acks: -1,
          messages: Array.from({ length: 200 }, (_, k) => ({
            key: `k${k % 9}`,
            value: `v-${sent + k}-${'x'.repeat(400)}`,
          })),
        });
        sent += 200;
      }
    };
    // Given references flowing for this topic (counted from here: the shared cluster's counters
    // are cumulative over every file that ran before)
    const atStart = await counterSnapshot(cluster);
    await send(20);
    const beforeOutage = await counterSnapshot(cluster);
    expect(counterDelta(atStart, beforeOutage, counters.referencesSent)).toBeGreaterThan(0);

    // When the S3 server is frozen for 30 s while producing goes on (bounded: at most 30 s of sends)
    const hwAtOutage = await highWatermarks(cluster.bootstrap);
    process.kill(cluster.s3.pid, 'SIGSTOP');
    paused = cluster.s3.pid;
    const samples: string[][] = [];
    const hw: number[] = [];
    const outageEnds = Date.now() + OUTAGE_MS;
    while (Date.now() < outageEnds) {
      await send(5);
      samples.push(await underReplicated(cluster.bootstrap, [TOPIC]));
      hw.push(sum(await highWatermarks(cluster.bootstrap)));
    }
    const hwAfterOutage = await highWatermarks(cluster.bootstrap);
    const duringOutage = await counterSnapshot(cluster);
    process.kill(cluster.s3.pid, 'SIGCONT');
    paused = undefined;

    // Then every produce was acknowledged, the ISR stayed full and the high watermark kept moving
    expect(samples.length).toBeGreaterThan(5);
    expect(samples.filter((s) => s.length > 0)).toEqual([]);
    expect(hw.every((h, i) => i === 0 || h > hw[i - 1]!)).toBe(true);

    // And after the store is back, references resume and the replicas are byte-identical
    const deadline = Date.now() + 30_000;
    let after = duringOutage;
    while (counterDelta(duringOutage, after, counters.referencesSent) === 0 && Date.now() < deadline) {
      await send(5);
      after = await counterSnapshot(cluster);
    }
    await producer.disconnect();
    expect(counterDelta(duringOutage, after, counters.referencesSent)).toBeGreaterThan(0);
    expect(await compareReplicas(cluster.dataDirs, TOPIC, PARTITIONS)).toEqual([]);
    // And nothing acknowledged is missing: the topic holds every message sent
    expect(sum(await highWatermarks(cluster.bootstrap))).toBe(sent);

    // And during the outage replication went inline, the stock way, and was counted so: no
    // reference was sent or filled, and the leader sides sent each batch appended during the
    // outage to both followers as bytes (the replicas are identical, so broker 1's log says
    // which batches those were)
    const appendedDuringOutage = sum(
      hwAtOutage.map((from, p) =>
        sum(
          readPartitionLog(cluster.dataDirs[1]!, TOPIC, p)
            .filter(
              ({ batch }) => batch.baseOffset >= BigInt(from) && batch.baseOffset < BigInt(hwAfterOutage[p]!),
            )
            .map(({ batch }) => batch.size),
        ),
      ),
    );
    const inline = counterDelta(beforeOutage, duringOutage, counters.inlineBytes);
    const referenced = counterDelta(beforeOutage, duringOutage, counters.referencesSent);
    const filled = counterDelta(beforeOutage, duringOutage, counters.referencesFilled);
    console.log(
      `[replication-outage] during the outage: ${appendedDuringOutage} bytes appended, ${inline} inline bytes sent by the leader sides, ${referenced} references sent, ${filled} filled`,
    );
    expect(appendedDuringOutage).toBeGreaterThan(1_000_000);
    expect(referenced).toBe(0);
    expect(filled).toBe(0);
    expect(inline).toBeGreaterThanOrEqual(2 * appendedDuringOutage);
  });
});
