// The leader side's WAL builder (ARCHITECTURE.md, Produce steps 2–3; docs/wal-writer.md): packs
// produced batches of many partitions into WAL objects, seals them by size, linger or flush, and
// uploads them with bounded concurrency, retries and a deadline. Each append gets a ticket whose
// `durable` promise says when (and where) the batch is in the object store: the Produce path holds
// durable-ack responses on it. With a sealing policy (docs/cost.md) there is one open object per
// latency budget, sealed when the policy says, and an object that would cost more than it saves is
// not uploaded: its tickets reject (BELOW_BREAK_EVEN) and its batches replicate inline.
import { channel } from 'node:diagnostics_channel';
import {
  WAL_INDEX_ENTRY_SIZE,
  type WalAppendEntry,
  WalFormatError,
  WalObjectBuilder,
} from '@walproxy/shared';
import { isObjectStoreError, type ObjectStore, ObjectStoreError } from '../store/index.js';
import type { StoreHealth } from '../store/store-health.js';
import { fullJitterBackoffMs } from './backoff.js';
import {
  WAL_WRITER_CHANNELS,
  type WalAppendRefusedEvent,
  type WalSealEvent,
  type WalSealReason,
  type WalUploadAttemptEvent,
  type WalUploadEndEvent,
  type WalUploadStartEvent,
} from './channels.js';
import { WalWriteError, type WalWriteErrorKind } from './errors.js';
import { assertValidKeyPrefix, newWalObjectKey } from './object-key.js';
import type { ProducerWaits } from './producer-waits.js';
import { SEALING_DEFAULTS, type SealingPolicy } from './sealing-policy.js';

