/**
 * Captures the frames the filters' fuzz tests mutate (proxy/test/filters/*.fuzz.test.ts) from a
 * real cluster: `npx tsx e2e/src/capture/capture-fuzz-frames.ts [outDir]` (hold
 * /tmp/walproxy-e2e.lock: it starts brokers). Writes proxy/test/fixtures/fuzz/ by default.
 *
 * The sidecars run in this process with a frame observer and a file store. Real clients (kafkajs
 * uncompressed and gzip; the Java producer with lz4, zstd, snappy and none, idempotence off)
 * produce one batch each to `wal-fuzz`, whose partitions broker 1 leads; their batches are then
 * sent again, through broker 1's sidecar, in one Produce of every version 3–13 (three WAL
 * partitions and a non-WAL topic per request), with a few through the broker's own listener in
 * between so some log batches are not in the WAL. The replica fetchers' exchanges with broker 1
 * are kept whole: the follower's request, the request its sidecar marked, the broker's stock
 * response and the leader sidecar's answer with references, with the WAL objects referenced.
 * Rerun it (KAFKA_VERSION=…) when the wire formats or the reference format change.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  createLogger,
  type FrameObserver,
  openObjectStore,
  parseSidecarConfig,
  type RequestInfo,
  Sidecar,
} from '@walproxy/proxy';
import {
  ApiKey,
  CRC_START,
  crc32c,
  decodeFetchRequest,
  decodeFetchResponse,
  decodePartitionSegments,
  decodeProduceRequest,
  decodeProduceResponse,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeProduceRequest,
  FETCH_CAPABILITY_TAG,
  PARTITION_SEGMENTS_TAG,
  type ProducePartitionData,
  responseHeaderVersion,
} from '@walproxy/shared';
import { CompressionTypes } from 'kafkajs';
import { producerPerf } from '../clients/java-tools.js';
import { kafkaClient } from '../clients/kafkajs.js';
import { leaderOf, RawConnection, requestFrame } from '../clients/raw-connection.js';
import { rawOptions } from '../cluster/in-process-sidecars.js';
import { BROKER_IDS, KafkaCluster } from '../cluster/kafka-cluster.js';
import { repoRoot } from '../cluster/paths.js';
import { createFuzzTopics } from '../fuzz/fuzz-topics.js';

const TOPIC = 'wal-fuzz';
const PLAIN = 'plain-fuzz';
const LEADER = 1;
const PRODUCE_VERSIONS = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
/** zstd batches need Produce v7+ (KIP-110). */
const ZSTD_MIN_VERSION = 7;
const MAX_EXCHANGES = 5;
const MIXED_ROUNDS = 12;
const MAX_FRAME = 64 * 1024;

interface Exchange {
  key: string;
  apiVersion: number;
  followerRequest?: Buffer;
  markedRequest?: Buffer;
  stockResponse?: Buffer;
  referencedResponse?: Buffer;
}

/** Which captured client each real batch came from. */
interface ClientBatch {
  client: string;
  records: Buffer;
}

let uniques = 0;

/**
 * A copy of a client's batch with its timestamps moved on a millisecond: other bytes than any
 * batch the sidecar stored, so the WAL cannot hold it (a batch sent twice is found in the WAL
 * whichever way the second copy came).
 */
function unique(batch: Buffer): Buffer {
  const out = Buffer.from(batch);
  const shift = BigInt(++uniques);
  out.writeBigInt64BE(out.readBigInt64BE(27) + shift, 27);
  out.writeBigInt64BE(out.readBigInt64BE(35) + shift, 35);
  out.writeUInt32BE(crc32c(out.subarray(CRC_START)), 17);
  return out;
}

function copy(frame: Buffer): Buffer {
  return Buffer.from(frame.subarray(4));
}

