// The leader side's WAL builder (docs/wal-writer.md; docs/architecture.md, "The WAL, leader side"): packs
// produced batches of many partitions into WAL objects, seals them by size, linger or flush, and
// uploads them with bounded concurrency, retries and a deadline. Each append gets a ticket whose
// `durable` promise says when (and where) the batch is in the object store: the Produce path holds
// durable-ack responses on it. With a sealing policy (docs/cost.md) there is one open object per
// latency budget, sealed when the policy says, and an object that would cost more than it saves is
// not uploaded: its tickets reject (BELOW_BREAK_EVEN) and its batches replicate inline.
//
// Here: appends, the open objects and when they seal (or, below break-even, are abandoned).
// Tentative batches wait in tentative-appends.ts, sealed objects upload in wal-uploader.ts, and
// the options, tickets and counters are in wal-writer-types.ts.
import { channel } from 'node:diagnostics_channel';
import { WAL_INDEX_ENTRY_SIZE, type WalAppendEntry, WalObjectBuilder } from '@walproxy/shared';
import {
  WAL_WRITER_CHANNELS,
  type WalAppendRefusedEvent,
  type WalSealEvent,
  type WalSealReason,
} from './channels.js';
import { WAL_DEFAULTS } from './defaults.js';
import { type Deferred, deferred } from './deferred.js';
import { WalWriteError, type WalWriteErrorKind } from './errors.js';
import { assertValidKeyPrefix, newWalObjectKey } from './object-key.js';
import type { ProducerWaits } from './producer-waits.js';
import type { SealingPolicy } from './sealing-policy.js';
import { TentativeAppends } from './tentative-appends.js';
import { type SealInput, type StoredObject, WalUploader } from './wal-uploader.js';
import {
  type Counters,
  checkInteger,
  checkLingerMs,
  checkTargetBytes,
  type Placement,
  WAL_WRITER_DEFAULTS,
  type WalAppendOptions,
  type WalAppendTicket,
  type WalLocation,
  type WalWriterOptions,
  type WalWriterStats,
} from './wal-writer-types.js';

export {
  WAL_WRITER_DEFAULTS,
  WAL_WRITER_LIMITS,
  type WalAppendOptions,
  type WalAppendTicket,
  type WalLocation,
  type WalWriterOptions,
  type WalWriterStats,
} from './wal-writer-types.js';

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

const noop = () => {};

const channels = {
  seal: channel(WAL_WRITER_CHANNELS.seal),
  appendRefused: channel(WAL_WRITER_CHANNELS.appendRefused),
};

export class WalWriter {
  readonly #brokerId: number;
  readonly #targetBytes: number;
  readonly #lingerMs: number;
  readonly #maxPendingBytes: number;
  readonly #keyPrefix: string;
  readonly #now: () => number;
  readonly #policy: SealingPolicy | undefined;
  readonly #producerWaits: Pick<ProducerWaits, 'mayStillAdd'> | undefined;
  readonly #uploader: WalUploader;

  /** The open object of each group (latency budget). */
  readonly #open = new Map<number, OpenObject>();
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
  readonly #tentatives: TentativeAppends;

  constructor(options: WalWriterOptions) {
    const d = WAL_WRITER_DEFAULTS;
    const { brokerId } = options;
    if (!Number.isInteger(brokerId) || brokerId < 0 || brokerId >= 2 ** 31) {
      throw new RangeError(`broker id ${brokerId} is not a Kafka broker id (a non-negative int32)`);
    }
    this.#brokerId = brokerId;
    this.#targetBytes = checkTargetBytes(options.targetBytes ?? d.targetBytes);
    this.#lingerMs = checkLingerMs(options.lingerMs ?? d.lingerMs);
    const maxUploadsInFlight = checkInteger(
      options.maxUploadsInFlight ?? d.maxUploadsInFlight,
      'maxUploadsInFlight',
      1,
    );
    const uploadDeadlineMs = checkInteger(
      options.uploadDeadlineMs ?? d.uploadDeadlineMs,
      'uploadDeadlineMs',
      1,
    );
    // A zero base would retry a store that fails fast (connection refused) in a tight loop.
    const retryBaseMs = checkInteger(options.retryBaseMs ?? d.retryBaseMs, 'retryBaseMs', 1);
    const retryMaxMs = checkInteger(options.retryMaxMs ?? d.retryMaxMs, 'retryMaxMs', retryBaseMs);
    // Below the target an object would never fill up before append() starts refusing.
    this.#maxPendingBytes = checkInteger(
      options.maxPendingBytes ?? d.maxPendingBytes,
      'maxPendingBytes',
      this.#targetBytes,
    );
    this.#keyPrefix = options.keyPrefix ?? d.keyPrefix;
    assertValidKeyPrefix(this.#keyPrefix);
    this.#now = options.now ?? (() => Date.now());
    this.#policy = options.policy;
    this.#producerWaits = options.producerWaits;
    this.#tentatives = new TentativeAppends({
      confirmTimeoutMs: checkInteger(options.confirmTimeoutMs ?? d.confirmTimeoutMs, 'confirmTimeoutMs', 1),
      counters: this.#counters,
      place: (entry, placement, since) => this.#place(entry, placement, since),
      adjustPending: (delta) => {
        this.#pendingBytes += delta;
      },
    });
    const degradeAfterMs = checkInteger(options.degradeAfterMs ?? d.degradeAfterMs, 'degradeAfterMs', 1);
    const failedAttemptsBeforeDegraded = checkInteger(
      options.failedAttemptsBeforeDegraded ?? d.failedAttemptsBeforeDegraded,
      'failedAttemptsBeforeDegraded',
      1,
    );
    this.#uploader = new WalUploader({
      store: options.store,
      now: this.#now,
      health: options.health,
      maxUploadsInFlight,
      uploadDeadlineMs,
      retryBaseMs,
      retryMaxMs,
      degradeAfterMs,
      failedAttemptsBeforeDegraded,
      counters: this.#counters,
      onReleased: (batchBytes) => {
        this.#pendingBytes -= batchBytes;
      },
    });
  }

  get stats(): WalWriterStats {
    return {
      ...this.#counters,
      pendingBytes: this.#pendingBytes,
      uploadsInFlight: this.#uploader.uploadsInFlight,
      queuedObjects: this.#uploader.queuedObjects,
      tentativeBatches: this.#tentatives.size,
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
    return this.#tentatives.add(entry, placement, now);
  }

  /** Checks an append's options (RangeError) and resolves them against the writer's and the policy's. */
  #placement(options: WalAppendOptions): Placement {
    const own = options.lingerMs === undefined ? undefined : checkLingerMs(options.lingerMs);
    const targetBytes =
      options.targetBytes === undefined ? this.#targetBytes : checkTargetBytes(options.targetBytes);
    const requiresStore = options.requiresStore === true;
    const policy = this.#policy;
    const budgetMs = options.budgetMs ?? (policy ? WAL_DEFAULTS.latencyBudgetMs : undefined);
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
    await this.#uploader.settled();
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
    this.#tentatives.dropAll();
    this.#sealAll();
    await this.#uploader.released();
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
    const sealed: SealInput = {
      key: open.key,
      body: open.builder.seal(),
      size,
      batchCount: open.builder.batchCount,
      batchBytes: open.batchBytes,
      stored: open.stored,
      sealedAtMs: now,
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
    this.#uploader.enqueue(sealed);
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
