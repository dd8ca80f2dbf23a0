import net from 'node:net';
import {
  decodeRequestHeader,
  encodeMetadataResponse,
  encodeResponseHeader,
  type MetadataPartition,
  type MetadataResponse,
  responseHeaderVersion,
} from '@walproxy/shared';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { partitionHealth } from '../../src/metadata/partition-health.js';
import { TopicNames } from '../../src/metadata/topic-names.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';

const p = (partitionIndex: number, leaderId: number, replicas: number[], isr: number[], errorCode = 0) =>
  ({ errorCode, partitionIndex, leaderId, replicaNodes: replicas, isrNodes: isr }) as MetadataPartition;

function metadata(topics: Array<{ name: string; errorCode?: number; partitions: MetadataPartition[] }>) {
  return {
    brokers: [],
    topics: topics.map((t, i) => ({
      errorCode: t.errorCode ?? 0,
      name: t.name,
      topicId: String(i + 1).padStart(32, '0'),
      partitions: t.partitions,
    })),
  } as MetadataResponse;
}

describe('partitionHealth', () => {
  it('counts, on the leader only, the partitions whose ISR is smaller than their replicas', () => {
    // Given broker 1 leading four partitions, one with a follower out of the ISR, one with
    // REPLICA_NOT_AVAILABLE (a replica offline: Kafka still names the leader and the lists)
    const m = metadata([
      { name: 'wal-a', partitions: [p(0, 1, [1, 2, 3], [1, 2, 3]), p(1, 1, [1, 2, 3], [1, 3])] },
      { name: 'wal-b', partitions: [p(0, 1, [1, 2, 3], [1], 9), p(1, 1, [1, 2], [2, 1])] },
      // led elsewhere: broker 2's sidecar counts it
      { name: 'wal-c', partitions: [p(0, 2, [1, 2, 3], [2])] },
      // refused as a whole (TOPIC_AUTHORIZATION_FAILED): nothing in it is known
      { name: 'secret', errorCode: 29, partitions: [p(0, 1, [1, 2, 3], [1])] },
    ]);
    // Then
    expect(partitionHealth(m, 1)).toEqual({ led: 4, underReplicated: 2 });
    expect(partitionHealth(m, 2)).toEqual({ led: 1, underReplicated: 1 });
    expect(partitionHealth(m, 3)).toEqual({ led: 0, underReplicated: 0 });
  });
});

describe('TopicNames with a broker id', () => {
  const servers: net.Server[] = [];
  afterEach(() => {
    for (const s of servers.splice(0)) s.close();
  });

  /** A broker that answers every Metadata request with `answer()`. */
  async function metadataBroker(answer: () => MetadataResponse): Promise<number> {
    const server = net.createServer((socket) => {
      socket.on('error', () => undefined);
      const decoder = new FrameDecoder(1 << 20);
      socket.on('data', (chunk) => {
        for (const frame of decoder.push(chunk)) {
          const { apiKey, apiVersion, correlationId } = decodeRequestHeader(frame.subarray(4));
          const header = encodeResponseHeader({ correlationId }, responseHeaderVersion(apiKey, apiVersion)!);
          const body = encodeMetadataResponse(answer(), apiVersion);
          const size = Buffer.alloc(4);
          size.writeInt32BE(header.length + body.length);
          socket.write(Buffer.concat([size, header, body]));
        }
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as net.AddressInfo).port;
  }

  it('keeps the partition counts of its last refresh next to the names, none before one', async () => {
    // Given a broker 1 whose follower 3 falls out of the ISR between two refreshes
    let isr = [1, 2, 3];
    const port = await metadataBroker(() =>
      metadata([{ name: 'wal-a', partitions: [p(0, 1, [1, 2, 3], isr), p(1, 2, [1, 2, 3], [1, 2, 3])] }]),
    );
    const names = new TopicNames({ host: '127.0.0.1', port }, createLogger('silent'), { brokerId: 1 });
    expect(names.partitions).toBeUndefined();
    // When it refreshes, then again after the shrink
    await names.refresh();
    expect(names.partitions).toEqual({ led: 1, underReplicated: 0 });
    isr = [1, 2];
    await names.refresh();
    // Then the counts follow, and the names are still read from the same answer
    expect(names.partitions).toEqual({ led: 1, underReplicated: 1 });
    expect(names.nameOf('1'.padStart(32, '0'))).toBe('wal-a');
  });
});
