// The WAL's shape by default, each value with its reason: the one place the WAL writer, the
// sealing policy, `walproxy sidecar`'s flags (their help defaults) and `walproxy cost` read it
// from. A default sidecar (mode=auto, no --wal-* flag) runs with exactly these (issue #25: the
// writer and the policy each had a set, 400 KB / 10 ms and 1 MB / 50 ms, and the sidecar ran with
// the policy's).

/** How long the store takes, at the percentile the budget is held to. */
export interface StoreLatency {
  /** Seal → object stored. */
  putMs: number;
  /** A follower's GET of the object once the reference reaches it. */
  getMs: number;
}

/**
 * Added acks=all latency a topic accepts from the WAL (`--wal-latency-budget-ms`, per topic
 * `latency.budget.ms`). 50 ms: an acks=all producer at linger.ms 5 typically sees tens of ms
 * already, and at 10 MB/s per broker 50 ms leaves ~30 ms of linger, ~300 KB objects and ~74 %
 * saved (docs/cost.md, "The sealing policy"); 25 ms leaves 5 ms of linger and keeps groups below
 * ~10 MB/s per broker inline.
 */
const LATENCY_BUDGET_MS = 50;

/**
 * S3 Express One Zone, objects under 1 MB: p50 ≈ 3 ms, p99 ≈ 15 ms (docs/cost.md, "The sealing
 * policy"; second-hand). A batch's added latency is its wait, the PUT and the GET; its p99 is near
 * one call's p99 plus the other's p50 (both slow together is ~1 in 10,000).
 */
const STORE_LATENCY: StoreLatency = { putMs: 15, getMs: 3 };

/** Timers fire late by a few ms on a busy event loop. */
const TIMER_SLACK_MS = 2;

/** Longest an object of this budget may wait for more batches: 0 when the store alone takes the budget. */
export function lingerFor(
  budgetMs: number,
  storeLatency: StoreLatency = STORE_LATENCY,
  timerSlackMs: number = TIMER_SLACK_MS,
): number {
  return Math.max(0, budgetMs - storeLatency.putMs - storeLatency.getMs - timerSlackMs);
}

export const WAL_DEFAULTS = {
  latencyBudgetMs: LATENCY_BUDGET_MS,
  storeLatency: STORE_LATENCY,
  timerSlackMs: TIMER_SLACK_MS,
  /**
   * How long an object waits for more batches: the default budget's linger (50 − 15 − 3 − 2 =
   * 30 ms), what the sealing policy gives a default sidecar's objects. A writer without a policy
   * and `walproxy cost --linger-ms` start from it.
   */
  lingerMs: lingerFor(LATENCY_BUDGET_MS),
  /**
   * The largest object (`--wal-target-bytes`, per topic `target.bytes`; the policy's
   * maxObjectBytes, the writer's targetBytes, `walproxy cost --object-bytes`). Past 1 MB an object
   * saves < 3 % more of the stock cost (requests per byte, docs/cost.md), and the latency figures
   * above are for objects under 1 MB; the budget seals smaller ones at lower rates.
   */
  objectBytes: 1_000_000,
} as const;
