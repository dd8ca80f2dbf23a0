/**
 * Captures golden frames from a real cluster for the codec's byte-exact round-trip tests
 * (shared/test/golden.test.ts): `npx tsx e2e/src/capture/capture-golden.ts [outDir]`.
 *
 * The brokers advertise sidecar ports, and the sidecars run in this process with a frame
 * observer, so every client's frames are seen exactly as they cross the sidecar: kafkajs
 * (Produce v7 / Fetch v11), librdkafka via kcat, the Java 4.x client (newest Produce/Fetch) and
 * the brokers' replica fetchers. Rerun it against a new Kafka release (KAFKA_VERSION=…) to
 * refresh the fixtures.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FrameObserver, RequestInfo, Sidecar } from '@walproxy/proxy';
import { apiKeyInfo, decodeRequestHeader } from '@walproxy/shared';
import { consumerPerf, producerPerf, runKafkaTool } from '../clients/java-tools.js';
import { createTopic, kafkaClient } from '../clients/kafkajs.js';
import { kcat } from '../clients/kcat.js';
import { startInProcessSidecars } from '../cluster/in-process-sidecars.js';
import { KafkaCluster } from '../cluster/kafka-cluster.js';
import { repoRoot } from '../cluster/paths.js';

const CAPTURED_APIS = new Set([
  'ApiVersions',
  'Metadata',
  'Produce',
  'Fetch',
  'FindCoordinator',
  'DescribeCluster',
]);
const PER_KIND = 2;
const MAX_FRAME = 64 * 1024;

function sourceOf(clientId: string | null): string | undefined {
  if (clientId === null) return undefined;
  if (/^broker-\d+-fetcher-\d+$/.test(clientId)) return 'replica';
  if (clientId.startsWith('walproxy-e2e')) return 'kafkajs';
  if (clientId === 'rdkafka') return 'kcat';
  if (/^(perf-|producer-|consumer-|adminclient-)/.test(clientId)) return 'java';
  return undefined;
}

async function main(): Promise<void> {
  const outDir = process.argv[2] ?? path.join(repoRoot(), 'shared', 'test', 'fixtures', 'golden');
  mkdirSync(outDir, { recursive: true });
  const counts = new Map<string, number>();
  const sources = new WeakMap<RequestInfo, string>();
  const save = (kind: 'request' | 'response', info: RequestInfo, source: string, frame: Buffer) => {
    const api = apiKeyInfo(info.apiKey)?.name;
    if (!api || !CAPTURED_APIS.has(api) || frame.length > MAX_FRAME) return;
    const key = `${api}-v${info.apiVersion}-${kind}-${source}`;
    const n = (counts.get(key) ?? 0) + 1;
    if (n > PER_KIND) return;
    // The first frame of a kind is often empty (a fetch before any data); the second of a
    // record-carrying kind must carry records.
    const carriesRecords =
      (api === 'Fetch' && kind === 'response') || (api === 'Produce' && kind === 'request');
    if (n > 1 && carriesRecords && frame.length < 1024) return;
    counts.set(key, n);
    writeFileSync(path.join(outDir, `${key}-${n}.bin`), frame.subarray(4));
  };
  const observer: FrameObserver = {
    request(info, frame) {
      const source = sourceOf(decodeRequestHeader(frame.subarray(4)).clientId);
      if (!source) return;
      sources.set(info, source);
      save('request', info, source, frame);
    },
    response(info, frame) {
      const source = sources.get(info);
      if (source) save('response', info, source, frame);
    },
  };

  const cluster = await KafkaCluster.start({ sidecars: 'external' });
  const sidecars: Sidecar[] = [];
  try {
    sidecars.push(...(await startInProcessSidecars(cluster, { observer })));
    const bootstrap = cluster.bootstrap();
    await createTopic(bootstrap, 'golden', { partitions: 3 });

    // kafkajs: Produce v7, Fetch v11
    const kafka = kafkaClient(bootstrap);
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic: 'golden',
      messages: Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `kafkajs-${i}` })),
    });
    await producer.disconnect();
    const consumer = kafka.consumer({ groupId: 'golden-kafkajs' });
    await consumer.connect();
    await consumer.subscribe({ topic: 'golden', fromBeginning: true });
    let seen = 0;
    await new Promise<void>((resolve) => {
      void consumer.run({
        eachMessage: async () => {
          if (++seen === 20) resolve();
        },
      });
    });
    await consumer.disconnect();

    // librdkafka
    await kcat(['-b', bootstrap, '-t', 'golden', '-P', '-K', ':'], 'a:kcat-1\nb:kcat-2\nc:kcat-3\n');
    await kcat(['-b', bootstrap, '-t', 'golden', '-C', '-o', 'beginning', '-e', '-q']);

    // the Java client
    await producerPerf({
      bootstrap,
      topic: 'golden',
      records: 300,
      recordSize: 100,
      props: { 'client.id': 'perf-producer-golden' },
    });
    await consumerPerf({ bootstrap, topic: 'golden', records: 323 });
    // the Java Admin client asks DescribeCluster (KIP-700)
    await runKafkaTool('org.apache.kafka.tools.ClusterTool', ['cluster-id', '--bootstrap-server', bootstrap]);

    // Let the replica fetchers run a few more rounds (empty fetches, session updates).
    await new Promise((r) => setTimeout(r, 3_000));
  } finally {
    for (const sidecar of sidecars) await sidecar.stop(1_000);
    await cluster.stop();
  }
  console.log(
    `captured ${[...counts.values()].reduce((a, n) => a + Math.min(n, PER_KIND), 0)} frames into ${outDir}:`,
  );
  for (const key of [...counts.keys()].sort()) console.log(`  ${key}`);
}

await main();
