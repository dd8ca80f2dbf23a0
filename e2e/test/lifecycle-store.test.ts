import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumeValues, createTopic } from '../src/clients/kafkajs.js';
import { longestGapMs, startVerifiableProducer } from '../src/clients/verifiable-producer.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { endOffsetTotal, waitForFullIsr } from '../src/cluster/leadership.js';
import type { ManagedProcess } from '../src/cluster/process.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { type MotoServer, startMoto } from '../src/s3/moto.js';
import { compareReplicas, openE2eStore } from '../src/wal/inspect.js';

// Issue 12, case 5: the sidecar's start and stop never wait for the store. A cluster of its own,
// on an S3 server of its own (frozen with SIGSTOP here, which the shared cluster must not see):
// the sidecars start while their bucket does not exist, begin writing the WAL once it does, and
// one sidecar is stopped and started again while the store is frozen.
const BUCKET = 'lifecycle-store';
let moto: MotoServer;
let cluster: KafkaCluster;
let failed = false;
let frozen = false;
/** Running producers, stopped in afterAll: a failed assertion must not leave their JVMs running. */
let producers: ReturnType<typeof startVerifiableProducer>[] = [];

beforeAll(async () => {
  moto = await startMoto();
});

afterAll(async () => {
  if (frozen) process.kill(moto.pid, 'SIGCONT');
  await Promise.allSettled(producers.map((p) => p.stop()));
  await cluster?.stop({ keepLogs: failed || process.env.WALPROXY_KEEP_LOGS === '1' });
  await moto?.stop();
});

/** Milliseconds from a sidecar process's spawn to its first `sidecar ready` line. */
function readyAfterSpawnMs(sidecar: ManagedProcess): number | undefined {
  for (const line of readFileSync(sidecar.logFile, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg: string; time: string };
    if (entry.msg === 'sidecar ready') return Date.parse(entry.time) - sidecar.spawnedAt;
  }
  return undefined;
}

/** The machine's load beside a start's duration: a slow start on a loaded machine reads differently. */
function load(): string {
  return `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ')} over 1 / 5 / 15 min on ${cpus().length} cores`;
}

async function readyz(id: number) {
  const response = await fetch(`${cluster.adminUrl(id)}/readyz`);
  return {
    status: response.status,
    body: (await response.json()) as { ready: boolean; store?: { usable: boolean } },
  };
}

