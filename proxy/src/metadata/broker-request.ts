import net from 'node:net';
import {
  decodeResponseHeader,
  encodeFrame,
  encodeRequestHeader,
  responseHeaderVersion,
} from '@walproxy/shared';
import { FRAME_SIZE_PREFIX_BYTES, FrameDecoder } from '../net/frame-decoder.js';
import type { HostPort } from '../net/proxy-listener.js';
import { type SaslCredentials, saslAuthenticate } from './sasl-client.js';

export interface BrokerRequestOptions {
  /** Idle time allowed between sending and the answer; default 5 s. */
  timeoutMs?: number;
  clientId?: string;
  /** Authenticate the connection first (the broker listener is SASL_PLAINTEXT). */
  sasl?: SaslCredentials;
}

/**
 * Sends one request to a broker on a fresh connection, authenticating it first when `sasl` is
 * given, and returns the response body (the frame after its header). For the sidecar's own
 * low-rate questions to its local broker (topic ids); not for data traffic.
 */
export async function brokerRequest(
  broker: HostPort,
  apiKey: number,
  apiVersion: number,
  body: Buffer,
  options: BrokerRequestOptions = {},
): Promise<Buffer> {
  const connection = new BrokerConnection(broker, options);
  try {
    await connection.connected;
    const exchange = (key: number, version: number, payload: Buffer) =>
      connection.request(key, version, payload);
    if (options.sasl) await saslAuthenticate(exchange, options.sasl);
    return await exchange(apiKey, apiVersion, body);
  } finally {
    connection.close();
  }
}

interface Waiting {
  correlationId: number;
  headerVersion: 0 | 1;
  resolve: (body: Buffer) => void;
  reject: (error: Error) => void;
}

/** One connection answering requests in order (Kafka answers in order on a connection). */
class BrokerConnection {
  readonly connected: Promise<void>;
  private readonly socket: net.Socket;
  private readonly decoder = new FrameDecoder(256 * 1024 * 1024);
  private readonly waiting: Waiting[] = [];
  private nextCorrelationId = 1;
  private failure?: Error;
  private readonly clientId: string;
  private readonly where: string;

  constructor(broker: HostPort, { timeoutMs = 5_000, clientId = 'walproxy' }: BrokerRequestOptions) {
    this.clientId = clientId;
    this.where = `${broker.host}:${broker.port}`;
    this.socket = net.connect(broker);
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    // Rejections of `connected` are the caller's; the listener below handles every later error.
    this.connected.catch(() => undefined);
    this.socket.setTimeout(timeoutMs, () =>
      this.fail(new Error(`no answer from ${this.where} in ${timeoutMs} ms`)),
    );
    this.socket.on('error', (error) => this.fail(error));
    this.socket.on('close', () =>
      this.fail(new Error(`${this.where} closed the connection without answering`)),
    );
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
  }

  request(apiKey: number, apiVersion: number, body: Buffer): Promise<Buffer> {
    if (this.failure) return Promise.reject(this.failure);
    const headerVersion = responseHeaderVersion(apiKey, apiVersion);
    if (headerVersion === undefined) return Promise.reject(new Error(`unknown API key ${apiKey}`));
    const correlationId = this.nextCorrelationId++;
    const header = encodeRequestHeader({ apiKey, apiVersion, correlationId, clientId: this.clientId });
    return new Promise((resolve, reject) => {
      this.waiting.push({ correlationId, headerVersion, resolve, reject });
      this.socket.write(encodeFrame(header, body));
    });
  }

  close(): void {
    this.failure ??= new Error('connection closed');
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    let frames: Buffer[];
    try {
      frames = this.decoder.push(chunk);
    } catch (error) {
      this.fail(error as Error);
      return;
    }
    for (const frame of frames) {
      const waiting = this.waiting.shift();
      if (!waiting) {
        this.fail(new Error(`${this.where} sent a response nobody asked for`));
        return;
      }
      try {
        const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
        const { correlationId, headerLength } = decodeResponseHeader(payload, waiting.headerVersion);
        if (correlationId !== waiting.correlationId) {
          throw new Error(`response correlation id ${correlationId}, expected ${waiting.correlationId}`);
        }
        waiting.resolve(payload.subarray(headerLength));
      } catch (error) {
        waiting.reject(error as Error);
        this.fail(error as Error);
        return;
      }
    }
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.socket.destroy();
    for (const waiting of this.waiting.splice(0)) waiting.reject(this.failure);
  }
}
