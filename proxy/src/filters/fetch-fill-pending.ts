// The follower side's pending fallbacks (fetch-fill.ts): the partitions whose records ended early
// ask the leader side for inline bytes from their first missing batch, carried in the capability
// tag of each marked request, until an answer settles them or FETCH_FILL_PENDING_TTL_MS passes.
import type { FetchResponsePartition, FetchResponseTopic } from '@walproxy/shared';
import type { FetchFillStats } from './fetch-fill-events.js';

/** How long a partition keeps asking for inline bytes when nothing tells us it got them. */
export const FETCH_FILL_PENDING_TTL_MS = 30_000;

export interface PendingFallback {
  readonly topicId: string | undefined;
  readonly topic: string | undefined;
  readonly partition: number;
  readonly fromOffset: bigint;
  readonly registeredAt: number;
}

export function pendingKey(
  topic: { topicId?: string | undefined; topic?: string | undefined },
  partition: number,
) {
  return `${topic.topicId ?? `name:${topic.topic}`}\u0000${partition}`;
}

/** The pending fallbacks of one follower side. */
export class PendingFallbacks {
  readonly #pending = new Map<string, PendingFallback>();
  readonly #now: () => number;
  readonly #ttlMs: number;
  /** The filter's counters this part keeps. */
  readonly #stats: Pick<FetchFillStats, 'pendingInline' | 'pendingExpired'>;

  constructor(
    now: () => number,
    ttlMs: number,
    stats: Pick<FetchFillStats, 'pendingInline' | 'pendingExpired'>,
  ) {
    this.#now = now;
    this.#ttlMs = ttlMs;
    this.#stats = stats;
  }

  values(): IterableIterator<PendingFallback> {
    return this.#pending.values();
  }

  /** What a marked request carries, for its answer to settle. */
  snapshot(): ReadonlyMap<string, PendingFallback> {
    return new Map(this.#pending);
  }

  /** Registers (or renews) the partition's inline request from `fromOffset`. */
  register(topic: FetchResponseTopic, partition: number, fromOffset: bigint): void {
    const pending: PendingFallback = {
      topicId: topic.topicId,
      topic: topic.topic,
      partition,
      fromOffset,
      registeredAt: this.#now(),
    };
    this.#pending.set(pendingKey(topic, partition), pending);
    this.#stats.pendingInline = this.#pending.size;
  }

  /**
   * Drops the partition's pending fallback once an answer to a request that carried it delivers
   * the partition whole with bytes in it (the leader side honoured it, or the references filled),
   * or reports an error for it (its leadership or state changed; a new failure registers anew).
   * An empty answer settles nothing: a full response may leave a partition out of its byte budget.
   */
  settle(
    carried: ReadonlyMap<string, PendingFallback>,
    topic: FetchResponseTopic,
    partition: FetchResponsePartition,
    delivered: boolean,
  ): void {
    const key = pendingKey(topic, partition.partitionIndex);
    const pending = this.#pending.get(key);
    if (pending === undefined || carried.get(key) !== pending) return;
    if (!delivered && partition.errorCode === 0) return;
    this.#pending.delete(key);
    this.#stats.pendingInline = this.#pending.size;
  }

  /** Drops the fallbacks no answer settled in time, so no follower re-fetches one offset forever. */
  expire(): void {
    const now = this.#now();
    for (const [key, pending] of this.#pending) {
      if (now - pending.registeredAt < this.#ttlMs) continue;
      this.#pending.delete(key);
      this.#stats.pendingExpired++;
    }
    this.#stats.pendingInline = this.#pending.size;
  }
}