describe('the sidecars’ lifecycle does not wait for the store', () => {
  it('start with the bucket missing, write the WAL once it exists, and stop and start while the store is frozen as fast as while it answers', async () => {
    try {
      const s3 = {
        endpoint: moto.endpoint,
        bucket: BUCKET,
        prefix: 'wal/',
        walTopicGlob: 'wal-*',
        pid: moto.pid,
      };
      // Given sidecars started while their bucket does not exist
      cluster = await KafkaCluster.start({
        sidecars: true,
        sidecarArgs: () => walSidecarArgs(s3),
        sidecarEnv: walSidecarEnv(),
      });
      const bootstrap = cluster.bootstrap();
      // Then each served within 2 s of its spawn, ready for Kubernetes, reporting the store degraded
      for (const id of BROKER_IDS) {
        const readyMs = readyAfterSpawnMs(cluster.sidecars.get(id)!);
        console.log(
          `[lifecycle-store] bucket missing: sidecar ${id} spawn to ready ${readyMs} ms; ${load()}`,
        );
        expect(readyMs, `sidecar ${id}: spawn to ready ${readyMs} ms, ${load()}`).toBeLessThanOrEqual(2_000);
        expect(await readyz(id)).toMatchObject({
          status: 200,
          body: { ready: true, store: { usable: false } },
        });
      }
      // And the brokers' partitions are producible, WAL topics included (they replicate inline)
      const topics = ['wal-nodurable-lifecycle', 'lifecycle-plain'];
      for (const topic of topics) await createTopic(bootstrap, topic, { partitions: 3 });
      producers = topics.map((topic) =>
        startVerifiableProducer({
          bootstrap,
          topic,
          maxMessages: 1_000_000,
          throughput: 200,
          repeatingKeys: 30,
        }),
      );
      const waitAcked = async (since: number) => {
        const deadline = Date.now() + 60_000;
        while (
          producers.some(
            (p) =>
              new Set(
                p
                  .acknowledged()
                  .filter((a) => a.timestamp > since)
                  .map((a) => a.partition),
              ).size < 3,
          )
        ) {
          if (Date.now() > deadline) throw new Error('not acknowledged on every partition of both topics');
          await new Promise((r) => setTimeout(r, 200));
        }
      };
      await waitAcked(0);
      const store = openE2eStore(s3);
      const objects = async () => {
        let n = 0;
        // The health probe's own put-and-delete objects are not WAL objects.
        for await (const info of store.list('')) if (!info.key.startsWith('.walproxy-validate-')) n++;
        return n;
      };

      // When the bucket is created
      await moto.createBucket(BUCKET);
      // Then every sidecar starts using it, and WAL objects appear
      for (const id of BROKER_IDS) {
        const deadline = Date.now() + 20_000;
        while ((await readyz(id)).body.store?.usable !== true) {
          if (Date.now() > deadline) throw new Error(`sidecar ${id} never found the bucket`);
          await new Promise((r) => setTimeout(r, 250));
        }
      }
      const deadline = Date.now() + 20_000;
      while ((await objects()) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
      expect(await objects()).toBeGreaterThan(0);

      /** SIGTERM to exit, and spawn to `sidecar ready`, of sidecar 1. */
      const restart = async () => {
        const sidecar = cluster.sidecars.get(1)!;
        const stopBegun = Date.now();
        await cluster.stopSidecar(1);
        const stopMs = Date.now() - stopBegun;
        const exitCode = await sidecar.exited;
        await cluster.startSidecar(1);
        // (startSidecar returns on the new process's `sidecar ready` line)
        return { stopBegun, stopMs, exitCode, startMs: Date.now() - cluster.sidecars.get(1)!.spawnedAt };
      };
      // Given the same restart with the store answering, the baseline of this run on this machine
      const healthy = await restart();
      await waitAcked(Date.now());

      // When the store freezes, and sidecar 1 is stopped and started again meanwhile
      process.kill(moto.pid, 'SIGSTOP');
      frozen = true;
      await new Promise((r) => setTimeout(r, 1_000));
      const { stopBegun, stopMs, exitCode, startMs } = await restart();
      const restarted = Date.now();
      await waitAcked(restarted);
      const gapMs = Math.max(...producers.map((p) => longestGapMs(p.acknowledged(), stopBegun, restarted)));
      console.log(
        `[lifecycle-store] store frozen: SIGTERM to exit ${stopMs} ms, spawn to ready ${startMs} ms, longest stretch without an ack ${gapMs} ms; store answering: ${healthy.stopMs} ms and ${healthy.startMs} ms; ${load()}`,
      );
      // Then it exited cleanly, and both the stop and the start took about what they take with
      // the store answering: neither waited out a store call (a probe gives up after 2 s, the S3
      // client's attempts take longer; before issue #12's fix a frozen store held the stop 27 s).
      // (Absolute times follow the machine's load: 1.4 s to exit and 1.0 s to ready in one full
      // e2e run here, 1.4 s and 2.2 s in another with the machine busier: the baseline is this
      // run's own.)
      expect(healthy.exitCode).toBe(0);
      expect(exitCode).toBe(0);
      expect(stopMs).toBeLessThan(healthy.stopMs + 1_500);
      expect(startMs).toBeLessThan(healthy.startMs + 1_500);
      // And the start served within 2 s of its spawn, as with the bucket missing
      expect(startMs, `spawn to ready with the store frozen, ${load()}`).toBeLessThanOrEqual(2_000);
      expect((await readyz(1)).body).toMatchObject({ ready: true, store: { usable: false } });

      // When the store thaws
      process.kill(moto.pid, 'SIGCONT');
      frozen = false;
      await waitForFullIsr(bootstrap, topics);
      const results = await Promise.all(producers.map((p) => p.stop()));
      // Then nothing acknowledged was lost, nothing was written twice, and the replicas are identical
      for (const [i, topic] of topics.entries()) {
        const values = await consumeValues(bootstrap, topic, await endOffsetTotal(bootstrap, topic));
        const seen = new Set(values);
        expect(results[i]!.acknowledged.filter((a) => !seen.has(a.value))).toEqual([]);
        expect(values.length).toBe(seen.size);
        expect(await compareReplicas(cluster.workDirDataDirs(), topic, 3)).toEqual([]);
      }
      await store.close();
    } catch (error) {
      failed = true;
      throw error;
    }
  });
});