export const WAL_WRITER_DEFAULTS = {
  targetBytes: 400_000,
  lingerMs: 10,
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
   * policy it sets how long the object may wait (default SEALING_DEFAULTS.latencyBudgetMs).
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

type Counters = Omit<
  WalWriterStats,
  'pendingBytes' | 'uploadsInFlight' | 'queuedObjects' | 'tentativeBatches'
>;

/** Where a batch goes and how long it may wait: from its append options. */
interface Placement {
  /** The open object's group: the budget, or -1 without one. */
  group: number;
  lingerMs: number;
  targetBytes: number;
  requiresStore: boolean;
}

/** A batch appended tentatively, not in any object until confirmed. */
interface TentativeAppend {
  entry: WalAppendEntry;
  placement: Placement;
  appendedAtMs: number;
  location: Deferred<WalLocation>;
  expiry: NodeJS.Timeout;
}

/** What a stored object tells each of its tickets. */
interface StoredObject {
  objectKey: string;
  objectSize: number;
  uploadedAtMs: number;
}

interface OpenObject {
  group: number;
  key: string;
  builder: WalObjectBuilder;
  stored: Deferred<StoredObject>;
  batchBytes: number;
  /** The object's first append, which opened it. */
  firstAppendAtMs: number;
  /** Earliest append time + linger among its batches. */
  sealAtMs: number;
  /** Smallest target among its batches. */
  targetBytes: number;
  /** A batch in it needs the stored copy whatever it costs. */
  requiresStore: boolean;
  /** Shortest linger among its batches: how recently an idle producer counts as coming back. */
  lingerMs: number;
  /** A check whether any producer may still add to it runs at the next turn. */
  waitCheckScheduled: boolean;
  timer: NodeJS.Timeout | undefined;
}

/** The group of appends without a budget. */
const NO_BUDGET = -1;

interface SealedObject {
  key: string;
  body: Buffer[];
  size: number;
  batchCount: number;
  batchBytes: number;
  stored: Deferred<StoredObject>;
  sealedAtMs: number;
  deadlineAtMs: number;
  /** Fires at deadlineAtMs, whether the object is queued or uploading. */
  expiry: Timeout;
  /** Resolved when its tickets are settled. */
  settled: Deferred<void>;
  /** Resolved when no store call for it runs any more and its bytes left pendingBytes. */
  released: Deferred<void>;
}

const EXPIRED = Symbol('expired');
const noop = () => {};

const channels = {
  seal: channel(WAL_WRITER_CHANNELS.seal),
  uploadStart: channel(WAL_WRITER_CHANNELS.uploadStart),
  uploadAttempt: channel(WAL_WRITER_CHANNELS.uploadAttempt),
  uploadEnd: channel(WAL_WRITER_CHANNELS.uploadEnd),
  appendRefused: channel(WAL_WRITER_CHANNELS.appendRefused),
};

export class WalWriter {
  readonly #store: ObjectStore;
  readonly #brokerId: number;
  readonly #targetBytes: number;
  readonly #lingerMs: number;
  readonly #maxUploadsInFlight: number;
  readonly #uploadDeadlineMs: number;
  readonly #retryBaseMs: number;
  readonly #retryMaxMs: number;
  readonly #maxPendingBytes: number;
  readonly #keyPrefix: string;
  readonly #now: () => number;
  readonly #health: StoreHealth | undefined;
  readonly #degradeAfterMs: number;
  readonly #failedAttemptsBeforeDegraded: number;
  readonly #policy: SealingPolicy | undefined;
  readonly #producerWaits: Pick<ProducerWaits, 'mayStillAdd'> | undefined;
  /** Failed store attempts since the last success, across objects. */
  #failedAttemptsInARow = 0;

  /** The open object of each group (latency budget). */
  readonly #open = new Map<number, OpenObject>();
  /** Sealed objects waiting for a slot, in seal order. */
  readonly #queue: SealedObject[] = [];
  /** Sealed objects not yet released, for flush() and close(). */
  readonly #unreleased = new Set<SealedObject>();
  #uploadsInFlight = 0;
  #pendingBytes = 0;
  #closed = false;
  readonly #counters: Counters = {
    objectsUploaded: 0,
    bytesUploaded: 0,
    batchesUploaded: 0,
    uploadAttempts: 0,
    uploadRetries: 0,
    uploadFailures: 0,
    sealedBySize: 0,
    sealedByLinger: 0,
    sealedByFlush: 0,
    sealedProducersWaiting: 0,
    refusedOverloaded: 0,
    batchesRejected: 0,
    batchesUnconfirmed: 0,
    objectsAbandoned: 0,
    batchesAbandoned: 0,
    bytesAbandoned: 0,
  };
  readonly #tentative = new Set<TentativeAppend>();
  readonly #confirmTimeoutMs: number;

  constructor(options: WalWriterOptions) {
    const d = WAL_WRITER_DEFAULTS;
    const { brokerId } = options;
    if (!Number.isInteger(brokerId) || brokerId < 0 || brokerId >= 2 ** 31) {
      throw new RangeError(`broker id ${brokerId} is not a Kafka broker id (a non-negative int32)`);
    }
    this.#store = options.store;
    this.#brokerId = brokerId;
    this.#targetBytes = checkTargetBytes(options.targetBytes ?? d.targetBytes);
    this.#lingerMs = checkLingerMs(options.lingerMs ?? d.lingerMs);
    this.#maxUploadsInFlight = checkInteger(
      options.maxUploadsInFlight ?? d.maxUploadsInFlight,
      'maxUploadsInFlight',
      1,
    );
    this.#uploadDeadlineMs = checkInteger(
      options.uploadDeadlineMs ?? d.uploadDeadlineMs,
      'uploadDeadlineMs',
      1,
    );
    // A zero base would retry a store that fails fast (connection refused) in a tight loop.
    this.#retryBaseMs = checkInteger(options.retryBaseMs ?? d.retryBaseMs, 'retryBaseMs', 1);
    this.#retryMaxMs = checkInteger(options.retryMaxMs ?? d.retryMaxMs, 'retryMaxMs', this.#retryBaseMs);
    // Below the target an object would never fill up before append() starts refusing.
    this.#maxPendingBytes = checkInteger(
      options.maxPendingBytes ?? d.maxPendingBytes,
      'maxPendingBytes',
      this.#targetBytes,
    );
    this.#keyPrefix = options.keyPrefix ?? d.keyPrefix;
    assertValidKeyPrefix(this.#keyPrefix);
    this.#now = options.now ?? (() => Date.now());
    this.#health = options.health;
    this.#policy = options.policy;
    this.#producerWaits = options.producerWaits;
    this.#confirmTimeoutMs = checkInteger(
      options.confirmTimeoutMs ?? d.confirmTimeoutMs,
      'confirmTimeoutMs',
      1,
    );
    this.#degradeAfterMs = checkInteger(options.degradeAfterMs ?? d.degradeAfterMs, 'degradeAfterMs', 1);
    this.#failedAttemptsBeforeDegraded = checkInteger(
      options.failedAttemptsBeforeDegraded ?? d.failedAttemptsBeforeDegraded,
      'failedAttemptsBeforeDegraded',
      1,
    );
  }

  get stats(): WalWriterStats {
    return {
      ...this.#counters,
      pendingBytes: this.#pendingBytes,
      uploadsInFlight: this.#uploadsInFlight,
      queuedObjects: this.#queue.length,
      tentativeBatches: this.#tentative.size,
    };
  }

  /**
   * Adds one batch to the open object, synchronously and without copying it: the caller must not
   * change `entry.batch` until the ticket settles. Throws (and appends nothing) when the batch is
   * not exactly one magic v2 record batch or the topic or partition cannot be written
   * (WalFormatError from @walproxy/shared), or when an option is out of range (RangeError).
   */
  append(entry: WalAppendEntry, options: WalAppendOptions = {}): WalAppendTicket {
    const batchBytes = entry.batch.length;
    if (this.#closed) return this.#refuse('CLOSED', batchBytes, 'the WAL writer is closed');
    if (this.#pendingBytes + batchBytes > this.#maxPendingBytes) {
      this.#counters.refusedOverloaded++;
      return this.#refuse(
        'OVERLOADED',
        batchBytes,
        `${this.#pendingBytes} bytes wait for the object store; a batch of ${batchBytes} would pass maxPendingBytes (${this.#maxPendingBytes})`,
      );
    }
    const placement = this.#placement(options);
    const now = Math.floor(this.#now());
    if (!options.tentative) {
      const durable = this.#place(entry, placement, now);
      durable.catch(noop);
      return { durable, confirm: noop, reject: noop, group: placement.group, isPending: () => false };
    }
    checkTentativeBatch(entry.batch);
    const location = deferred<WalLocation>();
    location.promise.catch(noop);
    const tentative: TentativeAppend = {
      entry,
      placement,
      appendedAtMs: now,
      location,
      expiry: setTimeout(() => {
        this.#counters.batchesUnconfirmed++;
        this.#drop(tentative, 'UNCONFIRMED', `not confirmed within ${this.#confirmTimeoutMs} ms`);
      }, this.#confirmTimeoutMs),
    };
    tentative.expiry.unref();
    this.#tentative.add(tentative);
    this.#pendingBytes += batchBytes;
    return {
      durable: location.promise,
      confirm: () => this.#confirm(tentative),
      reject: () => {
        if (!this.#tentative.has(tentative)) return;
        this.#counters.batchesRejected++;
        this.#drop(tentative, 'NOT_APPENDED', 'the broker refused it');
      },
      group: placement.group,
      isPending: () => this.#tentative.has(tentative),
    };
  }

  /** A tentative batch the broker appended goes into the open object, as if appended now but lingering from its append. */
  #confirm(tentative: TentativeAppend): void {
    if (!this.#tentative.delete(tentative)) return;
    clearTimeout(tentative.expiry);
    const { entry, placement, appendedAtMs, location } = tentative;
    this.#pendingBytes -= entry.batch.length;
    let durable: Promise<WalLocation>;
    try {
      durable = this.#place(entry, placement, appendedAtMs);
    } catch (err) {
      location.reject(err);
      return;
    }
    durable.then(location.resolve, location.reject);
  }

  #drop(tentative: TentativeAppend, kind: 'NOT_APPENDED' | 'UNCONFIRMED' | 'CLOSED', why: string): void {
    if (!this.#tentative.delete(tentative)) return;
    clearTimeout(tentative.expiry);
    this.#pendingBytes -= tentative.entry.batch.length;
    tentative.location.reject(new WalWriteError(kind, `batch dropped from the WAL: ${why}`));
  }

  /** Checks an append's options (RangeError) and resolves them against the writer's and the policy's. */
  #placement(options: WalAppendOptions): Placement {
    const own = options.lingerMs === undefined ? undefined : checkLingerMs(options.lingerMs);
    const targetBytes =
      options.targetBytes === undefined ? this.#targetBytes : checkTargetBytes(options.targetBytes);
    const requiresStore = options.requiresStore === true;
    const policy = this.#policy;
    const budgetMs = options.budgetMs ?? (policy ? SEALING_DEFAULTS.latencyBudgetMs : undefined);
    if (budgetMs !== undefined) checkInteger(budgetMs, 'budgetMs', 1);
    if (policy === undefined || budgetMs === undefined) {
      return { group: budgetMs ?? NO_BUDGET, lingerMs: own ?? this.#lingerMs, targetBytes, requiresStore };
    }
    // The budget's linger, which the topic's own may only shorten: the budget is a promise.
    const lingerMs = Math.min(own ?? Number.POSITIVE_INFINITY, policy.lingerMs(budgetMs));
    return { group: budgetMs, lingerMs, targetBytes, requiresStore };
  }

  /**
   * Adds a batch the broker appended (or that needs no confirmation) to its group's open object,
   * sealing by size first; `since` is when its linger started. Throws (and adds nothing) for a
   * batch or topic the object cannot hold.
   */
  #place(entry: WalAppendEntry, placement: Placement, since: number): Promise<WalLocation> {
    const { group, lingerMs, targetBytes, requiresStore } = placement;
    const batchBytes = entry.batch.length;
    const now = Math.floor(this.#now());
    let open = this.#open.get(group);
    // Seal first rather than let a batch push a non-empty object past its target: objects stay at
    // or under the target, and a batch bigger than the target gets an object of its own.
    if (
      open !== undefined &&
      open.builder.batchCount > 0 &&
      open.builder.size + batchBytes + WAL_INDEX_ENTRY_SIZE > Math.min(open.targetBytes, targetBytes)
    ) {
      this.#seal(open, 'size');
      open = undefined;
    }
    open ??= this.#openObject(group, now);
    let position: number;
    try {
      ({ position } = open.builder.append(entry));
    } catch (err) {
      // Nothing was appended; an object opened for this batch alone is dropped, never sealed empty.
      if (open.builder.batchCount === 0) this.#open.delete(group);
      throw err;
    }
    this.#pendingBytes += batchBytes;
    open.batchBytes += batchBytes;

    const durable = open.stored.promise.then(
      (o): WalLocation => ({
        objectKey: o.objectKey,
        position,
        length: batchBytes,
        objectSize: o.objectSize,
        uploadedAtMs: o.uploadedAtMs,
      }),
    );

    open.targetBytes = Math.min(open.targetBytes, targetBytes);
    open.requiresStore ||= requiresStore;
    open.lingerMs = Math.min(open.lingerMs, lingerMs);
    if (open.builder.size >= open.targetBytes) {
      this.#seal(open, 'size');
      return durable;
    }
    if (since + lingerMs < open.sealAtMs) {
      // Even when the deadline has passed (a batch confirmed late), the seal waits for the next
      // timer turn: the other batches confirmed by the same answer or fetch join this object.
      open.sealAtMs = since + lingerMs;
      this.#armLinger(open, now);
    }
    if (this.#maySealEarly(open) && !open.waitCheckScheduled) {
      // At the next turn, once every batch this answer or fetch confirms is in.
      open.waitCheckScheduled = true;
      setImmediate(() => this.#sealIfNobodyMayAdd(open));
    }
    return durable;
  }

  /** The policy learns what its groups' real objects are (objects it could have abandoned only). */
  #tellPolicy(open: OpenObject, uploaded: boolean, now: number): void {
    if (this.#policy === undefined || open.group === NO_BUDGET || open.requiresStore) return;
    this.#policy.objectDecided(open.group, open.batchBytes, uploaded, now);
  }

  /**
   * Whether the object may seal before its linger ends: with ProducerWaits, and not an object
   * the sealing policy may abandon (below). Checked per append, so that mode=auto batches
   * schedule no check that could only return.
   */
  #maySealEarly(open: OpenObject): boolean {
    if (this.#producerWaits === undefined) return false;
    return this.#policy === undefined || open.group === NO_BUDGET || open.requiresStore;
  }

  /**
   * Seals an object before its linger ends when no producer may still add to it: each waits for
   * this very object (producer-waits.ts), so lingering only delays them.
   *
   * Not an object the sealing policy may abandon (mode=auto batches only): there the budget's
   * linger is what makes objects pay. Nothing more joins this object, but a waiting producer's
   * next request grows while it waits (it carries everything produced meanwhile), and the next
   * object with it; sealing early would trade the budget the operator granted for more PUTs.
   */
  #sealIfNobodyMayAdd(open: OpenObject): void {
    open.waitCheckScheduled = false;
    if (this.#open.get(open.group) !== open) return;
    const now = Math.floor(this.#now());
    // Due already: the linger timer seals it, as any object.
    if (now >= open.sealAtMs) return;
    if (this.#producerWaits!.mayStillAdd(open.group, now, open.lingerMs)) return;
    this.#seal(open, 'producers_waiting');
  }

  /**
   * At its deadline, with a policy, what to do with a budget group's open object: seal it, or
   * abandon it when it would cost more than it saves (or wait again, should the timer be early).
   */
  #decide(open: OpenObject, now: number): void {
    const decision = this.#policy!.sealDecision(
      open.group,
      {
        bytes: open.batchBytes,
        openedAtMs: open.firstAppendAtMs,
        requiresStore: open.requiresStore,
        sealAtMs: open.sealAtMs,
      },
      now,
    );
    if (decision.action === 'wait') {
      open.sealAtMs = decision.sealAtMs;
      this.#armLinger(open, now);
    } else if (decision.action === 'seal') {
      this.#seal(open, decision.reason === 'size' ? 'size' : 'linger');
    } else {
      this.#abandon(open);
    }
  }

  /**
   * Uploads nothing for an object the policy found below break-even: its tickets reject
   * (BELOW_BREAK_EVEN), so the index forgets its batches and followers get them inline, as stock.
   */
  #abandon(open: OpenObject): void {
    this.#tellPolicy(open, false, this.#now());
    this.#open.delete(open.group);
    clearTimeout(open.timer);
    this.#counters.objectsAbandoned++;
    this.#counters.batchesAbandoned += open.builder.batchCount;
    this.#counters.bytesAbandoned += open.batchBytes;
    this.#pendingBytes -= open.batchBytes;
    open.stored.reject(
      new WalWriteError(
        'BELOW_BREAK_EVEN',
        `WAL object ${open.key} not uploaded: ${open.batchBytes} bytes of ${open.builder.batchCount} batches would cost more than replicating them inline`,
        { objectKey: open.key },
      ),
    );
  }

  /**
   * Seals every open object now, whatever its size, and resolves when every object sealed so far
   * has settled its tickets.
   */
  async flush(): Promise<void> {
    this.#sealAll();
    await Promise.all(Array.from(this.#unreleased, (o) => o.settled.promise));
  }

  #sealAll(): void {
    for (const open of [...this.#open.values()]) this.#seal(open, 'flush');
  }

  /**
   * Refuses appends from now on (CLOSED), seals the open object, and resolves when every upload has
   * settled and no store call of this writer runs any more, so the store can be closed next.
   */
  async close(): Promise<void> {
    this.#closed = true;
    for (const tentative of [...this.#tentative]) this.#drop(tentative, 'CLOSED', 'the WAL writer is closed');
    this.#sealAll();
    await Promise.all(Array.from(this.#unreleased, (o) => o.released.promise));
  }

  #openObject(group: number, now: number): OpenObject {
    const open: OpenObject = {
      group,
      key: newWalObjectKey(this.#keyPrefix, this.#brokerId, now),
      builder: new WalObjectBuilder({ writerBrokerId: this.#brokerId, createdAtMs: now }),
      // Settled once for the whole object; every ticket derives its location from it.
      stored: deferred<StoredObject>(),
      batchBytes: 0,
      firstAppendAtMs: now,
      sealAtMs: Number.POSITIVE_INFINITY,
      targetBytes: Number.POSITIVE_INFINITY,
      requiresStore: false,
      lingerMs: Number.POSITIVE_INFINITY,
      waitCheckScheduled: false,
      timer: undefined,
    };
    this.#open.set(group, open);
    return open;
  }

  #armLinger(open: OpenObject, now: number): void {
    clearTimeout(open.timer);
    open.timer = setTimeout(
      () => {
        if (this.#open.get(open.group) !== open) return;
        if (this.#policy !== undefined && open.group !== NO_BUDGET)
          this.#decide(open, Math.floor(this.#now()));
        else this.#seal(open, 'linger');
      },
      Math.max(0, open.sealAtMs - now),
    );
  }

  #seal(open: OpenObject, reason: WalSealReason): void {
    if (open.builder.batchCount === 0) return;
    this.#open.delete(open.group);
    clearTimeout(open.timer);
    const now = this.#now();
    const size = open.builder.size;
    const sealed: SealedObject = {
      key: open.key,
      body: open.builder.seal(),
      size,
      batchCount: open.builder.batchCount,
      batchBytes: open.batchBytes,
      stored: open.stored,
      sealedAtMs: now,
      deadlineAtMs: now + this.#uploadDeadlineMs,
      expiry: timeout(this.#uploadDeadlineMs),
      settled: deferred(),
      released: deferred(),
    };
    if (reason !== 'flush') this.#tellPolicy(open, true, now);
    if (reason === 'size') this.#counters.sealedBySize++;
    else if (reason === 'linger') this.#counters.sealedByLinger++;
    else if (reason === 'producers_waiting') this.#counters.sealedProducersWaiting++;
    else this.#counters.sealedByFlush++;
    if (channels.seal.hasSubscribers) {
      channels.seal.publish({
        objectKey: sealed.key,
        size,
        batchCount: sealed.batchCount,
        reason,
        ageMs: now - open.firstAppendAtMs,
      } satisfies WalSealEvent);
    }
    this.#unreleased.add(sealed);
    this.#queue.push(sealed);
    // The deadline bounds the wait for a slot too: when the store is slow or down, the queue
    // fails within the deadline instead of keeping producers waiting a deadline per object ahead.
    sealed.expiry.promise.then(() => this.#expireQueued(sealed));
    this.#pump();
  }

  #expireQueued(obj: SealedObject): void {
    const i = this.#queue.indexOf(obj);
    if (i < 0) return;
    this.#queue.splice(i, 1);
    this.#settle(obj, 0, this.#deadlineFailure(obj, 0, undefined));
    this.#release(obj, false);
  }

  #pump(): void {
    while (this.#uploadsInFlight < this.#maxUploadsInFlight) {
      const next = this.#queue.shift();
      if (next === undefined) return;
      this.#uploadsInFlight++;
      void this.#upload(next);
    }
  }

  /** Runs in its own slot; never rejects. */
  async #upload(obj: SealedObject): Promise<void> {
    const startedAt = this.#now();
    if (channels.uploadStart.hasSubscribers) {
      channels.uploadStart.publish({
        objectKey: obj.key,
        size: obj.size,
        batchCount: obj.batchCount,
        queuedMs: startedAt - obj.sealedAtMs,
      } satisfies WalUploadStartEvent);
    }
    let attempts = 0;
    let lastError: unknown;
    let failure: WalWriteError | undefined;
    // A store call the deadline cut short keeps running (puts cannot be cancelled): its slot and
    // its bytes stay taken until it ends, so concurrency and memory stay bounded.
    let abandoned: Promise<unknown> | undefined;
    try {
      for (;;) {
        if (this.#now() >= obj.deadlineAtMs) {
          failure = this.#deadlineFailure(obj, attempts, lastError);
          break;
        }
        attempts++;
        this.#counters.uploadAttempts++;
        if (attempts > 1) this.#counters.uploadRetries++;
        const attemptStart = this.#now();
        const call = this.#putOnce(obj);
        const stall = this.#watchForStall(obj);
        const outcome = await Promise.race([
          call.then(
            (alreadyStored) => ({ alreadyStored }),
            (error: unknown) => ({ error }),
          ),
          obj.expiry.promise,
        ]).finally(() => clearTimeout(stall));
        if (outcome === EXPIRED) {
          abandoned = call;
          failure = this.#deadlineFailure(obj, attempts, lastError);
          this.#publishAttempt(attemptStart, {
            objectKey: obj.key,
            attempt: attempts,
            error: failure,
            retriable: false,
            backoffMs: undefined,
            alreadyStored: false,
          });
          break;
        }
        if ('alreadyStored' in outcome) {
          this.#publishAttempt(attemptStart, {
            objectKey: obj.key,
            attempt: attempts,
            error: undefined,
            retriable: false,
            backoffMs: undefined,
            alreadyStored: outcome.alreadyStored,
          });
          break;
        }
        lastError = outcome.error;
        if (++this.#failedAttemptsInARow >= this.#failedAttemptsBeforeDegraded) {
          this.#health?.markDegraded(
            `${this.#failedAttemptsInARow} store attempts in a row failed; last: ${errorMessage(lastError)}`,
          );
        }
        const retriable = isObjectStoreError(lastError) && lastError.retriable;
        const backoffMs = retriable
          ? fullJitterBackoffMs(attempts, this.#retryBaseMs, this.#retryMaxMs)
          : undefined;
        this.#publishAttempt(attemptStart, {
          objectKey: obj.key,
          attempt: attempts,
          error: lastError,
          retriable,
          backoffMs,
          alreadyStored: false,
        });
        if (backoffMs === undefined) {
          failure = new WalWriteError(
            'UPLOAD_FAILED',
            `${describeObject(obj)} was not stored: ${errorMessage(lastError)} (not retriable)`,
            { objectKey: obj.key, attempts, cause: lastError },
          );
          break;
        }
        if (this.#now() + backoffMs >= obj.deadlineAtMs) {
          failure = this.#deadlineFailure(obj, attempts, lastError);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, backoffMs));
      }
    } finally {
      obj.expiry.cancel();
    }
    this.#settle(obj, attempts, failure);
    if (abandoned !== undefined) await abandoned.then(noop, noop);
    this.#release(obj, true);
  }

  /**
   * Resolves or rejects the object's tickets. Their handlers run as microtasks, after the caller's
   * synchronous #release: whoever awaited a ticket sees its bytes gone from pendingBytes.
   */
  #settle(obj: SealedObject, attempts: number, failure: WalWriteError | undefined): void {
    if (failure === undefined) {
      this.#counters.objectsUploaded++;
      this.#counters.bytesUploaded += obj.size;
      this.#counters.batchesUploaded += obj.batchCount;
      this.#failedAttemptsInARow = 0;
      // A slow success proves little (a store slow for puts): only a prompt one makes it healthy;
      // otherwise the StoreHealth probe decides.
      if (this.#now() - obj.sealedAtMs <= this.#degradeAfterMs)
        this.#health?.markHealthy('an object was stored');
      obj.stored.resolve({ objectKey: obj.key, objectSize: obj.size, uploadedAtMs: this.#now() });
    } else {
      this.#counters.uploadFailures++;
      this.#health?.markDegraded(failure.message);
      obj.stored.reject(failure);
    }
    if (channels.uploadEnd.hasSubscribers) {
      channels.uploadEnd.publish({
        objectKey: obj.key,
        size: obj.size,
        batchCount: obj.batchCount,
        attempts,
        durationMs: this.#now() - obj.sealedAtMs,
        error: failure,
      } satisfies WalUploadEndEvent);
    }
    obj.settled.resolve();
  }

  /**
   * One attempt: a put, and after ALREADY_EXISTS a head. Resolves true when the object turned out to
   * be stored already (docs/object-store.md: a put retried after a lost response, by this loop or
   * by the S3 SDK's own retries, meets its own earlier success).
   */
  async #putOnce(obj: SealedObject): Promise<boolean> {
    try {
      await this.#store.put(obj.key, obj.body);
      return false;
    } catch (err) {
      if (!isObjectStoreError(err, 'WALPROXY_ERR_STORE_ALREADY_EXISTS')) throw err;
      const head = await this.#store.head(obj.key);
      // Same key and same size is ours: a foreign object would need the same broker id,
      // millisecond, sequence and 48 random bits (object-key.ts), and then the same size too.
      if (head?.size === obj.size) return true;
      throw new ObjectStoreError(
        'WALPROXY_ERR_STORE_ALREADY_EXISTS',
        `${describeObject(obj)}: the key is taken by ${head === undefined ? 'an object that is gone again' : `an object of ${head.size} bytes`}, not this one`,
        { key: obj.key, cause: err },
      );
    }
  }

  /** Marks the store degraded if this attempt is still outstanding after degradeAfterMs. */
  #watchForStall(obj: SealedObject): NodeJS.Timeout | undefined {
    const health = this.#health;
    if (health === undefined) return undefined;
    const timer = setTimeout(
      () =>
        health.markDegraded(
          `the upload of ${describeObject(obj)} has been outstanding for more than ${this.#degradeAfterMs} ms`,
        ),
      this.#degradeAfterMs,
    );
    timer.unref();
    return timer;
  }

  #deadlineFailure(obj: SealedObject, attempts: number, lastError: unknown): WalWriteError {
    const when =
      attempts === 0
        ? `before a first attempt (it waited for one of ${this.#maxUploadsInFlight} upload slots)`
        : `after ${attempts} attempt${attempts === 1 ? '' : 's'}`;
    const last = lastError === undefined ? '' : `; last error: ${errorMessage(lastError)}`;
    return new WalWriteError(
      'UPLOAD_FAILED',
      `${describeObject(obj)} was not stored: the upload deadline of ${this.#uploadDeadlineMs} ms passed ${when}${last}`,
      { objectKey: obj.key, attempts, deadlineExceeded: true, cause: lastError },
    );
  }

  #publishAttempt(startedAt: number, event: Omit<WalUploadAttemptEvent, 'durationMs'>): void {
    if (!channels.uploadAttempt.hasSubscribers) return;
    channels.uploadAttempt.publish({
      ...event,
      durationMs: this.#now() - startedAt,
    } satisfies WalUploadAttemptEvent);
  }

  /** Gives back the object's bytes and, when it had one, its upload slot. */
  #release(obj: SealedObject, heldSlot: boolean): void {
    if (heldSlot) this.#uploadsInFlight--;
    this.#pendingBytes -= obj.batchBytes;
    this.#unreleased.delete(obj);
    obj.released.resolve();
    this.#pump();
  }

  #refuse(
    kind: Exclude<WalWriteErrorKind, 'UPLOAD_FAILED'>,
    batchBytes: number,
    why: string,
  ): WalAppendTicket {
    if (channels.appendRefused.hasSubscribers) {
      channels.appendRefused.publish({
        kind,
        batchBytes,
        pendingBytes: this.#pendingBytes,
      } satisfies WalAppendRefusedEvent);
    }
    const durable = Promise.reject(new WalWriteError(kind, `batch refused: ${why}`));
    durable.catch(noop);
    return { durable, confirm: noop, reject: noop, group: NO_BUDGET, isPending: () => false };
  }
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

/** Promise.withResolvers needs Node 22; the project supports 20. */
function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

interface Timeout {
  promise: Promise<typeof EXPIRED>;
  cancel(): void;
}

function timeout(ms: number): Timeout {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<typeof EXPIRED>((resolve) => {
    timer = setTimeout(() => resolve(EXPIRED), Math.max(0, ms));
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

function describeObject(obj: SealedObject): string {
  return `WAL object ${obj.key} (${obj.size} bytes, ${obj.batchCount} batches)`;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function checkInteger(value: number, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer in ${min}..${max}, got ${value}`);
  }
  return value;
}

function checkTargetBytes(value: number): number {
  const { min, max } = WAL_WRITER_LIMITS.targetBytes;
  return checkInteger(value, 'targetBytes', min, max);
}

function checkLingerMs(value: number): number {
  const { min, max } = WAL_WRITER_LIMITS.lingerMs;
  return checkInteger(value, 'lingerMs', min, max);
}

/** What append() checks at once for a tentative batch; the object checks the rest at confirm. */
function checkTentativeBatch(batch: Buffer): void {
  if (batch.length < 61 || batch.readInt8(16) !== 2 || batch.readInt32BE(8) + 12 !== batch.length) {
    throw new WalFormatError('INVALID_BATCH', 'not exactly one magic v2 record batch');
  }
}
