import { describe, expect, it } from 'vitest';
import { fullJitterBackoffMs } from '../../src/wal/backoff.js';

describe('fullJitterBackoffMs', () => {
  it('draws from [0, min(max, base * 2^(retry-1))), doubling the cap each retry', () => {
    // Given a random source at its extremes
    const low = () => 0;
    const high = () => 0.999_999;

    // When delays are computed for successive retries with base 20 and max 1000
    const caps = [1, 2, 3, 4, 5, 6, 7, 50, 2000].map((retry) => fullJitterBackoffMs(retry, 20, 1000, high));

    // Then the lowest draw is 0 and the highest approaches the doubling cap, capped at the max
    expect(fullJitterBackoffMs(5, 20, 1000, low)).toBe(0);
    expect(caps).toEqual([19, 39, 79, 159, 319, 639, 999, 999, 999]);
  });
});
