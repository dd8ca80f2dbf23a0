// Whether the WAL store can be used right now (docs/operations.md, "The WAL store": never less available
// than stock). The leader side copies produced batches into the WAL and holds follower fetches for
// uploads only while the store is `healthy`; while it is `degraded` every batch replicates inline,
// as stock Kafka would, and a background probe finds out when the store is back. The sidecar
// starts `degraded` (nothing proven yet) and turns healthy after its first successful probe, so a
// store that is down at startup never keeps a listener from opening.
import { channel } from 'node:diagnostics_channel';
import type { Logger } from '../log.js';

export type StoreHealthState = 'healthy' | 'degraded';

/** What StoreHealth publishes on node:diagnostics_channel; telemetry subscribes and maps it. */
export const STORE_HEALTH_CHANNELS = {
  /** The state changed: StoreHealthChangeEvent. */
  change: 'walproxy:store:health',
} as const;

export interface StoreHealthChangeEvent {
  store: string;
  state: StoreHealthState;
  /** Why it is degraded (the failure that made it so), or what made it healthy again. */
  reason: string;
  /** How long the previous state lasted. */
  previousStateMs: number;
}

export interface StoreHealthStats {
  state: StoreHealthState;
  /** Times the state went from healthy to degraded (the start, degraded, is not counted). */
  degradations: number;
  probes: number;
  probeFailures: number;
  /** Milliseconds spent degraded, the current stretch included. */
  degradedMsTotal: number;
}

export interface StoreHealthOptions {
  /** The store's URL, for logs and events. */
  store: string;
  /**
   * One cheap request proving the store takes writes (e.g. ObjectStore.validate: a small put and a
   * delete). StoreHealth bounds it by `probeTimeoutMs`; the call itself may run on.
   */
  probe: () => Promise<void>;
  /** While degraded, the next probe starts this long after the last one ended. Default 1,000. */
  probeIntervalMs?: number;
  /** A probe that has not answered by then counts as failed. Default 2,000. */
  probeTimeoutMs?: number;
  log: Logger;
  /** Monotonic milliseconds; injectable for tests. */
  now?: () => number;
}

export const STORE_HEALTH_DEFAULTS = { probeIntervalMs: 1_000, probeTimeoutMs: 2_000 } as const;

const channels = { change: channel(STORE_HEALTH_CHANNELS.change) };

export class StoreHealth {
  readonly #options: Required<Omit<StoreHealthOptions, 'log'>> & { log: Logger };
  #state: StoreHealthState = 'degraded';
  #since: number;
  #degradedMsBefore = 0;
  #started = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #probing = false;
  readonly #listeners: Array<(state: StoreHealthState) => void> = [];
  readonly #counters = { degradations: 0, probes: 0, probeFailures: 0 };

  constructor(options: StoreHealthOptions) {
    this.#options = {
      probeIntervalMs: STORE_HEALTH_DEFAULTS.probeIntervalMs,
      probeTimeoutMs: STORE_HEALTH_DEFAULTS.probeTimeoutMs,
      now: () => performance.now(),
      ...options,
    };
    this.#since = this.#options.now();
  }

  get state(): StoreHealthState {
    return this.#state;
  }

  /** Whether new batches may go to the WAL and follower fetches may wait for uploads. */
  get usable(): boolean {
    return this.#state === 'healthy';
  }

  get stats(): StoreHealthStats {
    const now = this.#options.now();
    return {
      state: this.#state,
      ...this.#counters,
      degradedMsTotal: this.#degradedMsBefore + (this.#state === 'degraded' ? now - this.#since : 0),
    };
  }

  /** Called on every state change, after the change. */
  onChange(listener: (state: StoreHealthState) => void): void {
    this.#listeners.push(listener);
  }

  /** Probes at once in the background, and again every interval while degraded. Never throws. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#schedule(0);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** A store call succeeded (an upload, a probe): the store is usable. */
  markHealthy(reason = 'a store call succeeded'): void {
    this.#set('healthy', reason);
  }

  /**
   * A store call failed for good, or has taken too long: stop using the store until a probe
   * succeeds. Idempotent while degraded.
   */
  markDegraded(reason: string): void {
    if (this.#state === 'healthy') this.#counters.degradations++;
    this.#set('degraded', reason);
    if (this.#started) this.#schedule(this.#options.probeIntervalMs);
  }

  #set(state: StoreHealthState, reason: string): void {
    if (state === this.#state) return;
    const now = this.#options.now();
    const previousStateMs = now - this.#since;
    if (this.#state === 'degraded') this.#degradedMsBefore += previousStateMs;
    this.#state = state;
    this.#since = now;
    const { log, store } = this.#options;
    if (state === 'degraded') {
      log.warn(
        { store, reason },
        'object store degraded: WAL topics replicate inline until it answers again',
      );
    } else {
      log.info(
        { store, reason, degradedMs: Math.round(previousStateMs) },
        'object store healthy: WAL resumes',
      );
    }
    if (channels.change.hasSubscribers) {
      channels.change.publish({ store, state, reason, previousStateMs } satisfies StoreHealthChangeEvent);
    }
    for (const listener of this.#listeners) listener(state);
  }

  #schedule(delayMs: number): void {
    if (this.#stopped || this.#probing || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#probeOnce();
    }, delayMs);
    this.#timer.unref();
  }

  async #probeOnce(): Promise<void> {
    if (this.#stopped || this.#state === 'healthy') return;
    this.#probing = true;
    this.#counters.probes++;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.#options.probe(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${this.#options.probeTimeoutMs} ms`)),
            this.#options.probeTimeoutMs,
          );
        }),
      ]);
      this.markHealthy('probe succeeded');
    } catch (error) {
      this.#counters.probeFailures++;
      this.#options.log.debug({ store: this.#options.store, error: String(error) }, 'store probe failed');
    } finally {
      clearTimeout(timer);
      this.#probing = false;
    }
    if (this.#state === 'degraded') this.#schedule(this.#options.probeIntervalMs);
  }
}
