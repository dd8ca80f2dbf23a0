// The WAL writer's contract (wal-writer.ts): its defaults and accepted ranges, the options it
// takes per writer and per append, what an append gives back (a ticket, a location) and its
// counters; and the checks of those options.
import { WalFormatError } from '@walproxy/shared';
import type { ObjectStore } from '../store/index.js';
import type { StoreHealth } from '../store/store-health.js';
import { WAL_DEFAULTS } from './defaults.js';
import type { ProducerWaits } from './producer-waits.js';
import type { SealingPolicy } from './sealing-policy.js';

export const WAL_WRITER_DEFAULTS = {
  // A writer's objects are a default sidecar's (defaults.ts): the sidecar passes its policy and
  // --wal-target-bytes; a writer without a policy lingers the default budget's linger.
  targetBytes: WAL_DEFAULTS.objectBytes,
  lingerMs: WAL_DEFAULTS.lingerMs,
  maxUploadsInFlight: 4,
  uploadDeadlineMs: 5_000,
  retryBaseMs: 20,
  retryMaxMs: 1_000,
  maxPendingBytes: 64 * 1024 * 1024,
  keyPrefix: 'wal/',
  degradeAfterMs: 1_000,
  failedAttemptsBeforeDegraded: 3,
  confirmTimeoutMs: 5_000,
} as const;

/** Accepted per-writer and per-append values (inclusive), for the CLI's checks as well. */
export const WAL_WRITER_LIMITS = {
  // Below 1 KiB an object is mostly header and footer; above 64 MiB one PUT holds too much memory.
  targetBytes: { min: 1024, max: 64 * 1024 * 1024 },
  lingerMs: { min: 0, max: 60_000 },
} as const;

export interface WalWriterOptions {
  store: ObjectStore;
  /** The broker this sidecar fronts: written in every object header and key. */
  brokerId: number;
  /** Seal the open object when it reaches this many bytes (sealed size, footer included). */
  targetBytes?: number;
  /** Seal the open object at most this long after its first batch. */
  lingerMs?: number;
  /** Uploads running at once; sealed objects beyond it wait, in seal order. */
  maxUploadsInFlight?: number;
  /** Time from seal to a stored object, queueing and retries included; past it the tickets fail. */
  uploadDeadlineMs?: number;
  /** Full-jitter exponential backoff between attempts: base and cap of the delay. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /**
   * Bound on batch bytes appended and not yet stored or failed (a put abandoned at the deadline
   * keeps its bytes until it ends); an append that would pass it is refused with OVERLOADED.
   */
  maxPendingBytes?: number;
  /** `''` or ending in `/`; keys are `<prefix><yyyy>/<mm>/<dd>/<hh>/<brokerId>/<id>.wal`. */
  keyPrefix?: string;
  /** Wall clock, milliseconds since the epoch: object creation times, keys, deadlines. */
  now?: () => number;
  /**
   * Told what the uploads show about the store: healthy when an object is stored within
   * `degradeAfterMs`, degraded when an object fails for good, when a store call has been
   * outstanding longer than `degradeAfterMs` (a frozen store never fails, it hangs), or after
   * `failedAttemptsBeforeDegraded` failed attempts in a row (503 SlowDown storms, refused
   * connections). While degraded the leader side stops copying and holding (StoreHealth).
   */
  health?: StoreHealth;
  degradeAfterMs?: number;
  failedAttemptsBeforeDegraded?: number;
  /** A tentative batch neither confirmed nor rejected within this is dropped (UNCONFIRMED). */
  confirmTimeoutMs?: number;
  /**
   * When objects seal, and whether they are uploaded at all (docs/cost.md): each latency budget
   * gets its own open object, lingering as long as the budget allows; at its deadline an object
   * below break-even is abandoned unless a batch in it requires the store. Without it objects
   * seal by `lingerMs` and size, and every one is uploaded.
   */
  policy?: SealingPolicy;
  /**
   * Who may still add to an open object (producer-waits.ts): when no producer can before the
   * linger ends (each waits for the object with its batches in), the object seals at once, or
   * with a policy is decided at once (sealed, or abandoned below break-even). Without it objects
   * always linger their full time.
   */
  producerWaits?: Pick<ProducerWaits, 'mayStillAdd'>;
}

