import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTopic, kafkaClient, underReplicated } from '../src/clients/kafkajs.js';
import type { S3Info } from '../src/cluster/cluster-info.js';
import { BROKER_IDS, KafkaCluster } from '../src/cluster/kafka-cluster.js';
import { walSidecarArgs, walSidecarEnv } from '../src/cluster/wal-settings.js';
import { type MotoServer, startMoto } from '../src/s3/moto.js';
import { compareReplicas } from '../src/wal/inspect.js';

// A store slow for GETs only (issue #12: "slow for GETs only"): PUTs answer as usual, so the
// leader sides keep sending references, while every follower-side GET takes GET_DELAY_MS. Runs on
// a cluster of its own, in front of which sits the forwarder below.

const WAL_TOPIC = 'wal-slow-get';
const PLAIN_TOPIC = 'plain-slow-get';
const PARTITIONS = 3;
const GET_DELAY_MS = 3_000;
const SLOW_PHASE_MS = 30_000;
/**
 * The longest a produce may wait for its acknowledgement while GETs are slow. A follower's fill
 * holds one response at most the fill deadline (250 ms) before its store backs off and the fetches
 * go inline; with the leader side's hold for uploads (--max-hold-ms, 200 ms), a re-fetch and the
 * loaded machine's noise, 2 s is generous — and still below the 3 s a fill that waits for its GET
 * would add to every fetch it holds, WAL topic or not.
 */
const MAX_ACK_GAP_MS = 2_000;

/**
 * A user-space front for moto that delays GETs of objects by `delayMs` and forwards everything
 * else at once. A stand-in until the shared store front (e2e/src/s3/store-front.ts, `slow-get`
 * mode) is merged.
 */
class SlowGetFront {
  delayMs = 0;
  delayedGets = 0;
  readonly #server: Server;