async function main(): Promise<void> {
  const outDir = process.argv[2] ?? path.join(repoRoot(), 'proxy', 'test', 'fixtures', 'fuzz');
  const storeDir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-fuzz-store-'));
  const storeUrl = `file://${storeDir}`;

  let topicId = '';
  const clientFrames = new Map<string, { request?: Buffer; response?: Buffer }>();
  const exchanges = new Map<string, Exchange>();
  const kinds = new WeakMap<RequestInfo, { exchange?: Exchange; marked?: boolean; client?: string }>();
  const observer: FrameObserver = {
    request(info, frame) {
      if (frame.length > MAX_FRAME) return;
      const payload = frame.subarray(4);
      const header = decodeRequestHeader(payload);
      const clientId = header.clientId ?? '';
      if (info.apiKey === ApiKey.Produce && clientId.startsWith('fuzz-client-')) {
        const captured = clientFrames.get(clientId) ?? {};
        if (captured.request === undefined) {
          captured.request = copy(frame);
          clientFrames.set(clientId, captured);
          kinds.set(info, { client: clientId });
        }
        return;
      }
      if (info.apiKey !== ApiKey.Fetch || !/^broker-\d+-fetcher-\d+$/.test(clientId) || topicId === '')
        return;
      const request = decodeFetchRequest(payload.subarray(header.headerLength), info.apiVersion);
      // Only broker 1 leads wal-fuzz, so only its followers' fetches name it: clientId and
      // correlation id then identify one exchange on both of its hops.
      if (!request.topics.some((t) => t.topicId === topicId)) return;
      const marked = request.taggedFields?.some((t) => t.tag === FETCH_CAPABILITY_TAG) ?? false;
      const key = `${clientId}/${info.correlationId}`;
      const exchange = exchanges.get(key) ?? { key, apiVersion: info.apiVersion };
      exchanges.set(key, exchange);
      if (marked) exchange.markedRequest = copy(frame);
      else exchange.followerRequest = copy(frame);
      kinds.set(info, { exchange, marked });
    },
    response(info, frame) {
      const kind = kinds.get(info);
      if (kind === undefined || frame.length > MAX_FRAME) return;
      if (kind.client !== undefined) {
        clientFrames.get(kind.client)!.response = copy(frame);
        return;
      }
      // The leader's ingress sees the broker's answer to the marked request; the follower's
      // egress sees the leader sidecar's answer to the follower's request.
      if (kind.marked) kind.exchange!.stockResponse = copy(frame);
      else kind.exchange!.referencedResponse = copy(frame);
    },
  };

  const cluster = await KafkaCluster.start({
    sidecars: 'external',
    sidecarArgs: () => [`--wal-store-url=${storeUrl}`, '--wal-topic=wal-*'],
  });
  const sidecars: Sidecar[] = [];
  const store = openObjectStore(storeUrl);
  try {
    for (const id of BROKER_IDS) {
      const parsed = parseSidecarConfig(rawOptions(cluster.sidecarArguments(id)));
      if ('errors' in parsed) throw new Error(parsed.errors.join('\n'));
      const sidecar = new Sidecar(parsed.config, createLogger('warn'), observer);
      await sidecar.start();
      sidecars.push(sidecar);
    }
    const bootstrap = cluster.bootstrap();
    const ingress = bootstrap.split(',')[LEADER - 1]!;
    const direct = cluster.directBootstrap().split(',')[LEADER - 1]!;
    // leadTopics waits, on the broker's own answers.
    await createFuzzTopics(bootstrap, TOPIC, PLAIN);
    const ids = await leaderOf(direct, [TOPIC, PLAIN], LEADER);
    topicId = ids.get(TOPIC)!;

    // Real clients, one batch each.
    for (const [name, compression] of [
      ['none', CompressionTypes.None],
      ['gzip', CompressionTypes.GZIP],
    ] as const) {
      const producer = kafkaClient(bootstrap, `fuzz-client-kafkajs-${name}`).producer();
      await producer.connect();
      await producer.send({
        topic: TOPIC,
        compression,
        messages: Array.from({ length: 4 }, (_, i) => ({
          key: `k${i}`,
          value: `kafkajs-${name}-${i}`,
          headers: { origin: 'fuzz' },
          partition: 0,
        })),
      });
      await producer.disconnect();
    }
    for (const codec of ['none', 'lz4', 'zstd', 'snappy']) {
      await producerPerf({
        bootstrap,
        topic: TOPIC,
        records: 6,
        recordSize: 48,
        props: {
          'client.id': `fuzz-client-java-${codec}`,
          'compression.type': codec,
          'enable.idempotence': 'false',
          'linger.ms': 200,
        },
      });
    }
    const pool: ClientBatch[] = [];
    for (const [client, frames] of [...clientFrames].sort(([a], [b]) => a.localeCompare(b))) {
      if (!frames.request) continue;
      const payload = frames.request;
      const header = decodeRequestHeader(payload);
      const version = payload.readInt16BE(2);
      const request = decodeProduceRequest(payload.subarray(header.headerLength), version);
      const records = request.topicData.flatMap((t) => t.partitionData).find((p) => p.records)?.records;
      if (records) pool.push({ client: client.replace('fuzz-client-', ''), records: Buffer.from(records) });
    }
    if (pool.length < 4) throw new Error(`only ${pool.length} client batches captured`);

    // Every Produce version, through the sidecar, with a Produce straight to the broker between.
    const produced: Array<{ version: number; request: Buffer; response: Buffer; batches: string[] }> = [];
    const viaSidecar = await RawConnection.open(ingress);
    const viaBroker = await RawConnection.open(direct);
    let correlationId = 1_000;
    try {
      for (const version of PRODUCE_VERSIONS) {
        const usable = pool.filter((b) => version >= ZSTD_MIN_VERSION || !b.client.endsWith('zstd'));
        const pick = (i: number) => usable[(version + i) % usable.length]!;
        const partitions = (count: number, from: number): ProducePartitionData[] =>
          Array.from({ length: count }, (_, i) => ({ index: i, records: pick(from + i).records }));
        const ref = (name: string) => (version >= 13 ? { topicId: ids.get(name)! } : { name });
        const body = encodeProduceRequest(
          {
            transactionalId: null,
            acks: version % 2 === 0 ? 1 : -1,
            timeoutMs: 10_000,
            topicData: [
              { ...ref(TOPIC), partitionData: partitions(3, 0) },
              { ...ref(PLAIN), partitionData: partitions(1, 3) },
            ],
          },
          version,
        );
        const frame = requestFrame(ApiKey.Produce, version, body, correlationId++, 'fuzz-raw');
        const response = await viaSidecar.request(
          ApiKey.Produce,
          version,
          body,
          correlationId - 1,
          'fuzz-raw',
        );
        const { headerLength } = decodeResponseHeader(
          response,
          responseHeaderVersion(ApiKey.Produce, version)!,
        );
        const answers = decodeProduceResponse(response.subarray(headerLength), version).responses.flatMap(
          (t) => t.partitionResponses,
        );
        if (answers.some((a) => a.errorCode !== 0)) {
          throw new Error(`Produce v${version}: ${JSON.stringify(answers.map((a) => a.errorCode))}`);
        }
        produced.push({
          version,
          request: frame.subarray(4),
          response,
          batches: [0, 1, 2, 3].map((i) => pick(i).client),
        });
        // A batch the WAL does not hold, between WAL batches of partition 0.
        if (version % 3 === 0) {
          const inline = encodeProduceRequest(
            {
              transactionalId: null,
              acks: -1,
              timeoutMs: 10_000,
              topicData: [{ name: TOPIC, partitionData: [{ index: 0, records: unique(pick(5).records) }] }],
            },
            9,
          );
          await viaBroker.request(ApiKey.Produce, 9, inline, correlationId++, 'fuzz-raw-direct');
        }
      }
      // The same partition through both at once, so some fetches carry WAL batches and a batch
      // the WAL does not hold side by side.
      for (let round = 0; round < MIXED_ROUNDS; round++) {
        const one = (i: number, records = pool[i % pool.length]!.records) =>
          encodeProduceRequest(
            {
              transactionalId: null,
              acks: 1,
              timeoutMs: 10_000,
              topicData: [{ name: TOPIC, partitionData: [{ index: 0, records }] }],
            },
            9,
          );
        await Promise.all([
          viaSidecar.request(ApiKey.Produce, 9, one(round), correlationId++, 'fuzz-raw'),
          viaBroker.request(
            ApiKey.Produce,
            9,
            one(round + 1, unique(pool[(round + 1) % pool.length]!.records)),
            correlationId++,
            'fuzz-raw-direct',
          ),
          viaSidecar.request(ApiKey.Produce, 9, one(round + 2), correlationId++, 'fuzz-raw'),
        ]);
      }
    } finally {
      viaSidecar.close();
      viaBroker.close();
    }

    // Let the replica fetchers settle, then keep the exchanges whose answer carried references.
    await new Promise((r) => setTimeout(r, 2_000));
    const complete = [...exchanges.values()].filter(
      (e) => e.followerRequest && e.markedRequest && e.stockResponse && e.referencedResponse,
    );
    const scored = complete
      .map((e) => ({ e, ...referencesIn(e.referencedResponse!, e.apiVersion) }))
      .filter((s) => s.references > 0)
      .sort((a, b) => b.inlineAndReference - a.inlineAndReference || b.references - a.references);
    // Two followers often fetch the same batches: keep one exchange of each shape.
    const shapes = new Set<string>();
    const chosen = scored.filter((s) => !shapes.has(s.shape) && shapes.add(s.shape)).slice(0, MAX_EXCHANGES);
    if (chosen.length === 0) throw new Error('no replica fetch answered with references was captured');

    // A fresh set (the README stays).
    for (const sub of ['produce', 'fetch', 'objects']) {
      rmSync(path.join(outDir, sub), { recursive: true, force: true });
      mkdirSync(path.join(outDir, sub), { recursive: true });
    }
    for (const p of produced) {
      writeFileSync(path.join(outDir, 'produce', `Produce-v${p.version}-request.bin`), p.request);
      writeFileSync(path.join(outDir, 'produce', `Produce-v${p.version}-response.bin`), p.response);
    }
    const clients: string[] = [];
    for (const [client, frames] of [...clientFrames].sort(([a], [b]) => a.localeCompare(b))) {
      if (!frames.request || !frames.response) continue;
      const name = client.replace('fuzz-client-', 'client-');
      clients.push(name);
      writeFileSync(path.join(outDir, 'produce', `${name}-request.bin`), frames.request);
      writeFileSync(path.join(outDir, 'produce', `${name}-response.bin`), frames.response);
    }
    const objectKeys = new Set<string>();
    const fetches = chosen.map(({ e, keys }, i) => {
      const name = `exchange-${i + 1}`;
      writeFileSync(path.join(outDir, 'fetch', `${name}-follower-request.bin`), e.followerRequest!);
      writeFileSync(path.join(outDir, 'fetch', `${name}-marked-request.bin`), e.markedRequest!);
      writeFileSync(path.join(outDir, 'fetch', `${name}-stock-response.bin`), e.stockResponse!);
      writeFileSync(path.join(outDir, 'fetch', `${name}-referenced-response.bin`), e.referencedResponse!);
      for (const key of keys) objectKeys.add(key);
      return { name, apiVersion: e.apiVersion };
    });
    const objects: Array<{ file: string; key: string }> = [];
    for (const key of [...objectKeys].sort()) {
      const file = `${objects.length + 1}.wal`;
      writeFileSync(path.join(outDir, 'objects', file), await store.get(key));
      objects.push({ file, key });
    }
    writeFileSync(
      path.join(outDir, 'manifest.json'),
      `${JSON.stringify(
        {
          kafkaVersion: cluster.version,
          storeUrl,
          topics: Object.fromEntries(ids),
          walTopics: [TOPIC],
          produce: produced.map((p) => ({ version: p.version, batches: p.batches })),
          clients,
          fetch: fetches,
          objects,
        },
        null,
        2,
      )}\n`,
    );
    console.log(
      `captured ${produced.length} Produce exchanges, ${clients.length} client Produce, ${fetches.length} replica Fetch exchanges, ${objects.length} WAL objects into ${outDir}`,
    );
  } finally {
    for (const sidecar of sidecars) await sidecar.stop(1_000);
    await store.close();
    await cluster.stop();
    rmSync(storeDir, { recursive: true, force: true });
  }
}

/** How many references an answer carries, whether a partition mixes them with inline batches, and their objects. */
function referencesIn(
  frame: Buffer,
  version: number,
): { references: number; inlineAndReference: number; keys: string[]; shape: string } {
  const { headerLength } = decodeResponseHeader(frame, responseHeaderVersion(ApiKey.Fetch, version)!);
  const response = decodeFetchResponse(frame.subarray(headerLength), version);
  let references = 0;
  let inlineAndReference = 0;
  const keys: string[] = [];
  const shape: string[] = [];
  for (const topic of response.responses) {
    for (const partition of topic.partitions) {
      const tag = partition.taggedFields?.find((t) => t.tag === PARTITION_SEGMENTS_TAG);
      if (!tag) continue;
      const segments = decodePartitionSegments(tag.data);
      shape.push(`${partition.partitionIndex}:${segments.map((s) => s.kind[0]).join('')}`);
      let refs = 0;
      for (const s of segments) {
        if (s.kind !== 'reference') continue;
        refs++;
        keys.push(s.objectKey);
      }
      references += refs;
      if (refs > 0 && segments.some((s) => s.kind === 'inline')) inlineAndReference++;
    }
  }
  return { references, inlineAndReference, keys, shape: shape.sort().join(' ') };
}

await main();
