import { afterEach, describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient, underReplicated, withAdmin } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';
import { compareReplicas } from '../src/wal/inspect.js';

const TOPIC = 'wal-nodurable-outage';
const OUTAGE_MS = 30_000;

let paused: number | undefined;
afterEach(() => {
  if (paused !== undefined) process.kill(paused, 'SIGCONT');
  paused = undefined;
});

type Counters = Awaited<ReturnType<typeof sidecarCounters>>;
function referencesSent(all: Counters[]): number {
  return all.reduce(
    (n, c) => n + Number((c.wal?.fetchStrip as { referencesSent?: number } | undefined)?.referencesSent ?? 0),
    0,
  );
}

async function highWatermarks(bootstrap: string): Promise<number> {
  const offsets = await withAdmin(bootstrap, (admin) => admin.fetchTopicOffsets(TOPIC));
  return offsets.reduce((n, o) => n + Number(o.high), 0);
}

describe('object store outage during replication', () => {
  it('replication goes on inline, the ISR stays full and the high watermark advances; references resume after', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 3 });
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
    // Given references flowing for this topic
    await send(20);
    const beforeOutage = referencesSent(
      await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id))),
    );

    // When the S3 server is frozen for 30 s while producing goes on (bounded: at most 30 s of sends)
    process.kill(cluster.s3.pid, 'SIGSTOP');
    paused = cluster.s3.pid;
    const samples: string[][] = [];
    const hw: number[] = [];
    const outageEnds = Date.now() + OUTAGE_MS;
    while (Date.now() < outageEnds) {
      await send(5);
      samples.push(await underReplicated(cluster.bootstrap, [TOPIC]));
      hw.push(await highWatermarks(cluster.bootstrap));
    }
    const duringOutage = referencesSent(
      await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id))),
    );
    process.kill(cluster.s3.pid, 'SIGCONT');
    paused = undefined;

    // Then every produce was acknowledged, the ISR stayed full and the high watermark kept moving
    expect(samples.length).toBeGreaterThan(5);
    expect(samples.filter((s) => s.length > 0)).toEqual([]);
    expect(hw.every((h, i) => i === 0 || h > hw[i - 1]!)).toBe(true);

    // And after the store is back, references resume and the replicas are byte-identical
    const deadline = Date.now() + 30_000;
    let after = duringOutage;
    while (after <= duringOutage && Date.now() < deadline) {
      await send(5);
      after = referencesSent(await Promise.all([1, 2, 3].map((id) => sidecarCounters(cluster, id))));
    }
    await producer.disconnect();
    expect(beforeOutage).toBeGreaterThan(0);
    expect(after).toBeGreaterThan(duringOutage);
    expect(await compareReplicas(cluster.dataDirs, TOPIC, 3)).toEqual([]);
    // And nothing acknowledged is missing: the topic holds every message sent
    expect(await highWatermarks(cluster.bootstrap)).toBe(sent);
  });
});