  constructor(target: string) {
    const upstream = new URL(target);
    this.#server = createServer((req, res) => {
      const forward = () => {
        const out = request(
          {
            host: upstream.hostname,
            port: upstream.port,
            method: req.method,
            path: req.url,
            headers: req.headers,
          },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        out.on('error', () => res.destroy());
        res.on('close', () => out.destroy());
        req.pipe(out);
      };
      // Path-style /bucket/key: a GET with a key reads an object; /bucket?list-type=2 lists.
      const objectGet = req.method === 'GET' && /^\/[^/?]+\/[^?]/.test(req.url ?? '');
      if (objectGet && this.delayMs > 0) {
        this.delayedGets++;
        setTimeout(forward, this.delayMs);
      } else {
        forward();
      }
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

let moto: MotoServer | undefined;
let front: SlowGetFront | undefined;
let cluster: KafkaCluster | undefined;
let failed = false;

beforeAll(async () => {
  moto = await startMoto();
  front = new SlowGetFront(moto.endpoint);
  const s3: Omit<S3Info, 'pid'> = {
    endpoint: await front.start(),
    bucket: 'walproxy-slow-get',
    prefix: 'wal/',
    walTopicGlob: 'wal-*',
  };
  await moto.createBucket(s3.bucket);
  cluster = await KafkaCluster.start({
    sidecars: true,
    sidecarArgs: () => walSidecarArgs(s3),
    sidecarEnv: walSidecarEnv(),
  });
}, 180_000);

afterAll(async () => {
  await cluster?.stop({ keepLogs: failed || process.env.WALPROXY_KEEP_LOGS === '1' });
  await front?.stop();
  await moto?.stop();
}, 60_000);

interface FillCounters {
  referencesFilled: number;
  deadlineMisses: number;
  backoffs: number;
  inlineBytes: number;
}

async function fillCounters(): Promise<FillCounters> {
  const all = await Promise.all(
    BROKER_IDS.map(async (id) => {
      const response = await fetch(`${cluster!.adminUrl(id)}/counters`);
      return ((await response.json()) as { wal: { fetchFill: FillCounters } }).wal.fetchFill;
    }),
  );
  const sum = (key: keyof FillCounters) => all.reduce((n, c) => n + c[key], 0);
  return {
    referencesFilled: sum('referencesFilled'),
    deadlineMisses: sum('deadlineMisses'),
    backoffs: sum('backoffs'),
    inlineBytes: sum('inlineBytes'),
  };
}

describe('a store slow for GETs only', () => {
  it('keeps acknowledging WAL and other topics without stalls, the ISR full; references resume after', async () => {
    try {
      const bootstrap = cluster!.bootstrap();
      for (const topic of [WAL_TOPIC, PLAIN_TOPIC]) {
        await createTopic(bootstrap, topic, {
          partitions: PARTITIONS,
          configs: { 'min.insync.replicas': '2' },
        });
      }
      const producer = kafkaClient(bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      const sent = new Map([
        [WAL_TOPIC, 0],
        [PLAIN_TOPIC, 0],
      ]);
      /** Sends to `topic` one batch at a time until `ms` passed (at most 2,000 batches); the longest gap between acks. */
      const produce = async (topic: string, ms: number): Promise<number> => {
        const ends = Date.now() + ms;
        let last = Date.now();
        let longest = 0;
        for (let i = 0; i < 2_000 && Date.now() < ends; i++) {
          const n = sent.get(topic)!;
          await producer.send({
            topic,
            acks: -1,
            messages: Array.from({ length: 20 }, (_, k) => ({
              key: `k${k % 7}`,
              value: `v-${n + k}-${'x'.repeat(300)}`,
            })),
          });
          sent.set(topic, n + 20);
          const now = Date.now();
          longest = Math.max(longest, now - last);
          last = now;
        }
        return longest;
      };

      // Given references being filled from the store
      await Promise.all([produce(WAL_TOPIC, 5_000), produce(PLAIN_TOPIC, 5_000)]);
      const before = await fillCounters();
      expect(before.referencesFilled).toBeGreaterThan(0);

      // When every GET of an object takes 3 s (PUTs as usual) while both topics keep producing
      front!.delayMs = GET_DELAY_MS;
      const isr: string[][] = [];
      const sampling = (async () => {
        const ends = Date.now() + SLOW_PHASE_MS;
        while (Date.now() < ends) {
          isr.push(await underReplicated(bootstrap, [WAL_TOPIC, PLAIN_TOPIC]));
          await new Promise((r) => setTimeout(r, 1_000));
        }
      })();
      const [walGap, plainGap] = await Promise.all([
        produce(WAL_TOPIC, SLOW_PHASE_MS),
        produce(PLAIN_TOPIC, SLOW_PHASE_MS),
      ]);
      await sampling;
      const slow = await fillCounters();

      // Then no acknowledgement on either topic waited anywhere near a GET, and the ISR stayed full
      console.log(
        `longest gap between acknowledgements with slow GETs: ${WAL_TOPIC} ${walGap} ms, ${PLAIN_TOPIC} ${plainGap} ms`,
      );
      expect(walGap).toBeLessThan(MAX_ACK_GAP_MS);
      expect(plainGap).toBeLessThan(MAX_ACK_GAP_MS);
      expect(isr.length).toBeGreaterThan(10);
      expect(isr.filter((s) => s.length > 0)).toEqual([]);
      // And the slow GETs were met: fills missed the deadline, the store backed off, bytes came inline
      expect(front!.delayedGets).toBeGreaterThan(0);
      expect(slow.deadlineMisses).toBeGreaterThan(before.deadlineMisses);
      expect(slow.backoffs).toBeGreaterThan(before.backoffs);
      expect(slow.inlineBytes).toBeGreaterThan(before.inlineBytes);

      // And once GETs are fast again, references are filled again (within 30 s of producing)
      front!.delayMs = 0;
      const deadline = Date.now() + 30_000;
      let after = await fillCounters();
      while (after.referencesFilled <= slow.referencesFilled && Date.now() < deadline) {
        await produce(WAL_TOPIC, 1_000);
        after = await fillCounters();
      }
      await producer.disconnect();
      expect(after.referencesFilled).toBeGreaterThan(slow.referencesFilled);
      // And the replicas are byte-identical
      for (const topic of [WAL_TOPIC, PLAIN_TOPIC]) {
        expect(await compareReplicas(cluster!.workDirDataDirs(), topic, PARTITIONS)).toEqual([]);
      }
    } catch (error) {
      failed = true;
      throw error;
    }
  });
});
