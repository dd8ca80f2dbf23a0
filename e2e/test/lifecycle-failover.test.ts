import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { consumeValues, createTopic } from '../src/clients/kafkajs.js';
import { startVerifiableProducer } from '../src/clients/verifiable-producer.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { endOffsetTotal, waitForFullIsr, waitForPartitions } from '../src/cluster/leadership.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { compareReplicas } from '../src/wal/inspect.js';

// Issue 12, case 7: a sidecar that stays down must not strand its broker's partitions. Each
// broker's KRaft controller traffic goes through its own sidecar (topology-rules.ts), so a dead
// sidecar stops its broker's heartbeats and the controller fences the broker as it would a dead
// one. One run measures stock Kafka's figure (the leader broker SIGKILLed) and then the sidecar's
// (the leader's sidecar SIGKILLed and kept down), on a cluster of its own.
let cluster: KafkaCluster;
let failed = false;

beforeAll(async () => {
  const { s3 } = inject('cluster');
  cluster = await KafkaCluster.start({
    sidecars: true,
    sidecarArgs: () => walSidecarArgs({ ...s3, prefix: `failover-${Date.now()}/` }),
    sidecarEnv: walSidecarEnv(),
  });
});

afterAll(async () => {
  await cluster?.stop({ keepLogs: failed });
});

const fencings = (broker: number) =>
  readFileSync(cluster.controllerLogFile(), 'utf8').split(`Fencing broker ${broker} `).length - 1;

describe('a dead sidecar fails its broker over like a dead broker', () => {
  it('moves the leadership of a SIGKILLed sidecar’s partitions within 2x stock’s time for a dead broker, losing nothing', async () => {
    try {
      const topic = 'wal-failover';
      const bootstrap = cluster.bootstrap();
      await createTopic(bootstrap, topic, { partitions: 3, replicationFactor: 3 });
      // Given an idempotent acks=all producer on a WAL topic, acknowledged on every partition
      const producer = startVerifiableProducer({
        bootstrap,
        topic,
        maxMessages: 1_000_000,
        throughput: 300,
        repeatingKeys: 30,
      });
      const started = Date.now();
      while (new Set(producer.acknowledged().map((a) => a.partition)).size < 3) {
        if (Date.now() - started > 60_000) throw new Error('producer not acknowledged on every partition');
        await new Promise((r) => setTimeout(r, 200));
      }

      // When (stock) the leader broker of partition 0 is SIGKILLed, its sidecar left running
      const before = await waitForPartitions(bootstrap, topic, () => true);
      const deadBroker = before.states[0]!.leader;
      const killedBrokerAt = Date.now();
      await cluster.stopBroker(deadBroker, 'SIGKILL');
      const brokerMoved = await waitForPartitions(bootstrap, topic, (s) => s[0]!.leader !== deadBroker, {
        what: `partition 0 led by another broker than ${deadBroker}`,
      });
      const stockMs = brokerMoved.atMs - killedBrokerAt;
      await cluster.startBroker(deadBroker);
      await waitForFullIsr(bootstrap, [topic]);

      // When the leader's sidecar of some partitions is SIGKILLed and kept down
      const now = await waitForPartitions(bootstrap, topic, () => true);
      const deadSidecar = now.states[0]!.leader;
      const led = now.states.filter((p) => p.leader === deadSidecar).map((p) => p.partition);
      const fencedBefore = fencings(deadSidecar);
      const killedSidecarAt = Date.now();
      await cluster.stopSidecar(deadSidecar, 'SIGKILL');
      const sidecarMoved = await waitForPartitions(
        bootstrap,
        topic,
        (s) => led.every((p) => s[p]!.leader !== deadSidecar),
        { what: `partitions ${led} led by another broker than ${deadSidecar}` },
      );
      const sidecarMs = sidecarMoved.atMs - killedSidecarAt;
      console.log(
        `[failover] new leader after SIGKILL: broker ${deadBroker} ${stockMs} ms (stock); sidecar ${deadSidecar} ${sidecarMs} ms (partitions ${led})`,
      );

      // Then the controller fenced the broker whose sidecar died, as it fences a dead broker
      expect(fencings(deadSidecar)).toBeGreaterThan(fencedBefore);
      // And its partitions got a new leader within twice stock's time
      expect(sidecarMs).toBeLessThanOrEqual(2 * stockMs);
      // And the producer is acknowledged on those partitions after the move
      const movedAt = sidecarMoved.atMs;
      const deadline = Date.now() + 30_000;
      const ackedAfterMove = () =>
        new Set(
          producer
            .acknowledged()
            .filter((a) => a.timestamp > movedAt)
            .map((a) => a.partition),
        );
      while (!led.every((p) => ackedAfterMove().has(p)) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
      }
      expect([...ackedAfterMove()].sort()).toEqual(expect.arrayContaining(led));

      // When the sidecar comes back
      await cluster.startSidecar(deadSidecar);
      // Then its broker is unfenced and back in every ISR
      await waitForFullIsr(bootstrap, [topic]);
      const result = await producer.stop();
      // And nothing acknowledged was lost, nothing written twice, and the replicas are identical
      expect(result.acknowledged.length).toBeGreaterThan(0);
      const values = await consumeValues(bootstrap, topic, await endOffsetTotal(bootstrap, topic));
      const seen = new Set(values);
      expect(result.acknowledged.filter((a) => !seen.has(a.value))).toEqual([]);
      expect(values.length).toBe(seen.size);
      expect(await compareReplicas(cluster.workDirDataDirs(), topic, 3)).toEqual([]);
      // (every broker took part)
      expect(BROKER_IDS.every((id) => cluster.brokers.get(id)?.running)).toBe(true);
    } catch (error) {
      failed = true;
      throw error;
    }
  });
});
