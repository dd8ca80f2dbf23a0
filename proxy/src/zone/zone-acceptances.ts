import type { Awaiting } from './produce-logins.js';

/**
 * What leaders accepted from producers, for the producer's zone side of zone-local produce
 * (zone-produce.ts): keys `${identity}\0${topic}` whose Produce a leader answered without error,
 * and the keys whose first Produce is still unanswered, which later requests wait for.
 *
 * Bounded by `maxAccepted` (the memory budget's zone share, memory-budget.ts): the oldest
 * acceptance goes first, and is learnt again with one Produce as bytes.
 */
export class Acceptances {
  /** Accepted keys, least recently accepted first. */
  private readonly accepted = new Set<string>();
  /** Keys whose first Produce is not answered yet: later ones wait for that answer. */
  private readonly awaiting = new Map<string, Awaiting>();

  constructor(
    private readonly maxAccepted: number,
    /** How long a request waits for the first answer before deciding without it. */
    private readonly waitMs: number,
  ) {}

  has(key: string): boolean {
    return this.accepted.has(key);
  }

  /** The leader accepted the key's topic: remembered as the newest. */
  accept(key: string): void {
    this.accepted.delete(key);
    this.accepted.add(key);
    if (this.accepted.size > this.maxAccepted) this.accepted.delete(this.accepted.values().next().value!);
  }

  /** The leader refused the key's topic for its authorization: its next batches ask it again. */
  revoke(key: string): void {
    this.accepted.delete(key);
  }

  /** Settled by the key's first answer, or undefined when no first Produce of it is unanswered. */
  answerOf(key: string): Promise<void> | undefined {
    return this.awaiting.get(key)?.promise;
  }

  /** A first Produce of the key goes to the leader: later ones wait for its answer, or for waitMs. */
  ask(key: string): void {
    let settle!: () => void;
    const promise = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const timer = setTimeout(() => awaiting.settle(), this.waitMs);
    timer.unref();
    const awaiting: Awaiting = {
      promise,
      settle: () => {
        clearTimeout(timer);
        if (this.awaiting.get(key) === awaiting) this.awaiting.delete(key);
        settle();
      },
    };
    this.awaiting.set(key, awaiting);
  }

  /** The key's answer came (or could not be read): the requests waiting for it decide now. */
  answered(key: string): void {
    this.awaiting.get(key)?.settle();
  }
}
