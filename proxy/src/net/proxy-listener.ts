import net from 'node:net';
import type { Logger } from '../log.js';
import { ConnectionPipe } from './connection-pipe.js';
import { type ListenerCounters, newListenerCounters } from './counters.js';
import type { FrameFilter, FrameObserver } from './frame-filter.js';

export interface HostPort {
  host: string;
  port: number;
}

export interface ProxyListenerOptions {
  /** Names the listener in logs and counters: client, replication, egress-<id>. */
  name: string;
  listen: HostPort;
  upstream: HostPort;
  maxFrameBytes: number;
  maxBufferedBytes: number;
  filters: readonly FrameFilter[];
  observer?: FrameObserver;
  log: Logger;
  /** How long to wait for the upstream TCP connection. */
  connectTimeoutMs?: number;
}

/**
 * Accepts downstream connections and pairs each with a new upstream connection. Reading from the
 * downstream socket starts only once the upstream is connected, so nothing is buffered for a
 * broker that is not there; if the upstream cannot be reached the downstream is closed.
 */
export class ProxyListener {
  readonly counters: ListenerCounters = newListenerCounters();
  private readonly server: net.Server;
  private readonly pipes = new Set<ConnectionPipe>();
  private readonly log: Logger;

  constructor(readonly options: ProxyListenerOptions) {
    this.log = options.log.child({ listener: options.name });
    this.server = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => this.accept(socket));
  }

  async start(): Promise<void> {
    const { host, port } = this.options.listen;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host, port }, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.server.on('error', (error) => this.log.error({ error: error.message }, 'listener error'));
    this.log.info(
      { listen: `${host}:${port}`, upstream: `${this.options.upstream.host}:${this.options.upstream.port}` },
      'listening',
    );
  }

  get address(): HostPort {
    const address = this.server.address() as net.AddressInfo;
    return { host: address.address, port: address.port };
  }

  private accept(downstream: net.Socket): void {
    const counters = this.counters;
    counters.connectionsAccepted++;
    const peer = `${downstream.remoteAddress}:${downstream.remotePort}`;
    const log = this.log.child({ peer });
    const upstream = net.connect({ ...this.options.upstream, noDelay: true });
    upstream.setTimeout(this.options.connectTimeoutMs ?? 10_000);
    const onConnectFailure = (error: Error) => {
      counters.upstreamConnectFailures++;
      log.warn({ error: error.message }, 'upstream unreachable; closing downstream connection');
      upstream.destroy();
      downstream.destroy();
    };
    upstream.once('error', onConnectFailure);
    upstream.once('timeout', () => onConnectFailure(new Error('connect timeout')));
    downstream.once('error', () => upstream.destroy());
    upstream.once('connect', () => {
      upstream.off('error', onConnectFailure);
      upstream.setTimeout(0);
      const pipe = new ConnectionPipe(downstream, upstream, {
        maxFrameBytes: this.options.maxFrameBytes,
        maxBufferedBytes: this.options.maxBufferedBytes,
        filters: this.options.filters,
        ...(this.options.observer ? { observer: this.options.observer } : {}),
        counters,
        log,
      });
      this.pipes.add(pipe);
      counters.connectionsActive++;
      pipe.whenClosed(() => {
        this.pipes.delete(pipe);
        counters.connectionsActive--;
      });
      downstream.resume();
      log.debug('connection opened');
    });
  }

  /** Stops accepting new connections (established ones keep working). */
  stopAccepting(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /**
   * Graceful stop: no new connections, no new requests read, responses still due are delivered;
   * connections left after `timeoutMs` are closed. Resolves with the number force-closed.
   */
  async drain(timeoutMs: number): Promise<number> {
    const stopped = this.stopAccepting();
    const remaining = [...this.pipes];
    await Promise.race([
      Promise.all(
        remaining.map(
          (pipe) =>
            new Promise<void>((resolve) => {
              pipe.whenClosed(resolve);
              pipe.stopReading();
            }),
        ),
      ),
      new Promise((resolve) => setTimeout(resolve, timeoutMs).unref()),
    ]);
    let forced = 0;
    for (const pipe of this.pipes) {
      forced++;
      pipe.close('drain timeout', 'warn');
    }
    await stopped;
    return forced;
  }
}
