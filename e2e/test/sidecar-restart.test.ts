import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  consumeValues,
  createTopic,
  kafkaClient,
  underReplicated,
  withAdmin,
} from '../src/clients/kafkajs.js';
import { KafkaCluster } from '../src/cluster/kafka-cluster.js';
import {
  endOffsetTotal,
  partitionStates,
  waitForFullIsr,
  waitForPartitions,
} from '../src/cluster/leadership.js';

// Stops and restarts processes, so it runs on a cluster of its own, not the shared one. The
// first case stops a sidecar with --fence-on-stop=false (what a stop does when the controller
// cannot fence the broker: the drain order alone keeps the clients whole); the second with the
// default, where the broker's leaderships move before the drain.
let cluster: KafkaCluster;
let failed = false;
let fenceOnStop = false;

beforeAll(async () => {
  cluster = await KafkaCluster.start({
    sidecars: true,
    sidecarArgs: () => [`--fence-on-stop=${fenceOnStop}`],
  });
});

afterAll(async () => {
  await cluster?.stop({ keepLogs: failed });
});

/** The sidecar's JSON log lines with message `msg`. */
function logLines(logFile: string, msg: string): Array<Record<string, unknown>> {
  return readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes(`"msg":"${msg}`))
    .map((l) => JSON.parse(l));
}

const HELD = 'e2e-sidecar-restart-held';

