/**
 * "Full jitter" exponential backoff (AWS Architecture Blog, "Exponential Backoff and Jitter"): a
 * delay drawn uniformly from [0, min(max, base * 2^(retry - 1))). Uniform draws spread the retries
 * of many writers that failed together (a store blip fails every upload in flight at once), so they
 * do not come back in lockstep.
 *
 * `retry` counts from 1 (the wait before the second attempt). `random` is injectable for tests.
 */
export function fullJitterBackoffMs(
  retry: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  // 2 ** 1024 is Infinity; Math.min then gives maxMs, as intended.
  const cap = Math.min(maxMs, baseMs * 2 ** (retry - 1));
  return Math.floor(random() * cap);
}
