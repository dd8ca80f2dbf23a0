import { describe, expect, it } from 'vitest';
import { type Counted, sumCounted } from './measure.js';

const run = (n: number, extra: Partial<Counted> = {}): Counted => ({
  durationSec: 20 * n,
  referencedBytes: 1_000 * n,
  inlineBytes: 10 * n,
  puts: n,
  bytesUploaded: 900 * n,
  gets: 2 * n,
  bytesRead: 1_800 * n,
  sidecarCpuSeconds: 0.5 * n,
  crossZoneBytes: 100 * n,
  storeBytes: 2_700 * n,
  ...extra,
});

describe('sumCounted', () => {
  it('adds every count and every duration of the runs', () => {
    expect(sumCounted([run(1), run(2)])).toEqual(run(3));
  });

  it('leaves out a figure one of the runs did not measure, rather than counting it as zero', () => {
    const summed = sumCounted([run(1), run(2, { crossZoneBytes: undefined, sidecarCpuSeconds: undefined })]);
    expect(summed.crossZoneBytes).toBeUndefined();
    expect(summed.sidecarCpuSeconds).toBeUndefined();
    expect(summed.storeBytes).toBe(3 * 2_700);
  });

  it('refuses an empty list', () => {
    expect(() => sumCounted([])).toThrow(RangeError);
  });
});
