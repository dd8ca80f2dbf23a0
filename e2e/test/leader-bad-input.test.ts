// Bad input on the leader side, compared with the stock broker on the same cluster: every raw
// Produce is sent once through the sidecar's client ingress and once to the broker's DIRECT
// listener (no sidecar), and the two answers must be the same.
import net from 'node:net';
import {
  ApiKey,
  crc32c,
  decodeMetadataResponse,
  decodeProduceResponse,
  decodeResponseHeader,
  encodeMetadataRequest,
  encodeProduceRequest,
  encodeRequestHeader,
  type ProduceResponse,
  responseHeaderVersion,
  topicNamesById,
} from '@walproxy/shared';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { withAdmin } from '../src/clients/kafkajs.js';
import { openE2eStore, readWalObjects } from '../src/wal/inspect.js';

const LEADER = 1;
const TOPIC = 'wal-leader-bad-input';

/** One connection that sends requests and reads their responses in order. */
class RawConnection {
  private buffered = Buffer.alloc(0);
  private waiting: Array<(frame: Buffer) => void> = [];
  closed = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      while (this.buffered.length >= 4) {
        const size = this.buffered.readInt32BE(0);
        if (this.buffered.length < 4 + size) break;
        const frame = this.buffered.subarray(4, 4 + size);
        this.buffered = this.buffered.subarray(4 + size);
        this.waiting.shift()?.(frame);
      }
    });
    socket.on('close', () => {
      this.closed = true;
    });
    socket.on('error', () => undefined);
  }

  static open(address: string): Promise<RawConnection> {
    const [host, port] = address.split(':');
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: host!, port: Number(port) }, () =>
        resolve(new RawConnection(socket)),
      );
      socket.once('error', reject);
    });
  }

  /** Sends one request (header + body) and resolves with the response payload after its header. */
  async request(apiKey: number, apiVersion: number, body: Buffer, correlationId: number): Promise<Buffer> {
    const header = encodeRequestHeader({ apiKey, apiVersion, correlationId, clientId: 'leader-bad-input' });
    const size = Buffer.alloc(4);
    size.writeInt32BE(header.length + body.length, 0);
    const response = new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no answer to correlation id ${correlationId}`)),
        15_000,
      );
      this.waiting.push((frame) => {
        clearTimeout(timer);
        resolve(frame);
      });
      this.socket.once('close', () => reject(new Error('the connection was closed')));
    });
    this.socket.write(Buffer.concat([size, header, body]));
    const frame = await response;
    const { correlationId: got, headerLength } = decodeResponseHeader(
      frame,
      responseHeaderVersion(apiKey, apiVersion)!,
    );
    expect(got).toBe(correlationId);
    return frame.subarray(headerLength);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A magic v2 batch of one record, as a non-idempotent producer sends it. */
function batchOf(value: string): Buffer {
  const v = Buffer.from(value);
  if (v.length >= 64) throw new Error('keep values short: one-byte varints');
  const record = Buffer.from([0, 0, 0, 1, v.length * 2, ...v, 0]); // attrs, ts, offset, null key, value, headers
  const b = Buffer.alloc(61 + 1 + record.length);
  b.writeInt32BE(b.length - 12, 8);
  b.writeInt32BE(-1, 12);
  b.writeInt8(2, 16);
  const now = BigInt(Date.now());
  b.writeBigInt64BE(now, 27);
  b.writeBigInt64BE(now, 35);
  b.writeBigInt64BE(-1n, 43);
  b.writeInt16BE(-1, 51);
  b.writeInt32BE(-1, 53);
  b.writeInt32BE(1, 57);
  b.writeInt8(record.length * 2, 61);
  record.copy(b, 62);
  b.writeUInt32BE(crc32c(b.subarray(21)), 17);
  return b;
}

const spoilers: Record<string, (b: Buffer) => Buffer> = {
  'magic 1': (b) => {
    b.writeInt8(1, 16);
    return b;
  },
  'a Length below the v2 header': (b) => {
    b.writeInt32BE(20, 8);
    return b;
  },
};

function addressOf(bootstrap: string, brokerId: number): string {
  return bootstrap.split(',')[brokerId - 1]!;
}

interface PartitionAnswer {
  index: number;
  errorCode: number;
}

function answers(response: ProduceResponse): PartitionAnswer[] {
  return response.responses
    .flatMap((t) => t.partitionResponses.map((p) => ({ index: p.index, errorCode: p.errorCode })))
    .sort((a, b) => a.index - b.index);
}

describe('bad batches in a Produce to a WAL topic, as stock answers them', () => {
  const cluster = inject('cluster');
  let topicId: string;
  let correlationId = 100;

  beforeAll(async () => {
    // Two partitions led by broker 1 (the preferred leader is the first replica)
    await withAdmin(cluster.bootstrap, async (admin) => {
      await admin.createTopics({
        topics: [
          {
            topic: TOPIC,
            replicaAssignment: [
              { partition: 0, replicas: [1, 2, 3] },
              { partition: 1, replicas: [1, 3, 2] },
            ],
          },
        ],
      });
    });
    const connection = await RawConnection.open(addressOf(cluster.directBootstrap, LEADER));
    try {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const body = await connection.request(
          ApiKey.Metadata,
          12,
          encodeMetadataRequest({ topics: [{ name: TOPIC }], allowAutoTopicCreation: false }, 12),
          correlationId++,
        );
        const metadata = decodeMetadataResponse(body, 12);
        const topic = metadata.topics.find((t) => t.name === TOPIC);
        const id = [...topicNamesById(metadata)].find(([, name]) => name === TOPIC)?.[0];
        if (id !== undefined && topic?.partitions.every((p) => p.leaderId === LEADER)) {
          topicId = id;
          break;
        }
        if (Date.now() > deadline) throw new Error(`${TOPIC} has no leader on broker ${LEADER}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      connection.close();
    }
  });

  const produced: string[] = [];

  for (const version of [9, 13]) {
    for (const [what, spoil] of Object.entries(spoilers)) {
      it(`Produce v${version} with ${what} in partition 0 and a good batch in partition 1`, async () => {
        const results: Record<string, { answers: PartitionAnswer[]; nextAnswered: boolean }> = {};
        for (const [path, bootstrap] of [
          ['stock', cluster.directBootstrap],
          ['sidecar', cluster.bootstrap],
        ] as const) {
          const value = `good-v${version}-${what.replaceAll(' ', '-')}-${path}`;
          produced.push(value);
          const connection = await RawConnection.open(addressOf(bootstrap, LEADER));
          try {
            const topic = version >= 13 ? { topicId } : { name: TOPIC };
            // Given a Produce whose partition 0 holds a batch no broker should accept
            const body = encodeProduceRequest(
              {
                transactionalId: null,
                acks: -1,
                timeoutMs: 10_000,
                topicData: [
                  {
                    ...topic,
                    partitionData: [
                      { index: 0, records: spoil(batchOf('bad')) },
                      { index: 1, records: batchOf(value) },
                    ],
                  },
                ],
              },
              version,
            );
            // When it is sent
            const response = decodeProduceResponse(
              await connection.request(ApiKey.Produce, version, body, correlationId++),
              version,
            );
            // And a Metadata request follows on the same connection
            const next = await connection
              .request(
                ApiKey.Metadata,
                12,
                encodeMetadataRequest({ topics: [{ name: TOPIC }], allowAutoTopicCreation: false }, 12),
                correlationId++,
              )
              .then(
                () => true,
                () => false,
              );
            results[path] = { answers: answers(response), nextAnswered: next };
          } finally {
            connection.close();
          }
        }
        // Then the sidecar answers each partition as the stock broker does: partition 0 refused,
        // partition 1 appended
        expect(results.stock!.answers[0]!.errorCode).not.toBe(0);
        expect(results.stock!.answers[1]!.errorCode).toBe(0);
        expect(results.sidecar!.answers).toEqual(results.stock!.answers);
        // And the connection stays open and answers the next request
        expect(results.sidecar!.nextAnswered).toBe(true);
        expect(results.stock!.nextAnswered).toBe(true);
      });
    }
  }

  describe('what the WAL holds', () => {
    let store: ReturnType<typeof openE2eStore>;
    afterAll(async () => store?.close());

    it('holds every good batch sent through the sidecar and nothing of the bad ones', async () => {
      store = openE2eStore(cluster.s3);
      const deadline = Date.now() + 15_000;
      const throughSidecar = produced.filter((v) => v.endsWith('-sidecar'));
      for (;;) {
        const batches = (await readWalObjects(store)).filter((b) => b.entry.topicName === TOPIC);
        const values = batches.map((b) => b.bytes.toString('latin1'));
        const found = throughSidecar.filter((v) => values.some((text) => text.includes(v)));
        if (found.length === throughSidecar.length) {
          // Partition 1 only: the bad partition's batches never reached the WAL
          expect(new Set(batches.map((b) => b.entry.partition))).toEqual(new Set([1]));
          expect(values.some((text) => text.includes('bad'))).toBe(false);
          return;
        }
        if (Date.now() > deadline) throw new Error(`WAL holds ${found.length} of ${throughSidecar.length}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    });
  });
});

describe('a Produce the broker refuses never lands in the bucket', () => {
  const cluster = inject('cluster');
  const topic = 'wal-leader-refused';
  let correlationId = 500;

  it('stores and references the accepted partition only', async () => {
    // Given a WAL topic whose broker refuses batches over 1,000 bytes, partitions led by broker 1
    await withAdmin(cluster.bootstrap, async (admin) => {
      await admin.createTopics({
        topics: [
          {
            topic,
            replicaAssignment: [
              { partition: 0, replicas: [1, 2, 3] },
              { partition: 1, replicas: [1, 3, 2] },
            ],
            configEntries: [{ name: 'max.message.bytes', value: '1000' }],
          },
        ],
      });
    });
    const connection = await RawConnection.open(addressOf(cluster.bootstrap, LEADER));
    const accepted = `accepted-${Date.now()}`;
    // A batch over max.message.bytes (its records are not parsed before the size check)
    const tooLarge = batchOf('too-large');
    const bigRecordBatch = Buffer.concat([tooLarge, Buffer.alloc(2_000, 0x61)]);
    bigRecordBatch.writeInt32BE(bigRecordBatch.length - 12, 8);
    bigRecordBatch.writeUInt32BE(crc32c(bigRecordBatch.subarray(21)), 17);
    try {
      let answers: PartitionAnswer[] = [];
      const deadline = Date.now() + 30_000;
      // When a Produce carries a batch too large for partition 0, a good one for partition 1,
      // and one for partition 7, which does not exist (retried while the new topic's leadership
      // propagates)
      for (;;) {
        const body = encodeProduceRequest(
          {
            transactionalId: null,
            acks: -1,
            timeoutMs: 10_000,
            topicData: [
              {
                name: topic,
                partitionData: [
                  { index: 0, records: bigRecordBatch },
                  { index: 1, records: batchOf(accepted) },
                  { index: 7, records: batchOf('no-such-partition') },
                ],
              },
            ],
          },
          9,
        );
        const response = decodeProduceResponse(
          await connection.request(ApiKey.Produce, 9, body, correlationId++),
          9,
        );
        answers = response.responses.flatMap((t) =>
          t.partitionResponses.map((p) => ({ index: p.index, errorCode: p.errorCode })),
        );
        if (answers.find((a) => a.index === 1)?.errorCode === 0) break;
        if (Date.now() > deadline) throw new Error(`partition 1 never accepted: ${JSON.stringify(answers)}`);
        await new Promise((r) => setTimeout(r, 300));
      }
      // Then the broker refused partitions 0 and 7
      const codeOf = (index: number) => answers.find((a) => a.index === index)?.errorCode;
      expect(codeOf(0)).toBe(10); // MESSAGE_TOO_LARGE
      expect(codeOf(7)).toBe(3); // UNKNOWN_TOPIC_OR_PARTITION
    } finally {
      connection.close();
    }

    // And after the uploads, the WAL holds the accepted batch and nothing of the refused ones
    const store = openE2eStore(cluster.s3);
    try {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const batches = (await readWalObjects(store)).filter((b) => b.entry.topicName === topic);
        const texts = batches.map((b) => b.bytes.toString('latin1'));
        if (texts.some((t) => t.includes(accepted))) {
          expect(texts.some((t) => t.includes('too-large') || t.includes('no-such-partition'))).toBe(false);
          expect(new Set(batches.map((b) => b.entry.partition))).toEqual(new Set([1]));
          break;
        }
        if (Date.now() > deadline) throw new Error('the accepted batch never reached the WAL');
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      await store.close();
    }
  });
});
