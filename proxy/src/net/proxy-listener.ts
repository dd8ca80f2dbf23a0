import net from 'node:net';
import tls from 'node:tls';
import { apiKeyInfo } from '@walproxy/shared';
import type { Logger } from '../log.js';
import { BytePipe } from './byte-pipe.js';
import { ConnectionPipe } from './connection-pipe.js';
import type { BrokerFence } from './controller-tap.js';
import { type ListenerCounters, newListenerCounters } from './counters.js';
import { FilterChain } from './filter-chain.js';
import type { FrameFilter, FrameObserver } from './frame-filter.js';
import {
  type ClientAuth,
  clientCertificateRefusal,
  describeCertificate,
  type TlsMaterial,
} from './tls-material.js';

export interface HostPort {
  host: string;
  port: number;
}

export interface ProxyListenerOptions {
  /** Names the listener in logs and counters: client, replication, egress-<id>, controller-<id>. */
  name: string;
  listen: HostPort;
  upstream: HostPort;
  maxFrameBytes: number;
  maxBufferedBytes: number;
  /**
   * The listener's filters, listed from the downstream side to the upstream side: one chain for
   * all its connections (filter-chain.ts gives the order's rule).
   */
  filters: readonly FrameFilter[];
  observer?: FrameObserver;
  log: Logger;
  /** How long to wait for the upstream connection (TCP, and the TLS handshake with upstreamTls). */
  connectTimeoutMs?: number;
  /** TLS termination: downstream connections are TLS, decrypted here (client and replication ingress). */
  tls?: ListenerTls;
  /** TLS to the upstream: the egress dials a peer sidecar's replication ingress over mutual TLS. */
  upstreamTls?: UpstreamTls;
  /**
   * Bytes pass through unread (BytePipe): no frames, no filters, no frame size. The KRaft
   * controller path, which walproxy carries only so that the broker shares the sidecar's fate.
   */
  opaque?: boolean;
  /** With `opaque`: the broker's heartbeats on this controller path are read by it (a stop fences the broker). */
  fence?: BrokerFence;
}

export interface DrainOptions {
  /**
   * Connections whose every remaining response is held by a filter — the broker has answered —
   * are closed after this long instead of waiting for the filter (a durable ack waiting for a
   * frozen store). The client retries as it would after REQUEST_TIMED_OUT. Default: no limit
   * below `timeoutMs`.
   */
  heldGraceMs?: number;
}

type Pipe = ConnectionPipe | BytePipe;

export interface ListenerTls {
  material: TlsMaterial;
  clientAuth: ClientAuth;
  /** How long a client may take to finish the handshake; default 10 s. */
  handshakeTimeoutMs?: number;
}

export interface UpstreamTls {
  /** The client certificate (optional) and the CA that must have signed the upstream's certificate. */
  material: TlsMaterial;
  /** The name sent as SNI and checked against the upstream's certificate; default: the upstream host. */
  serverName?: string;
  /** false: the upstream's certificate is checked against the CA only, not against a name. */
  verifyHostname: boolean;
}

/** Handshake failures that are a client going away, not a refusal worth a warning (TCP probes do this). */
const QUIET_TLS_ERRORS = new Set(['ECONNRESET', 'EPIPE', 'ERR_TLS_HANDSHAKE_TIMEOUT']);

/**
 * Accepts downstream connections and pairs each with a new upstream connection. Reading from the
 * downstream socket starts only once the upstream is connected, so nothing is buffered for a
 * broker that is not there; if the upstream cannot be reached the downstream is closed.
 *
 * With `tls`, a connection is paired once its handshake is done ('secureConnection'); a
 * tls.TLSSocket is a net.Socket, so the pipe is the same. Certificates reloaded by the TlsMaterial
 * apply to new handshakes only (server.setSecureContext); established connections are untouched.
 */
