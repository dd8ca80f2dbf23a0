import { readFileSync } from 'node:fs';
import net from 'node:net';
import { describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { sidecarCounters } from '../src/cluster/cluster-info.js';

const TOPIC = 'e2e-malformed-input';

/** Sends `bytes` on a new connection to host:port and resolves when the sidecar closes it. */
function sendAndAwaitClose(address: string, bytes: Buffer): Promise<{ closedWithin: number }> {
  const [host, port] = address.split(':');
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: host!, port: Number(port) }, () => socket.write(bytes));
    socket.on('data', () => undefined);
    socket.once('close', () => resolve({ closedWithin: Date.now() - started }));
    socket.once('error', () => undefined);
    setTimeout(() => {
      socket.destroy();
      reject(new Error('the sidecar did not close the connection within 10 s'));
    }, 10_000).unref();
  });
}

describe('malformed input on a real sidecar', () => {
  it('closes only the offending connection, logs why, and keeps serving everyone else', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 1 });
    const ingress = cluster.bootstrap.split(',')[0]!;
    const kafka = kafkaClient(cluster.bootstrap);
    const producer = kafka.producer();
    await producer.connect();
    const before = await sidecarCounters(cluster, 1);

    // Given an established client that keeps producing
    await producer.send({ topic: TOPIC, messages: [{ value: 'before' }] });

    // When one connection declares a 2 GiB frame, one sends a garbage header, and one a Produce
    // v9 request whose body stops in the middle of its topic array
    const oversized = Buffer.from([0x7f, 0xff, 0xff, 0xff, 1, 2, 3]);
    const garbage = Buffer.alloc(64, 0xee);
    garbage.writeInt32BE(60, 0);
    const truncatedProduce = Buffer.from([
      ...[0, 0, 0, 13], // size
      ...[0, 0, 0, 9], // Produce v9
      ...[0, 0, 0, 7], // correlation id
      ...[0xff, 0xff], // null client id
      0, // header tag buffer
      0, // transactional id: compact null
      ...[0xff], // acks: half of an int16, then nothing
    ]);
    await sendAndAwaitClose(ingress, oversized);
    await sendAndAwaitClose(ingress, garbage);
    await sendAndAwaitClose(ingress, truncatedProduce);

    // Then the sidecar logged each reason, naming the peer and the size
    const log = readFileSync(cluster.sidecarLogs[1]!, 'utf8');
    expect(log).toMatch(
      /"frameSize":2147483647.*closing connection: malformed request \(frame of 2147483647 bytes exceeds the maximum/,
    );
    expect(log).toMatch(/"peer":"127\.0\.0\.1:\d+".*closing connection: malformed request/);
    const after = await sidecarCounters(cluster, 1);
    expect(
      after.listeners.client!.closedForProtocolError - before.listeners.client!.closedForProtocolError,
    ).toBe(3);

    // And the established client is unaffected
    await producer.send({ topic: TOPIC, messages: [{ value: 'after' }] });
    await producer.disconnect();
  });
});
