// Readiness for Kubernetes probes (/readyz): the upstream broker accepts TCP connections and, with a
// WAL store, the store takes a write. The store check (a probe put and delete, ObjectStore.validate)
// costs requests, so its result is cached and re-checked at most every `storeRecheckMs`.
import net from 'node:net';
import type { HostPort } from '../net/proxy-listener.js';
import type { ObjectStore } from '../store/object-store.js';

export interface CheckResult {
  ok: boolean;
  error?: string;
}

export interface ReadinessReport {
  ready: boolean;
  upstream: CheckResult;
  store?: CheckResult & { checkedAtMs: number };
}

export interface ReadinessOptions {
  upstream: HostPort;
  store?: Pick<ObjectStore, 'validate'>;
  /** Default 10 s. */
  storeRecheckMs?: number;
  /** Default 1 s. */
  connectTimeoutMs?: number;
  /** Default 5 s. */
  storeTimeoutMs?: number;
  now?: () => number;
}

export class Readiness {
  readonly #options: ReadinessOptions;
  readonly #now: () => number;
  #store: (CheckResult & { checkedAtMs: number }) | undefined;
  #storeCheck: Promise<CheckResult & { checkedAtMs: number }> | undefined;

  constructor(options: ReadinessOptions) {
    this.#options = options;
    this.#now = options.now ?? (() => Date.now());
  }

  async check(): Promise<ReadinessReport> {
    const [upstream, store] = await Promise.all([this.#upstream(), this.#storeStatus()]);
    return {
      ready: upstream.ok && (store?.ok ?? true),
      upstream,
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

  async #storeStatus(): Promise<(CheckResult & { checkedAtMs: number }) | undefined> {
    const store = this.#options.store;
    if (!store) return undefined;
    const recheckMs = this.#options.storeRecheckMs ?? 10_000;
    if (this.#store && this.#now() - this.#store.checkedAtMs < recheckMs) return this.#store;
    // One check at a time; concurrent probes share it.
    this.#storeCheck ??= this.#checkStore(store).then((result) => {
      this.#store = result;
      this.#storeCheck = undefined;
      return result;
    });
    return this.#storeCheck;
  }

  async #checkStore(store: Pick<ObjectStore, 'validate'>): Promise<CheckResult & { checkedAtMs: number }> {
    const timeoutMs = this.#options.storeTimeoutMs ?? 5000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        store.validate(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      return { ok: true, checkedAtMs: this.#now() };
    } catch (error) {
      return {
        ok: false,
        error: `object store not writable: ${error instanceof Error ? error.message : String(error)}`,
        checkedAtMs: this.#now(),
      };
    } finally {
      clearTimeout(timer);
    }
  }
}