export class ProxyListener {
  readonly counters: ListenerCounters = newListenerCounters();
  private readonly server: net.Server;
  private readonly pipes = new Set<Pipe>();
  private accepting = false;
  private draining = false;
  private readonly log: Logger;
  private readonly stopReloads?: () => void;
  private readonly chain: FilterChain;

  constructor(readonly options: ProxyListenerOptions) {
    this.log = options.log.child({ listener: options.name });
    this.chain = new FilterChain(options.filters);
    const serverTls = options.tls;
    if (serverTls) {
      const { material, clientAuth } = serverTls;
      const server = tls.createServer({
        ...secureContextOptions(material),
        // Verification is decided in 'secureConnection' (clientCertificateRefusal) so that a
        // refusal can be logged with the peer's address and the reason.
        requestCert: clientAuth !== 'none',
        rejectUnauthorized: false,
        handshakeTimeout: serverTls.handshakeTimeoutMs ?? 10_000,
        noDelay: true,
      });
      server.on('secureConnection', (socket: tls.TLSSocket) => {
        // Nothing is read until the upstream is connected, as with pauseOnConnect below.
        socket.pause();
        const refusal = clientCertificateRefusal(socket, clientAuth);
        if (refusal !== undefined) {
          this.tlsRefused(`${socket.remoteAddress}:${socket.remotePort}`, refusal);
          socket.destroy();
          return;
        }
        this.accept(socket);
      });
      server.on('tlsClientError', (error: NodeJS.ErrnoException, socket: tls.TLSSocket) => {
        const peer = `${socket.remoteAddress}:${socket.remotePort}`;
        if (QUIET_TLS_ERRORS.has(error.code ?? '')) {
          this.log.debug({ peer, error: error.message }, 'TLS handshake abandoned by the client');
          return;
        }
        this.tlsRefused(peer, opensslReason(error));
      });
      this.stopReloads = material.onReload((snapshot) =>
        server.setSecureContext(secureContextOptions(snapshot)),
      );
      this.server = server;
    } else {
      this.server = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) =>
        this.accept(socket),
      );
    }
  }

  private tlsRefused(peer: string, reason: string): void {
    this.counters.tlsHandshakeFailures++;
    this.log.warn({ peer, reason }, `TLS client refused: ${reason}`);
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
    this.accepting = true;
    const { tls: serverTls, upstreamTls } = this.options;
    this.log.info(
      {
        listen: `${host}:${port}`,
        upstream: `${this.options.upstream.host}:${this.options.upstream.port}`,
        ...(serverTls
          ? { tls: { clientAuth: serverTls.clientAuth, ...describeCertificate(serverTls.material.snapshot) } }
          : {}),
        ...(upstreamTls ? { upstreamTls: { verifyHostname: upstreamTls.verifyHostname } } : {}),
      },
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
    const upstream = this.connectUpstream();
    upstream.setTimeout(this.options.connectTimeoutMs ?? 10_000);
    let tcpConnected = false;
    upstream.once('connect', () => {
      tcpConnected = true;
    });
    const onConnectFailure = (error: Error) => {
      counters.upstreamConnectFailures++;
      if (tcpConnected && this.options.upstreamTls) {
        counters.upstreamTlsHandshakeFailures++;
        log.warn(
          { upstream: `${this.options.upstream.host}:${this.options.upstream.port}`, reason: error.message },
          `upstream TLS handshake failed: ${error.message}; closing downstream connection`,
        );
      } else {
        log.warn({ error: error.message }, 'upstream unreachable; closing downstream connection');
      }
      upstream.destroy();
      downstream.destroy();
    };
    upstream.once('error', onConnectFailure);
    upstream.once('timeout', () => onConnectFailure(new Error('connect timeout')));
    downstream.once('error', () => upstream.destroy());
    upstream.once(this.options.upstreamTls ? 'secureConnect' : 'connect', () => {
      upstream.off('error', onConnectFailure);
      upstream.setTimeout(0);
      const pipe: Pipe = this.options.opaque
        ? new BytePipe(downstream, upstream, {
            counters,
            log,
            ...(this.options.fence ? { fence: this.options.fence } : {}),
          })
        : new ConnectionPipe(downstream, upstream, {
            maxFrameBytes: this.options.maxFrameBytes,
            maxBufferedBytes: this.options.maxBufferedBytes,
            chain: this.chain,
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
      // Accepted just before a drain began: it has sent nothing yet, so it closes at once.
      if (this.draining) pipe.stopReading();
      else downstream.resume();
      log.debug('connection opened');
    });
  }

  private connectUpstream(): net.Socket {
    const { upstream, upstreamTls } = this.options;
    if (!upstreamTls) return net.connect({ ...upstream, noDelay: true });
    const name = upstreamTls.serverName ?? upstream.host;
    const socket = tls.connect({
      host: upstream.host,
      port: upstream.port,
      secureContext: upstreamTls.material.secureContext,
      // RFC 6066: SNI carries DNS names only; an IP address is still checked against IP SANs.
      ...(net.isIP(name) === 0 ? { servername: name } : {}),
      checkServerIdentity: upstreamTls.verifyHostname
        ? (_host, certificate) => tls.checkServerIdentity(name, certificate)
        : () => undefined,
    });
    return socket.setNoDelay(true);
  }

  /** Whether new connections are accepted (from start until stopAccepting or drain). */
  get isAccepting(): boolean {
    return this.accepting;
  }

  /** Connections open now. */
  get openConnections(): number {
    return this.pipes.size;
  }

  /** Requests whose responses are still due, by API name (empty for an opaque listener). */
  requestsInFlight(): Record<string, number> {
    const byApi: Record<string, number> = {};
    for (const pipe of this.pipes) {
      if (!(pipe instanceof ConnectionPipe)) continue;
      for (const key of pipe.inFlightApiKeys) {
        const name = apiKeyInfo(key)?.name ?? `key-${key}`;
        byApi[name] = (byApi[name] ?? 0) + 1;
      }
    }
    return byApi;
  }

  /** Stops accepting new connections (established ones keep working). */
  stopAccepting(): Promise<void> {
    this.accepting = false;
    this.stopReloads?.();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /**
   * Graceful stop: no new connections, no new requests read, responses still due are delivered;
   * connections left after `timeoutMs` are closed. Resolves with the number force-closed.
   */
  async drain(timeoutMs: number, { heldGraceMs }: DrainOptions = {}): Promise<number> {
    this.draining = true;
    const stopped = this.stopAccepting();
    const remaining = [...this.pipes];
    const timers: NodeJS.Timeout[] = [];
    let forced = 0;
    if (heldGraceMs !== undefined && heldGraceMs < timeoutMs) {
      timers.push(
        setTimeout(() => {
          for (const pipe of this.pipes) {
            if (!pipe.onlyFilterHeld) continue;
            forced++;
            pipe.close('drain: only responses held for the store are left', 'warn');
          }
        }, heldGraceMs),
      );
    }
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
      new Promise<void>((resolve) => timers.push(setTimeout(resolve, timeoutMs))),
    ]);
    for (const timer of timers) clearTimeout(timer);
    for (const pipe of this.pipes) {
      forced++;
      pipe.close('drain timeout', 'warn');
    }
    // Not awaited: the server's close callback waits for every peer to answer our FIN, which
    // a client may take seconds to do; the listening socket itself is closed already.
    void stopped;
    return forced;
  }
}

function secureContextOptions(material: TlsMaterial | TlsMaterial['snapshot']): tls.SecureContextOptions {
  const { cert, key, ca } = 'snapshot' in material ? material.snapshot : material;
  return { ...(cert ? { cert } : {}), ...(key ? { key } : {}), ...(ca ? { ca } : {}) };
}

/** OpenSSL's reason without its location prefix: `…:SSL routines:…:wrong version number:…` → `wrong version number`. */
function opensslReason(error: Error): string {
  const match = /SSL routines:[^:]*:([^:]+)/.exec(error.message);
  return match ? match[1]! : error.message.trim();
}
