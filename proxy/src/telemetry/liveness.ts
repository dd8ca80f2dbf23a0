// Is the data path alive: how late the event loop runs (every byte of every connection waits on
// that one thread), and how long since a WAL upload or a store GET last succeeded. Both from what
// telemetry already sees (perf_hooks, the writer's and the reader's diagnostics-channel events),
// read at collection.
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import type { Meter } from '@opentelemetry/api';

/** The event-loop delay is reported over windows of this length (the last complete one). */
export const EVENT_LOOP_WINDOW_MS = 10_000;
/** Sampling resolution of the event-loop delay monitor. */
const EVENT_LOOP_RESOLUTION_MS = 10;

interface DelayWindow {
  p99Ms: number;
  maxMs: number;
}

export class DataPathLiveness {
  readonly #delay: IntervalHistogram = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });
  #lastWindow: DelayWindow | undefined;
  #rotation: NodeJS.Timeout | undefined;
  /** Date.now() of the start, and of the last stored upload and answered GET. */
  readonly #startedAt = Date.now();
  #uploadOkAt: number | undefined;
  #getOkAt: number | undefined;

  start(): void {
    if (this.#rotation) return;
    this.#delay.enable();
    this.#rotation = setInterval(() => {
      this.#lastWindow = this.#current();
      this.#delay.reset();
    }, EVENT_LOOP_WINDOW_MS);
    this.#rotation.unref();
  }

  stop(): void {
    clearInterval(this.#rotation);
    this.#rotation = undefined;
    this.#delay.disable();
  }

  uploadStored(): void {
    this.#uploadOkAt = Date.now();
  }

  getAnswered(): void {
    this.#getOkAt = Date.now();
  }

  /** The last complete window, or the one under way before the first completes. */
  delay(): DelayWindow {
    return this.#lastWindow ?? this.#current();
  }

  #current(): DelayWindow {
    // The histogram holds nanoseconds; with no sample yet, max is 0 and percentiles 0.
    return { p99Ms: this.#delay.percentile(99) / 1e6, maxMs: this.#delay.max / 1e6 };
  }

  /** Seconds since the last success, or since the start when there was none. */
  uploadAgeSeconds(): number {
    return (Date.now() - (this.#uploadOkAt ?? this.#startedAt)) / 1000;
  }

  getAgeSeconds(): number {
    return (Date.now() - (this.#getOkAt ?? this.#startedAt)) / 1000;
  }
}

/** The gauges; the staleness ones only on a sidecar with a WAL store. */
export function observeLiveness(meter: Meter, liveness: DataPathLiveness, wal: boolean): void {
  const gauge = (name: string, unit: string, description: string, read: () => number) =>
    meter.createObservableGauge(name, { unit, description }).addCallback((r) => r.observe(read()));
  gauge(
    'walproxy.event_loop.delay.p99',
    'ms',
    `99th percentile of how late the event loop ran its timers, over the last ${EVENT_LOOP_WINDOW_MS / 1000} s: every connection's bytes wait on this one thread`,
    () => liveness.delay().p99Ms,
  );
  gauge(
    'walproxy.event_loop.delay.max',
    'ms',
    `Longest event-loop delay over the last ${EVENT_LOOP_WINDOW_MS / 1000} s`,
    () => liveness.delay().maxMs,
  );
  if (!wal) return;
  gauge(
    'walproxy.wal.upload.success.age.seconds',
    's',
    'Seconds since a WAL object was last stored (since the start, before the first)',
    () => liveness.uploadAgeSeconds(),
  );
  gauge(
    'walproxy.wal.reader.success.age.seconds',
    's',
    'Follower side: seconds since a GET from the store last answered (since the start, before the first)',
    () => liveness.getAgeSeconds(),
  );
}
