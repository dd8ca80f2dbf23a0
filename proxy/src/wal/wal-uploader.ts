// The WAL writer's uploads (wal-writer.ts; docs/wal-writer.md): sealed objects wait in seal order
// for one of a bounded number of upload slots, and each is put with retries (full-jitter backoff)
// until it is stored or its deadline, counted from its seal, passes; then its tickets settle, and
// once no store call for it runs any more its bytes are given back. What the uploads show about
// the store is told to StoreHealth.
import { channel } from 'node:diagnostics_channel';
import { isObjectStoreError, type ObjectStore, ObjectStoreError } from '../store/index.js';
import type { StoreHealth } from '../store/store-health.js';
import { fullJitterBackoffMs } from './backoff.js';
import {
  WAL_WRITER_CHANNELS,
  type WalUploadAttemptEvent,
  type WalUploadEndEvent,
  type WalUploadStartEvent,
} from './channels.js';
import { type Deferred, deferred } from './deferred.js';
import { WalWriteError } from './errors.js';
import type { Counters } from './wal-writer-types.js';

/** What a stored object tells each of its tickets. */
export interface StoredObject {
  objectKey: string;
  objectSize: number;
  uploadedAtMs: number;
}

/** What the writer hands over at a seal. */
export interface SealInput {
  key: string;
  body: Buffer[];
  size: number;
  batchCount: number;
  batchBytes: number;
  stored: Deferred<StoredObject>;
  sealedAtMs: number;
}

interface SealedObject extends SealInput {
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
  uploadStart: channel(WAL_WRITER_CHANNELS.uploadStart),
  uploadAttempt: channel(WAL_WRITER_CHANNELS.uploadAttempt),
  uploadEnd: channel(WAL_WRITER_CHANNELS.uploadEnd),
};

export interface WalUploaderOptions {
  store: ObjectStore;
  now: () => number;
  health: StoreHealth | undefined;
  maxUploadsInFlight: number;
  uploadDeadlineMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  degradeAfterMs: number;
  failedAttemptsBeforeDegraded: number;
  /** The writer's counters. */
  counters: Counters;
  /** An object's batch bytes left memory: no store call for it runs any more. */
  onReleased: (batchBytes: number) => void;
}

export class WalUploader {
  readonly #store: ObjectStore;
  readonly #now: () => number;
  readonly #health: StoreHealth | undefined;
  readonly #maxUploadsInFlight: number;
  readonly #uploadDeadlineMs: number;
  readonly #retryBaseMs: number;
  readonly #retryMaxMs: number;
  readonly #degradeAfterMs: number;
  readonly #failedAttemptsBeforeDegraded: number;
  readonly #counters: Counters;
  readonly #onReleased: (batchBytes: number) => void;
  /** Failed store attempts since the last success, across objects. */
  #failedAttemptsInARow = 0;
  /** Sealed objects waiting for a slot, in seal order. */
  readonly #queue: SealedObject[] = [];
  /** Sealed objects not yet released, for flush() and close(). */
  readonly #unreleased = new Set<SealedObject>();
  #uploadsInFlight = 0;

  constructor(options: WalUploaderOptions) {
    this.#store = options.store;
    this.#now = options.now;
    this.#health = options.health;
    this.#maxUploadsInFlight = options.maxUploadsInFlight;
    this.#uploadDeadlineMs = options.uploadDeadlineMs;
    this.#retryBaseMs = options.retryBaseMs;
    this.#retryMaxMs = options.retryMaxMs;
    this.#degradeAfterMs = options.degradeAfterMs;
    this.#failedAttemptsBeforeDegraded = options.failedAttemptsBeforeDegraded;
    this.#counters = options.counters;
    this.#onReleased = options.onReleased;
  }

  /** Store calls running, abandoned ones (deadline passed) included. */
  get uploadsInFlight(): number {
    return this.#uploadsInFlight;
  }

  /** Sealed objects waiting for an upload slot. */
  get queuedObjects(): number {
    return this.#queue.length;
  }

  /** Queues a sealed object; its upload deadline runs from its seal. */
  enqueue(input: SealInput): void {
    const sealed: SealedObject = {
      ...input,
      deadlineAtMs: input.sealedAtMs + this.#uploadDeadlineMs,
      expiry: timeout(this.#uploadDeadlineMs),
      settled: deferred(),
      released: deferred(),
    };
    this.#unreleased.add(sealed);
    this.#queue.push(sealed);
    // The deadline bounds the wait for a slot too: when the store is slow or down, the queue
    // fails within the deadline instead of keeping producers waiting a deadline per object ahead.
    sealed.expiry.promise.then(() => this.#expireQueued(sealed));
    this.#pump();
  }

  /** Resolves when every object queued so far has settled its tickets. */
  async settled(): Promise<void> {
    await Promise.all(Array.from(this.#unreleased, (o) => o.settled.promise));
  }

  /** Resolves when no store call for any object queued so far runs any more. */
  async released(): Promise<void> {
    await Promise.all(Array.from(this.#unreleased, (o) => o.released.promise));
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
    this.#onReleased(obj.batchBytes);
    this.#unreleased.delete(obj);
    obj.released.resolve();
    this.#pump();
  }
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
