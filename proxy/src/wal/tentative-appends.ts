// The WAL writer's tentative appends (wal-writer.ts; docs/wal-writer.md, "Tentative batches"): a
// copied batch is in no object until the broker is known to have appended it. Its ticket's
// confirm() places it in its group's open object, lingering from its append; reject() (the broker
// refused it) or the confirmation timeout drops it, and its ticket rejects.
import type { WalAppendEntry } from '@walproxy/shared';
import { type Deferred, deferred } from './deferred.js';
import { WalWriteError } from './errors.js';
import {
  type Counters,
  checkTentativeBatch,
  type Placement,
  type WalAppendTicket,
  type WalLocation,
} from './wal-writer-types.js';

/** A batch appended tentatively, not in any object until confirmed. */
interface TentativeAppend {
  entry: WalAppendEntry;
  placement: Placement;
  appendedAtMs: number;
  location: Deferred<WalLocation>;
  expiry: NodeJS.Timeout;
}

export interface TentativeAppendsOptions {
  /** A tentative batch neither confirmed nor rejected within this is dropped (UNCONFIRMED). */
  confirmTimeoutMs: number;
  /** The writer's counters. */
  counters: Counters;
  /**
   * Adds a confirmed batch to its group's open object, its linger counted from `since`; throws
   * (and adds nothing) for a batch or topic the object cannot hold.
   */
  place: (entry: WalAppendEntry, placement: Placement, since: number) => Promise<WalLocation>;
  /** The writer's pending bytes change by `delta`: a waiting batch's bytes count against its bound. */
  adjustPending: (delta: number) => void;
}

const noop = () => {};

export class TentativeAppends {
  readonly #tentative = new Set<TentativeAppend>();
  readonly #confirmTimeoutMs: number;
  readonly #counters: Counters;
  readonly #place: TentativeAppendsOptions['place'];
  readonly #adjustPending: (delta: number) => void;

  constructor(options: TentativeAppendsOptions) {
    this.#confirmTimeoutMs = options.confirmTimeoutMs;
    this.#counters = options.counters;
    this.#place = options.place;
    this.#adjustPending = options.adjustPending;
  }

  /** Tentative batches waiting for their confirmation. */
  get size(): number {
    return this.#tentative.size;
  }

  /** Holds the batch until its ticket confirms or rejects it, or the confirmation times out. */
  add(entry: WalAppendEntry, placement: Placement, now: number): WalAppendTicket {
    checkTentativeBatch(entry.batch);
    const batchBytes = entry.batch.length;
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
    this.#adjustPending(batchBytes);
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

  /** Drops every batch still waiting: the writer closes. */
  dropAll(): void {
    for (const tentative of [...this.#tentative]) this.#drop(tentative, 'CLOSED', 'the WAL writer is closed');
  }

  /** A tentative batch the broker appended goes into the open object, as if appended now but lingering from its append. */
  #confirm(tentative: TentativeAppend): void {
    if (!this.#tentative.delete(tentative)) return;
    clearTimeout(tentative.expiry);
    const { entry, placement, appendedAtMs, location } = tentative;
    this.#adjustPending(-entry.batch.length);
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
    this.#adjustPending(-tentative.entry.batch.length);
    tentative.location.reject(new WalWriteError(kind, `batch dropped from the WAL: ${why}`));
  }
}
