// One raw Kafka connection for tests that send bytes no client would: it writes whole frames as
// given and reads response frames in order, and says when the peer closed the connection.
import net from 'node:net';
import {
  ApiKey,
  decodeFetchResponse,
  decodeMetadataResponse,
  decodeResponseHeader,
  encodeFetchRequest,
  encodeFrame,
  encodeMetadataRequest,
  encodeRequestHeader,
  responseHeaderVersion,
  topicNamesById,
} from '@walproxy/shared';

/** The next thing that happened on the connection. */
export type RawEvent = { kind: 'frame'; frame: Buffer } | { kind: 'closed' } | { kind: 'timeout' };

export class RawConnection {
  #buffered: Buffer = Buffer.alloc(0);
  readonly #frames: Buffer[] = [];
  #wake: (() => void) | undefined;
  #closed = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffered = this.#buffered.length === 0 ? chunk : Buffer.concat([this.#buffered, chunk]);
      while (this.#buffered.length >= 4) {
        const size = this.#buffered.readInt32BE(0);
        if (this.#buffered.length < 4 + size) break;
        this.#frames.push(this.#buffered.subarray(4, 4 + size));
        this.#buffered = this.#buffered.subarray(4 + size);
      }
      this.#wake?.();
    });
    socket.on('close', () => {
      this.#closed = true;
      this.#wake?.();
    });
    // A reset is a close too; the 'close' event follows.
    socket.on('error', () => undefined);
  }

  static open(address: string): Promise<RawConnection> {
    const [host, port] = address.split(':');
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: host!, port: Number(port) }, () => {
        socket.off('error', reject);
        resolve(new RawConnection(socket));
      });
      socket.once('error', reject);
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Writes bytes as they are (a whole frame, size prefix included, or anything else). */
  write(bytes: Buffer): void {
    if (!this.#closed) this.socket.write(bytes);
  }

  /** The next response frame (size prefix removed), or that the connection closed, or nothing in time. */
  async next(timeoutMs: number): Promise<RawEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = this.#frames.shift();
      if (frame !== undefined) return { kind: 'frame', frame };
      if (this.#closed) return { kind: 'closed' };
      const left = deadline - Date.now();
      if (left <= 0) return { kind: 'timeout' };
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  /** Sends one request (header + body) and resolves with the whole response payload (header included). */
  async request(
    apiKey: number,
    apiVersion: number,
    body: Buffer,
    correlationId: number,
    clientId = 'walproxy-e2e-raw',
    timeoutMs = 15_000,
  ): Promise<Buffer> {
    this.write(requestFrame(apiKey, apiVersion, body, correlationId, clientId));
    const event = await this.next(timeoutMs);
    if (event.kind === 'frame') return event.frame;
    throw new Error(
      `${event.kind === 'closed' ? 'the connection was closed' : 'no answer'} (correlation id ${correlationId})`,
    );
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A whole request frame: size prefix, header v1/v2 as the version needs, body. */
export function requestFrame(
  apiKey: number,
  apiVersion: number,
  body: Buffer,
  correlationId: number,
  clientId = 'walproxy-e2e-raw',
): Buffer {
  const header = encodeRequestHeader({ apiKey, apiVersion, correlationId, clientId });
  return encodeFrame(header, body);
}

/**
 * Waits (30 s at most) until broker `leader` leads every partition of `topics`, asking the broker
 * at `address` (its own listener); returns their topic ids by name. Its metadata naming it leader
 * is not enough: a KRaft broker publishes a new image to its metadata cache before its replica
 * manager makes the partitions leaders, and in between a Produce gets NOT_LEADER_OR_FOLLOWER. So
 * it also waits until a consumer's Fetch of every partition is answered without an error, which
 * the replica manager answers and which changes nothing.
 */
export async function leaderOf(
  address: string,
  topics: string[],
  leader: number,
): Promise<Map<string, string>> {
  const connection = await RawConnection.open(address);
  try {
    const deadline = Date.now() + 30_000;
    for (let correlationId = 1; ; correlationId++) {
      const response = await connection.request(
        ApiKey.Metadata,
        12,
        encodeMetadataRequest(
          { topics: topics.map((name) => ({ name })), allowAutoTopicCreation: false },
          12,
        ),
        correlationId,
      );
      const { headerLength } = decodeResponseHeader(response, responseHeaderVersion(ApiKey.Metadata, 12)!);
      const metadata = decodeMetadataResponse(response.subarray(headerLength), 12);
      const led = topics.every((name) =>
        metadata.topics.find((t) => t.name === name)?.partitions.every((p) => p.leaderId === leader),
      );
      if (led && (await servesEveryPartition(connection, metadata, topics, correlationId + 1_000_000))) {
        const byName = new Map([...topicNamesById(metadata)].map(([id, name]) => [name, id]));
        return new Map(topics.map((t) => [t, byName.get(t)!]));
      }
      if (Date.now() > deadline) throw new Error(`broker ${leader} does not lead ${topics.join(', ')}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    connection.close();
  }
}

/** Whether a consumer's Fetch (v12, by name, no wait) of every partition of `topics` is answered without an error. */
async function servesEveryPartition(
  connection: RawConnection,
  metadata: ReturnType<typeof decodeMetadataResponse>,
  topics: string[],
  correlationId: number,
): Promise<boolean> {
  const version = 12;
  const request = encodeFetchRequest(
    {
      replicaId: -1,
      maxWaitMs: 0,
      minBytes: 0,
      maxBytes: 1024,
      isolationLevel: 0,
      topics: topics.map((name) => ({
        topic: name,
        partitions: (metadata.topics.find((t) => t.name === name)?.partitions ?? []).map((p) => ({
          partition: p.partitionIndex,
          fetchOffset: 0n,
          partitionMaxBytes: 1024,
        })),
      })),
    },
    version,
  );
  const response = await connection.request(ApiKey.Fetch, version, request, correlationId);
  const { headerLength } = decodeResponseHeader(response, responseHeaderVersion(ApiKey.Fetch, version)!);
  const fetched = decodeFetchResponse(response.subarray(headerLength), version);
  return (
    (fetched.errorCode ?? 0) === 0 &&
    fetched.responses.every((t) => t.partitions.every((p) => p.errorCode === 0))
  );
}
