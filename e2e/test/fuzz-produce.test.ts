// Mutated Produce requests against a real broker (issue #12, "bad input as stock answers it"):
// each is sent over raw TCP on a fresh connection once to broker 1's own listener and once
// through its sidecar's client ingress, followed on the same connection by an ApiVersions
// request, and the two outcomes must be the same: the same per-partition error codes (or both no
// answer, as for acks=0), and the same fate of the connection (the ApiVersions answered, or the
// connection closed). Then the WAL holds only batches the broker appended, and the sidecar
// serves kafkajs as before. The base requests carry real client batches (kafkajs, the Java
// producer: none, gzip, lz4, snappy, zstd) captured into proxy/test/fixtures/fuzz; the seed and
// case count are the unit fuzz tests' (WALPROXY_FUZZ_SEED, WALPROXY_FUZZ_CASES, WALPROXY_FUZZ_CASE).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  ApiKey,
  CRC_START,
  crc32c,
  decodeProduceResponse,
  decodeResponseHeader,
  encodeApiVersionsRequest,
  encodeProduceRequest,
  type ProducePartitionData,
  peekRequestKey,
  responseHeaderVersion,
} from '@walproxy/shared';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { consumeValues, createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { leaderOf, RawConnection, requestFrame } from '../src/clients/raw-connection.js';
import { walPublishingIdle } from '../src/cluster/cluster-info.js';
import { repoRoot } from '../src/cluster/paths.js';
import { createFuzzTopics } from '../src/fuzz/fuzz-topics.js';
import { caseName, fuzzCases, Rng } from '../src/fuzz/mutations.js';
import { decodeProduce, mutateProduceRequest } from '../src/fuzz/produce-mutations.js';
import { openE2eStore, readPartitionLog, readWalObjects } from '../src/wal/inspect.js';

const FILE = 'fuzz-produce.e2e';
const CASES = 200;
const LEADER = 1;
const TOPIC = 'wal-fuzz-e2e';
const PLAIN = 'plain-fuzz-e2e';
/** A correlation id no mutated Produce carries: it marks the ApiVersions answer. */
const PROBE_CORRELATION_ID = 0x7eed_0001;
/**
 * How long one connection may take to answer both requests or close. Some requests get neither,
 * from the broker itself (Kafka 4.4 never answers a Produce with null records), so this bounds
 * the run: 200 cases take about 35 s, most of it waiting on such cases.
 */
const EXCHANGE_TIMEOUT_MS = 5_000;
const ZSTD_MIN_VERSION = 7;

/** Real client batches, one per captured client Produce. */
function clientBatches(): Array<{ client: string; records: Buffer }> {
  const dir = path.join(repoRoot(), 'proxy', 'test', 'fixtures', 'fuzz', 'produce');
  return readdirSync(dir)
    .filter((f) => f.startsWith('client-') && f.endsWith('-request.bin'))
    .sort()
    .map((f) => {
      const payload = readFileSync(path.join(dir, f));
      const size = Buffer.alloc(4);
      size.writeInt32BE(payload.length, 0);
      const decoded = decodeProduce(Buffer.concat([size, payload]))!;
      const records = decoded.request.topicData[0]!.partitionData[0]!.records!;
      return { client: f.replace('-request.bin', ''), records: Buffer.from(records) };
    });
}

interface Outcome {
  /** Per-partition error codes of the Produce answer, sorted; 'none' when none came. */
  produce: string;
  /** The ApiVersions request after it answered, or the connection closed, or neither in time. */
  end: 'answered' | 'closed' | 'timeout';
}

/** Sends the Produce and an ApiVersions request on a fresh connection and says what came back. */
async function exchange(
  address: string,
  produce: Buffer,
  onAnswer: (frame: Buffer) => void = () => undefined,
): Promise<Outcome> {
  const connection = await RawConnection.open(address);
  try {
    connection.write(produce);
    connection.write(requestFrame(ApiKey.ApiVersions, 3, apiVersionsBody(), PROBE_CORRELATION_ID));
    const { apiVersion } = peekRequestKey(produce.subarray(4));
    let answer = 'none';
    const deadline = Date.now() + EXCHANGE_TIMEOUT_MS;
    for (;;) {
      const event = await connection.next(deadline - Date.now());
      if (event.kind === 'timeout') return { produce: answer, end: 'timeout' };
      if (event.kind === 'closed') return { produce: answer, end: 'closed' };
      if (event.frame.readInt32BE(0) === PROBE_CORRELATION_ID) return { produce: answer, end: 'answered' };
      answer = produceAnswer(event.frame, apiVersion);
      onAnswer(event.frame);
    }
  } finally {
    connection.close();
  }
}

/** The batches of a Produce whose partitions the answer says the broker appended, as hex. */
function appendedBatches(request: Buffer, answer: Buffer): string[] {
  const decoded = decodeProduce(request);
  if (decoded === undefined) return [];
  const version = request.readInt16BE(6);
  try {
    const { headerLength } = decodeResponseHeader(answer, responseHeaderVersion(ApiKey.Produce, version)!);
    const response = decodeProduceResponse(answer.subarray(headerLength), version);
    const ok = new Set(
      response.responses.flatMap((t) =>
        t.partitionResponses.filter((p) => p.errorCode === 0).map((p) => `${t.topicId ?? t.name}/${p.index}`),
      ),
    );
    return decoded.request.topicData.flatMap((t) =>
      t.partitionData
        .filter((p) => p.records !== null && ok.has(`${t.topicId ?? t.name}/${p.index}`))
        .map((p) => p.records!.toString('hex')),
    );
  } catch {
    return [];
  }
}

function apiVersionsBody(): Buffer {
  return encodeApiVersionsRequest({ clientSoftwareName: 'walproxy-fuzz', clientSoftwareVersion: '1' }, 3);
}

/** The error code of each partition of a Produce answer (offsets differ from one send to the next). */
function produceAnswer(frame: Buffer, version: number): string {
  try {
    const { headerLength } = decodeResponseHeader(frame, responseHeaderVersion(ApiKey.Produce, version)!);
    const response = decodeProduceResponse(frame.subarray(headerLength), version);
    return response.responses
      .flatMap((t) =>
        t.partitionResponses.map((p) => `${t.topicId?.slice(0, 8) ?? t.name}-${p.index}:${p.errorCode}`),
      )
      .sort()
      .join(' ');
  } catch {
    return `an answer the codec cannot read (${frame.length} bytes)`;
  }
}

/** A log batch is the produced one: the leader assigns the base offset and the leader epoch, nothing else. */
function sameBatch(log: Buffer, produced: Buffer): boolean {
  return (
    log.length === produced.length &&
    log.subarray(8, 12).equals(produced.subarray(8, 12)) &&
    log.subarray(16).equals(produced.subarray(16))
  );
}

/** A client's batch with its timestamps moved on `shift` ms: other bytes, as valid. */
function retimed(batch: Buffer, shift: bigint): Buffer {
  const out = Buffer.from(batch);
  out.writeBigInt64BE(out.readBigInt64BE(27) + shift, 27);
  out.writeBigInt64BE(out.readBigInt64BE(35) + shift, 35);
  out.writeUInt32BE(crc32c(out.subarray(CRC_START)), 17);
  return out;
}

describe('mutated Produce requests, straight to the broker and through its sidecar', () => {
  const cluster = inject('cluster');
  const ingress = cluster.bootstrap.split(',')[LEADER - 1]!;
  const direct = cluster.directBootstrap.split(',')[LEADER - 1]!;
  let ids: Map<string, string>;
  const bases: Array<{ version: number; frame: Buffer }> = [];
  /** Batches sent through the sidecar in partitions the broker answered with success. */
  const appendedViaSidecar = new Set<string>();
  /** Batches sent through the sidecar in requests the broker did not answer (acks=0). */
  const unanswered = new Set<string>();
  /**
   * Waits until no sidecar holds batch bytes for the store (uploads lingering or on their way,
   * tentative acks=0 batches until confirmed or dropped after 5 s) nor a reference to publish:
   * what the bucket holds then is all it will hold of what was sent.
   */
  const walSettled = () => walPublishingIdle(cluster, { timeoutMs: 20_000 });

  beforeAll(async () => {
    // Given a WAL topic with three partitions and a topic outside the WAL, all led by broker 1
    await createFuzzTopics(cluster.bootstrap, TOPIC, PLAIN);
    ids = await leaderOf(direct, [TOPIC, PLAIN], LEADER);
    // And one Produce of every version 3-13 carrying real client batches in every partition
    const pool = clientBatches();
    for (let version = 3; version <= 13; version++) {
      const usable = pool.filter((b) => version >= ZSTD_MIN_VERSION || !b.client.endsWith('zstd'));
      const pick = (i: number) => usable[(version + i) % usable.length]!.records;
      const partitions = (count: number, from: number): ProducePartitionData[] =>
        Array.from({ length: count }, (_, i) => ({ index: i, records: pick(from + i) }));
      const ref = (name: string) => (version >= 13 ? { topicId: ids.get(name)! } : { name });
      const body = encodeProduceRequest(
        {
          transactionalId: null,
          // acks=all waits for the followers, through the WAL on the sidecar's side: a few of them
          acks: version % 4 === 1 ? -1 : 1,
          timeoutMs: 10_000,
          topicData: [
            { ...ref(TOPIC), partitionData: partitions(3, 0) },
            { ...ref(PLAIN), partitionData: partitions(1, 3) },
          ],
        },
        version,
      );
      bases.push({
        version,
        frame: requestFrame(ApiKey.Produce, version, body, 1_000 + version, 'fuzz-e2e'),
      });
    }
  });

  it('gets the same per-partition answers, or the same closed connection, both ways', async () => {
    const topics = {
      names: [TOPIC, PLAIN, 'wal-fuzz-e2e-missing', 'wal-füzz', '', '__consumer_offsets'],
      ids: [...ids.values()],
    };
    const differences: string[] = [];
    for (const index of fuzzCases(CASES)) {
      const rng = Rng.forCase(FILE, index);
      const base = rng.pick(bases);
      const { bytes, what } = mutateProduceRequest(rng, base.frame, topics);
      const name = caseName(FILE, index, `Produce v${base.version}, ${what}`);
      // When the mutated request goes to the broker and through the sidecar, at once (no batch
      // carries producer state, so neither send changes the other's answer)
      const [stock, sidecar] = await Promise.all([
        exchange(direct, bytes),
        exchange(ingress, bytes, (answer) => {
          for (const batch of appendedBatches(bytes, answer)) appendedViaSidecar.add(batch);
        }),
      ]);
      if (sidecar.produce === 'none') {
        for (const t of decodeProduce(bytes)?.request.topicData ?? []) {
          for (const p of t.partitionData) if (p.records) unanswered.add(p.records.toString('hex'));
        }
      }
      // Then both connections end the same way
      if (stock.produce !== sidecar.produce || stock.end !== sidecar.end) {
        differences.push(`${name}: stock ${JSON.stringify(stock)}, sidecar ${JSON.stringify(sidecar)}`);
      }
    }
    expect(differences.slice(0, 20)).toEqual([]);
  });

  it.each([
    ['a client id that is not UTF-8', 9, (f: Buffer) => f.writeUInt8(0xff, 4 + 10)],
    ['a topic name that is not UTF-8', 9, (f: Buffer) => f.writeUInt8(0xc3, f.indexOf(TOPIC) + 3)],
    ['a transactional id of length -2', 8, (f: Buffer) => f.writeInt16BE(-2, 4 + 10 + 'fuzz-e2e'.length)],
  ])(
    'a Produce with %s, which the codec refuses, is answered as the broker answers it',
    async (_, version, spoil) => {
      // Given a request Kafka reads (any bytes are a string to it, any negative length null)
      const request = Buffer.from(bases.find((b) => b.version === version)!.frame);
      spoil(request);
      // When it goes both ways, then the broker answers it, and the sidecar passes that answer on
      const stock = await exchange(direct, request);
      expect(stock.produce).not.toBe('none');
      expect(stock.end).toBe('answered');
      expect(await exchange(ingress, request)).toEqual(stock);
    },
  );

  it('a Produce with bytes after its body ends the same both ways', async () => {
    const base = bases.find((b) => b.version === 9)!.frame;
    const request = Buffer.concat([base, Buffer.from([0, 1, 2])]);
    request.writeInt32BE(request.length - 4, 0);
    expect(await exchange(ingress, request)).toEqual(await exchange(direct, request));
  });

  it('a partition named twice in one Produce: the broker appends one copy, the WAL none', async () => {
    // Given two different batches for partition 2, in one Produce through the sidecar
    const [a, b] = [1n, 2n].map((shift) => retimed(clientBatches()[0]!.records, shift));
    const body = encodeProduceRequest(
      {
        transactionalId: null,
        acks: -1,
        timeoutMs: 10_000,
        topicData: [
          {
            name: TOPIC,
            partitionData: [
              { index: 2, records: a! },
              { index: 2, records: b! },
            ],
          },
        ],
      },
      9,
    );
    const connection = await RawConnection.open(ingress);
    let answer: string;
    try {
      answer = produceAnswer(await connection.request(ApiKey.Produce, 9, body, 77), 9);
    } finally {
      connection.close();
    }
    // Then the broker answers the partition once, with success, and its log holds one of them
    expect(answer).toBe(`${TOPIC}-2:0`);
    const log = readPartitionLog(cluster.dataDirs[LEADER]!, TOPIC, 2).map(({ batch }) => batch.bytes());
    const inLog = [a!, b!].filter((batch) => log.some((l) => sameBatch(l, batch)));
    expect(inLog).toHaveLength(1);
    // And the WAL holds neither
    await walSettled();
    const store = openE2eStore(cluster.s3);
    try {
      const stored = (await readWalObjects(store)).filter((s) => s.entry.topicName === TOPIC);
      expect(stored.filter((s) => s.bytes.equals(a!) || s.bytes.equals(b!))).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('stores in the WAL only batches of partitions the broker appended', async () => {
    await walSettled();
    const store = openE2eStore(cluster.s3);
    try {
      const stored = (await readWalObjects(store)).filter(
        (b) => b.entry.topicName === TOPIC || b.entry.topicId === ids.get(TOPIC),
      );
      expect(stored.length).toBeGreaterThan(0);
      // As sent: the broker may rewrite a batch it appends (a max timestamp the records do not
      // have), and then followers get its bytes inline; the WAL's copy is the producer's. A batch
      // of an acks=0 request has no answer: a follower's fetch found it in the leader's log.
      const logs = [0, 1, 2].map((p) =>
        readPartitionLog(cluster.dataDirs[LEADER]!, TOPIC, p).map(({ batch }) => batch.bytes()),
      );
      const strays = stored.filter(
        (b) =>
          !appendedViaSidecar.has(b.bytes.toString('hex')) &&
          !(
            unanswered.has(b.bytes.toString('hex')) &&
            logs[b.entry.partition]?.some((log) => sameBatch(log, b.bytes))
          ),
      );
      expect(strays.map((b) => `${b.objectKey} ${b.entry.partition}@${b.entry.position}`)).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('still serves a kafkajs producer and consumer through the sidecar', async () => {
    // Given a new WAL topic (the fuzzed ones hold lz4, snappy and zstd batches kafkajs cannot read)
    const topic = `${TOPIC}-after`;
    await createTopic(cluster.bootstrap, topic, { partitions: 1 });
    // When a kafkajs producer writes to it through the sidecar
    const kafka = kafkaClient(cluster.bootstrap, 'walproxy-e2e-after-fuzz');
    const producer = kafka.producer();
    await producer.connect();
    const values = Array.from({ length: 5 }, (_, i) => `after-fuzz-${i}`);
    await producer.send({ topic, messages: values.map((value) => ({ value })) });
    await producer.disconnect();
    // Then a kafkajs consumer reads them back through the sidecar
    expect(await consumeValues(cluster.bootstrap, topic, values.length, 'read_uncommitted')).toEqual(values);
  });
});