describe('restarting a sidecar under load', () => {
  it('without the fence, drains an acks=all produce in flight at SIGTERM through its followers, exits 0, and produce resumes: nothing acknowledged is lost', async () => {
    try {
      const bootstrap = cluster.bootstrap();
      // A partition led by broker 2, followed by 1 and 3: its acks=all produces complete only
      // once both followers fetched, and in this layout follower 3 fetches through sidecar 2's egress.
      const held = HELD;
      await withAdmin(bootstrap, (admin) =>
        admin.createTopics({
          waitForLeaders: true,
          topics: [{ topic: held, replicaAssignment: [{ partition: 0, replicas: [2, 1, 3] }] }],
        }),
      );
      const topic = 'e2e-sidecar-restart';
      await createTopic(bootstrap, topic, { partitions: 3, replicationFactor: 3 });
      const kafka = kafkaClient(bootstrap, 'walproxy-e2e', {
        retries: 30,
        initialRetryTime: 100,
        maxRetryTime: 1_000,
      });
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      const heldProducer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await Promise.all([producer.connect(), heldProducer.connect()]);
      await heldProducer.send({ topic: held, acks: -1, messages: [{ value: 'warm-up' }] });

      // Given a producer sending batches in the background (bounded: 300 batches, 60 s)
      const acknowledged: number[] = [];
      let next = 0;
      const deadline = Date.now() + 60_000;
      const sending = (async () => {
        while (next < 300 && Date.now() < deadline) {
          const values = Array.from({ length: 50 }, (_, k) => next * 50 + k);
          await producer.send({
            topic,
            acks: -1,
            messages: values.map((v) => ({ key: `k${v % 7}`, value: String(v) })),
          });
          acknowledged.push(...values);
          next++;
        }
      })();
      await new Promise((r) => setTimeout(r, 1_500));

      // And an acks=all produce held in the broker's purgatory: follower 3 is paused
      const sidecar = cluster.sidecars.get(2)!;
      const broker3 = cluster.brokers.get(3)!;
      process.kill(broker3.pid!, 'SIGSTOP');
      let heldAcked: number | undefined;
      const heldSend = heldProducer
        .send({ topic: held, acks: -1, messages: [{ value: 'in flight at SIGTERM' }] })
        .then((r) => {
          heldAcked = Date.now();
          return r;
        });
      await new Promise((r) => setTimeout(r, 500));

      // When sidecar 2 gets SIGTERM while that produce waits for its followers
      const stopping = sidecar.stop('SIGTERM', 15_000);
      await sidecar.waitForOutput(/"msg":"draining/, 5_000);
      // And the follower resumes a second later (well within its session timeout)
      await new Promise((r) => setTimeout(r, 1_000));
      const resumedAt = Date.now();
      process.kill(broker3.pid!, 'SIGCONT');
      await stopping;
      const exitCode = await sidecar.exited;
      const stoppedAt = Date.now();

      // Then the produce was in flight at SIGTERM, and was acknowledged by the draining sidecar
      // (follower 3 fetched through its egress, which kept serving), not retried after a cut
      const [draining] = logLines(sidecar.logFile, 'draining');
      expect(draining).toMatchObject({ inFlight: { client: { Produce: expect.any(Number) } } });
      const [result] = await heldSend;
      expect(result?.errorCode).toBe(0);
      expect(heldAcked).toBeGreaterThanOrEqual(resumedAt);
      expect(heldAcked).toBeLessThanOrEqual(stoppedAt);
      // And the sidecar exited cleanly, having forced no client connection closed (the followers'
      // long polls are cut after 250 ms by design: they fetch again after reconnecting)
      expect(exitCode).toBe(0);
      expect(logLines(sidecar.logFile, 'sidecar stopped').at(-1)).toMatchObject({ clientsForcedClosed: 0 });

      // When it comes back two seconds later
      await new Promise((r) => setTimeout(r, 2_000));
      const restartedAt = Date.now();
      await cluster.startSidecar(2);
      // Then an acks=all produce to its partition is acknowledged again, within seconds
      await heldProducer.send({ topic: held, acks: -1, messages: [{ value: 'after the restart' }] });
      const resumeMs = Date.now() - restartedAt;
      console.log(`[sidecar-restart] acks=all produce acknowledged ${resumeMs} ms after the restart began`);
      expect(resumeMs).toBeLessThan(10_000);
      await sending;
      await Promise.all([producer.disconnect(), heldProducer.disconnect()]);

      // And every acknowledged message is in the topic exactly once
      expect(acknowledged.length).toBe(300 * 50);
      const seen = new Map<number, number>();
      const consumer = kafka.consumer({ groupId: `${topic}-check` });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`read ${seen.size} of ${acknowledged.length}`)),
          60_000,
        );
        void consumer.run({
          eachMessage: async ({ message }) => {
            const v = Number(message.value!.toString());
            seen.set(v, (seen.get(v) ?? 0) + 1);
            if (seen.size === acknowledged.length) {
              clearTimeout(timer);
              resolve();
            }
          },
        });
      });
      await consumer.disconnect();
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
      // And the followers of broker 2's partitions (and broker 2 as a follower) caught up again
      const deadlineIsr = Date.now() + 30_000;
      let lagging = await underReplicated(bootstrap, [topic, held]);
      while (lagging.length > 0 && Date.now() < deadlineIsr) {
        await new Promise((r) => setTimeout(r, 500));
        lagging = await underReplicated(bootstrap, [topic, held]);
      }
      expect(lagging).toEqual([]);
    } catch (error) {
      failed = true;
      const broker3 = cluster.brokers.get(3);
      if (broker3?.pid) process.kill(broker3.pid, 'SIGCONT');
      throw error;
    }
  });
  it("with the fence (the default), moves the broker's leaderships before the drain: the produce in flight is answered, retried on the new leader and acknowledged once, and the restarted sidecar gets its broker unfenced", async () => {
    try {
      const bootstrap = cluster.bootstrap();
      // Given sidecar 2 running with the default --fence-on-stop, and broker 2 leading HELD
      fenceOnStop = true;
      await cluster.stopSidecar(2);
      await cluster.startSidecar(2);
      await waitForFullIsr(bootstrap, [HELD]);
      const [before] = await partitionStates(bootstrap, HELD);
      expect(before!.leader).toBe(2);
      const kafka = kafkaClient(bootstrap, 'walproxy-e2e-fence', {
        retries: 30,
        initialRetryTime: 100,
        maxRetryTime: 1_000,
      });
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      await producer.send({ topic: HELD, acks: -1, messages: [{ value: 'warm-up 2' }] });

      // And an acks=all produce held in broker 2's purgatory: follower 3 is paused
      const sidecar = cluster.sidecars.get(2)!;
      const broker3 = cluster.brokers.get(3)!;
      process.kill(broker3.pid!, 'SIGSTOP');
      let acked: number | undefined;
      const send = producer
        .send({ topic: HELD, acks: -1, messages: [{ value: 'in flight at a fenced stop' }] })
        .then((r) => {
          acked = Date.now();
          return r;
        });
      await new Promise((r) => setTimeout(r, 500));

      // When sidecar 2 gets SIGTERM while that produce waits
      await sidecar.stop('SIGTERM', 15_000);
      // (follower 3 resumes at once: paused past its own session timeout, 6 s here, it would be
      // fenced too and take its time to come back)
      const resumedAt = Date.now();
      process.kill(broker3.pid!, 'SIGCONT');
      expect(await sidecar.exited).toBe(0);
      // Then it had the controller fence broker 2 before it drained
      const fencedLine = logLines(sidecar.logFile, 'broker fenced for the stop').at(-1);
      const drainingLine = logLines(sidecar.logFile, 'draining').at(-1);
      expect(fencedLine).toBeDefined();
      expect(Date.parse(String(fencedLine!.time))).toBeLessThanOrEqual(
        Date.parse(String(drainingLine!.time)),
      );
      // And the partition has another leader, and broker 2 left its ISR, while sidecar 2 is down:
      // without the fence it would stay leader until its session timed out (6 s after its last
      // heartbeat)
      const moved = await waitForPartitions(
        bootstrap,
        HELD,
        ([p]) => p!.leader !== 2 && !p!.isr.includes(2),
        {
          timeoutMs: 5_000,
          what: 'leadership moved off broker 2',
        },
      );
      // And the produce was answered by broker 2 (no client connection was cut) and acknowledged
      // by the new leader once broker 3 was back, as in a broker's controlled shutdown
      const [result] = await send;
      expect(result?.errorCode).toBe(0);
      expect(acked).toBeGreaterThanOrEqual(resumedAt);
      expect(logLines(sidecar.logFile, 'draining').at(-1)).toMatchObject({
        inFlight: { client: { Produce: expect.any(Number) } },
      });
      expect(logLines(sidecar.logFile, 'sidecar stopped').at(-1)).toMatchObject({
        clientsForcedClosed: 0,
        brokerFenced: true,
      });

      // When the sidecar starts again
      await cluster.startSidecar(2);
      // Then its broker was unfenced by its own heartbeat and rejoined the ISR (no restart, no
      // session timeout), and an acks=all produce goes through
      await waitForFullIsr(bootstrap, [HELD], 30_000);
      await producer.send({ topic: HELD, acks: -1, messages: [{ value: 'after the fenced restart' }] });
      await producer.disconnect();
      // (if the sidecar stays down past the session timeout the controller also logs broker 2's
      // session as timed out; it is fenced already, and is unfenced all the same)
      const log = readFileSync(cluster.controllerLogFile(), 'utf8');
      const asked = log.lastIndexOf('Unfenced broker 2 has requested and been granted fencing');
      expect(asked).toBeGreaterThanOrEqual(0);
      expect(log.indexOf('The request from broker 2 to unfence has been granted', asked)).toBeGreaterThan(
        asked,
      );
      // And the idempotent producer wrote each value once
      const values = await consumeValues(bootstrap, HELD, await endOffsetTotal(bootstrap, HELD));
      expect(values.filter((v) => v === 'in flight at a fenced stop')).toHaveLength(1);
      console.log(
        `[sidecar-restart] fenced stop: leadership moved to ${moved.states[0]!.leader}; produce in flight acknowledged ${acked! - resumedAt} ms after the follower resumed`,
      );
    } catch (error) {
      failed = true;
      const broker3 = cluster.brokers.get(3);
      if (broker3?.pid) process.kill(broker3.pid, 'SIGCONT');
      throw error;
    }
  });
});