/** Per-append settings: a topic's own budget, linger and target size. */
export interface WalAppendOptions {
  /**
   * The topic's latency budget: batches of different budgets never share an object. With a
   * policy it sets how long the object may wait (default WAL_DEFAULTS.latencyBudgetMs).
   */
  budgetMs?: number | undefined;
  /** The batch's linger; with a policy, a cap on the budget's (a topic's deprecated `linger.ms`). */
  lingerMs?: number | undefined;
  targetBytes?: number | undefined;
  /** The object holding this batch is uploaded whatever it costs (durable ack, `mode=wal`). */
  requiresStore?: boolean | undefined;
  /**
   * The batch goes into an object only once `confirm()` says the broker appended it; `reject()`
   * (the broker refused it) or `confirmTimeoutMs` without either drops it. Without it the batch
   * is confirmed at once.
   */
  tentative?: boolean | undefined;
}

/** Where a stored batch is: `length` bytes at `position` of object `objectKey`. */
export interface WalLocation {
  /**
   * The store holding the object when it is not this sidecar's own (--wal-store-url): a
   * zone-local produce's batch stays in the producer's zone bucket (docs/zone-local.md).
   */
  store?: string;
  objectKey: string;
  position: number;
  length: number;
  objectSize: number;
  /** The writer's clock when the store confirmed the object. */
  uploadedAtMs: number;
}

export interface WalAppendTicket {
  /**
   * Resolves once the object holding the batch is stored; rejects with a WalWriteError
   * (UPLOAD_FAILED, OVERLOADED or CLOSED) and never resolves for a batch that is not stored. The
   * writer attaches a no-op handler itself, so a ticket nobody awaits (no durable ack) never
   * raises an unhandled rejection.
   */
  readonly durable: Promise<WalLocation>;
  /** The broker appended the batch: it may be stored now. No-op once confirmed or settled. */
  confirm(): void;
  /** The broker refused the batch: it is dropped and `durable` rejects (NOT_APPENDED). */
  reject(): void;
  /** The open-object group the batch goes into (its latency budget; -1 without one). */
  readonly group: number;
  /** Tentative, and neither confirmed nor refused nor dropped yet. */
  isPending(): boolean;
}

export interface WalWriterStats {
  objectsUploaded: number;
  bytesUploaded: number;
  batchesUploaded: number;
  /** Store calls for objects, first attempts included. */
  uploadAttempts: number;
  uploadRetries: number;
  /** Objects whose tickets were rejected with UPLOAD_FAILED. */
  uploadFailures: number;
  sealedBySize: number;
  sealedByLinger: number;
  sealedByFlush: number;
  /** Sealed before their linger ended: every producer that could add to them waited for them. */
  sealedProducersWaiting: number;
  refusedOverloaded: number;
  /** Tentative batches the broker refused (never stored). */
  batchesRejected: number;
  /** Tentative batches neither confirmed nor refused within confirmTimeoutMs (never stored). */
  batchesUnconfirmed: number;
  /** Objects the sealing policy did not upload (below break-even at their deadline), their batches and bytes. */
  objectsAbandoned: number;
  batchesAbandoned: number;
  bytesAbandoned: number;
  /** Gauge: tentative batches waiting for their confirmation. */
  tentativeBatches: number;
  /** Gauge: batch bytes appended and not yet stored or failed, abandoned puts' included. */
  pendingBytes: number;
  /** Gauge: store calls running, abandoned ones (deadline passed) included. */
  uploadsInFlight: number;
  /** Gauge: sealed objects waiting for an upload slot. */
  queuedObjects: number;
}

/** Where a batch goes and how long it may wait: from its append options. */
export interface Placement {
  /** The open object's group: the budget, or -1 without one. */
  group: number;
  lingerMs: number;
  targetBytes: number;
  requiresStore: boolean;
}

/** The counters the writer and its uploader add to; the gauges are read when asked. */
export type Counters = Omit<
  WalWriterStats,
  'pendingBytes' | 'uploadsInFlight' | 'queuedObjects' | 'tentativeBatches'
>;

export function checkInteger(
  value: number,
  name: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in ${min}..${max}, got ${value}`);
  }
  return value;
}

export function checkTargetBytes(value: number): number {
  const { min, max } = WAL_WRITER_LIMITS.targetBytes;
  return checkInteger(value, 'targetBytes', min, max);
}

export function checkLingerMs(value: number): number {
  const { min, max } = WAL_WRITER_LIMITS.lingerMs;
  return checkInteger(value, 'lingerMs', min, max);
}

/** What append() checks at once for a tentative batch; the object checks the rest at confirm. */
export function checkTentativeBatch(batch: Buffer): void {
  if (batch.length < 61 || batch.readInt8(16) !== 2 || batch.readInt32BE(8) + 12 !== batch.length) {
    throw new WalFormatError('INVALID_BATCH', 'not exactly one magic v2 record batch');
  }
}
