// Readiness for Kubernetes probes (/readyz): ready while the local broker accepts TCP connections
// and the sidecar is not stopping. The WAL store is reported, never required: a pod marked unready
// for its store would lose its clients and peers (the bootstrap Service and the headless DNS drop
// it), which is worse than stock Kafka, while a sidecar whose store is down serves everything inline.
// The store's state comes from StoreHealth (its background probe), so /readyz costs no store request.
import net from 'node:net';
import type { HostPort } from '../net/proxy-listener.js';
import type { StoreHealthStats } from '../store/store-health.js';

export interface CheckResult {
  ok: boolean;
  error?: string;
}

/** What /readyz says about the WAL store: its URL, StoreHealth's state and stats, the last failure. */
export interface StoreReport extends StoreHealthStats {
  url: string;
  usable: boolean;
  /** Why the last probe failed, while degraded. */
  lastError?: string;
}

export interface ReadinessReport {
  ready: boolean;
  upstream: CheckResult;
  /** True once SIGTERM began the drain: the pod should leave the Service endpoints. */
  stopping?: true;
  store?: StoreReport;
}

export interface ReadinessOptions {
  upstream: HostPort;
  /** The store's current state; absent without a WAL store. */
  store?: () => StoreReport;
  /** True while the sidecar drains on its way out. */
  stopping?: () => boolean;
  /** Default 1 s. */
  connectTimeoutMs?: number;
}

export class Readiness {
  readonly #options: ReadinessOptions;

  constructor(options: ReadinessOptions) {
    this.#options = options;
  }

  async check(): Promise<ReadinessReport> {
    const upstream = await this.#upstream();
    const stopping = this.#options.stopping?.() ?? false;
    const store = this.#options.store?.();
    return {
      ready: upstream.ok && !stopping,
      upstream,
      ...(stopping ? { stopping: true as const } : {}),
      ...(store ? { store } : {}),
    };
  }

  #upstream(): Promise<CheckResult> {
    const { host, port } = this.#options.upstream;
    const timeoutMs = this.#options.connectTimeoutMs ?? 1000;
    return new Promise((resolve) => {
      const socket = net.connect({ host, port });
      const done = (result: CheckResult) => {
        socket.destroy();
        resolve(result);
      };
      socket.setTimeout(timeoutMs, () => done({ ok: false, error: `connect to ${host}:${port} timed out` }));
      socket.once('connect', () => done({ ok: true }));
      socket.once('error', (error) =>
        done({ ok: false, error: `connect to ${host}:${port}: ${error.message}` }),
      );
    });
  }
}
