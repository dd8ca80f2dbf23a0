import { readFileSync } from 'node:fs';
import net from 'node:net';
import { describe, expect, inject, it } from 'vitest';
import { createTopic, kafkaClient } from '../src/clients/kafkajs.js';
import { counterDelta, counterSnapshot } from '../src/cluster/cluster-info.js';

const TOPIC = 'e2e-malformed-input';
/** How long a connection must stay open after its input to count as kept open. */
const QUIET_MS = 3_000;

/** What a listener did with one connection's input: whether it closed it, and what it answered. */
interface Outcome {
  closed: boolean;
  /** The first response frame's correlation id and the int16 after it (an error code). */
  answer: { correlationId: number; errorCode: number } | null;
}

/**
 * Sends `bytes` on a new connection to host:port and waits for the listener to close it, or
 * QUIET_MS of silence after the last byte it sent back.
 */
function exchange(address: string, bytes: Buffer): Promise<Outcome> {
  const [host, port] = address.split(':');
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    let closed = false;
    let quiet: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(quiet);
      socket.destroy();
      const answer =
        received.length >= 10
          ? { correlationId: received.readInt32BE(4), errorCode: received.readInt16BE(8) }
          : null;
      resolve({ closed, answer });
    };
    const waitQuietly = () => {
      clearTimeout(quiet);
      quiet = setTimeout(finish, QUIET_MS);
    };
    const socket = net.connect({ host: host!, port: Number(port) }, () => {
      socket.write(bytes);
      waitQuietly();
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      waitQuietly();
    });
    socket.once('close', () => {
      closed = true;
      finish();
    });
    socket.once('error', () => undefined);
  });
}

/** A request frame: size, then a header v1 (api key, version, correlation id, client id) or v2 (plus an empty tag buffer). */
function request(
  apiKey: number,
  apiVersion: number,
  correlationId: number,
  flexible: boolean,
  body: number[],
) {
  const clientId = Buffer.from('malformed');
  const header = Buffer.alloc(10 + clientId.length + (flexible ? 1 : 0));
  header.writeInt16BE(apiKey, 0);
  header.writeInt16BE(apiVersion, 2);
  header.writeInt32BE(correlationId, 4);
  header.writeInt16BE(clientId.length, 8);
  clientId.copy(header, 10);
  const size = Buffer.alloc(4);
  size.writeInt32BE(header.length + body.length, 0);
  return Buffer.concat([size, header, Buffer.from(body)]);
}

const garbage = Buffer.alloc(64, 0xee);
garbage.writeInt32BE(60, 0);

/** Every bad input, and whether the sidecar can see it is malformed by itself (then it closes and counts it). */
const BAD_INPUTS: Array<{ what: string; bytes: Buffer; judgedBySidecar: boolean }> = [
  {
    what: 'a frame declaring 2 GiB',
    bytes: Buffer.from([0x7f, 0xff, 0xff, 0xff, 1, 2, 3]),
    judgedBySidecar: true,
  },
  {
    what: 'a negative frame size',
    bytes: Buffer.from([0xff, 0xff, 0xff, 0xfe, 1, 2, 3]),
    judgedBySidecar: true,
  },
  { what: 'a garbage header (negative API key)', bytes: garbage, judgedBySidecar: true },
  {
    what: 'a Produce v9 whose body stops in the middle of its topic array',
    bytes: Buffer.from([
      ...[0, 0, 0, 13], // size
      ...[0, 0, 0, 9], // Produce v9
      ...[0, 0, 0, 7], // correlation id
      ...[0xff, 0xff], // null client id
      0, // header tag buffer
      0, // transactional id: compact null
      ...[0xff], // acks: half of an int16, then nothing
    ]),
    judgedBySidecar: true,
  },
  { what: 'an API key no Kafka has', bytes: request(0x7eee, 0, 11, false, []), judgedBySidecar: false },
  {
    what: 'a Produce version no Kafka has',
    bytes: request(0, 99, 12, true, [0, 0xff, 0xff, 0, 0, 0x27, 0x10, 1, 0]),
    judgedBySidecar: false,
  },
  // Answered, not closed: KIP-511, the client learns which ApiVersions versions the broker speaks
  {
    what: 'an ApiVersions version no Kafka has',
    bytes: request(18, 127, 13, true, [0]),
    judgedBySidecar: false,
  },
];

describe('malformed input on a real sidecar', () => {
  it('answers or closes each bad input as the stock broker does, logs why, and keeps serving everyone else', async () => {
    const cluster = inject('cluster');
    await createTopic(cluster.bootstrap, TOPIC, { partitions: 1 });
    const ingress = cluster.bootstrap.split(',')[0]!;
    const direct = cluster.directBootstrap.split(',')[0]!;
    const kafka = kafkaClient(cluster.bootstrap);
    const producer = kafka.producer();
    await producer.connect();
    const before = await counterSnapshot(cluster, [1]);

    // Given an established client that keeps producing, and an idle connection to the same sidecar
    await producer.send({ topic: TOPIC, messages: [{ value: 'before' }] });
    const idle = net.connect({ host: ingress.split(':')[0]!, port: Number(ingress.split(':')[1]) });
    await new Promise((resolve) => idle.once('connect', resolve));

    // When each bad input goes on a connection of its own, to the broker's DIRECT listener (stock
    // Kafka, no sidecar) and to the sidecar in front of the same broker
    const outcomes: Array<{ what: string; stock: Outcome; sidecar: Outcome }> = [];
    for (const { what, bytes } of BAD_INPUTS) {
      outcomes.push({ what, stock: await exchange(direct, bytes), sidecar: await exchange(ingress, bytes) });
    }
    for (const o of outcomes)
      console.log(
        `[malformed-input] ${o.what}: stock ${JSON.stringify(o.stock)}, sidecar ${JSON.stringify(o.sidecar)}`,
      );

    // Then the sidecar closed what stock closes and answered what stock answers, with the same error
    for (const o of outcomes) expect(o.sidecar, o.what).toEqual(o.stock);
    expect(outcomes.filter((o) => o.stock.closed).length).toBeGreaterThanOrEqual(BAD_INPUTS.length - 1);

    // And the sidecar logged each reason it judged itself, naming the peer and the size, and
    // counted each as a protocol error
    const log = readFileSync(cluster.sidecarLogs[1]!, 'utf8');
    expect(log).toMatch(
      /"frameSize":2147483647.*closing connection: malformed request \(frame of 2147483647 bytes exceeds the maximum/,
    );
    expect(log).toMatch(/"peer":"127\.0\.0\.1:\d+".*closing connection: malformed request/);
    const after = await counterSnapshot(cluster, [1]);
    expect(
      counterDelta(before, after, (c) => c.listeners.client?.closedForProtocolError),
    ).toBeGreaterThanOrEqual(BAD_INPUTS.filter((b) => b.judgedBySidecar).length);

    // And the established client and the idle connection are unaffected
    await producer.send({ topic: TOPIC, messages: [{ value: 'after' }] });
    await producer.disconnect();
    const answered = new Promise<Buffer>((resolve) => idle.once('data', resolve));
    idle.write(request(18, 0, 99, false, []));
    const reply = await answered;
    idle.destroy();
    expect(reply.readInt32BE(4)).toBe(99);
    expect(reply.readInt16BE(8)).toBe(0);
  });
});
