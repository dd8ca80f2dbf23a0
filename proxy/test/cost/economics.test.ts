import { describe, expect, it } from 'vitest';
import { objectEconomics } from '../../src/cost/economics.js';
import { DEFAULT_PRICES, mergePrices } from '../../src/cost/prices.js';

const RF3_3Z = { replicationFactor: 3, zones: 3 };
/** The prices alone: no residue, no storage, no CPU. */
const PRICES_ONLY = { residualFraction: 0, retentionSec: 0, walCpuSecondsPerGb: 0 };

describe('objectEconomics: break-even object size and saving per byte', () => {
  it("reproduces the issue's figures at RF 3 over 3 zones: ~88 % at most, ~34 KB break-even", () => {
    // Stock: 2 followers in other zones × $0.02/GB = $0.04 per produced GB.
    // walproxy per GB: upload $0.0032 + 2 followers × retrieval $0.0006 = $0.0044.
    // Requests per object: PUT $0.00113/1,000 + 2 GETs × $0.00003/1,000 = $1.19e-6.
    const pure = objectEconomics(DEFAULT_PRICES, RF3_3Z, PRICES_ONLY);
    expect(pure.stockUsdPerByte).toBeCloseTo(0.04 / 1e9, 20);
    expect(pure.requestUsd).toBeCloseTo(1.19e-6, 15);
    // At most (0.04 − 0.0044) / 0.04 = 89.0 % saved, as objects grow without bound.
    expect(pure.maxSavedFraction).toBeCloseTo(0.89, 12);
    // Break-even: 1.19e-6 / (0.0356 / 1e9) = 33,427 bytes.
    expect(Math.round(pure.breakEvenObjectBytes!)).toBe(33_427);
    expect(pure.savingUsd(pure.breakEvenObjectBytes!)).toBeCloseTo(0, 15);

    // With the measured cross-zone residue (1.14 % of stock bytes still cross): the per-byte
    // saving is 0.04 × 0.9886 − 0.0044 = 0.035144 $/GB → at most 87.86 % ("~88 %") and a
    // break-even of 1.19e-6 / 0.035144e-9 = 33,861 bytes ("~34 KB").
    const residue = objectEconomics(DEFAULT_PRICES, RF3_3Z, { ...PRICES_ONLY, residualFraction: 0.0114 });
    expect(residue.maxSavedFraction).toBeCloseTo(0.035144 / 0.04, 12);
    expect(Math.round(residue.breakEvenObjectBytes!)).toBe(33_861);

    // The defaults add 1 h of storage (0.11 × 3,600 / 2,592,000 = 0.000152778 $/GB) and the WAL
    // path's CPU (137.1 s/GB × $0.0408 / 3,600 = 0.00155380 $/GB): 0.03343742 $/GB,
    // 83.59 % at most, break-even 1.19e-6 / 0.03343742e-9 = 35,589 bytes.
    const defaults = objectEconomics(DEFAULT_PRICES, RF3_3Z);
    const perGb = 0.035144 - (0.11 * 3600) / 2_592_000 - (137.1 * 0.0408) / 3600;
    expect(defaults.maxSavedFraction).toBeCloseTo(perGb / 0.04, 12);
    expect(Math.round(defaults.breakEvenObjectBytes!)).toBe(35_589);
  });

  it('saves per byte what the transfer avoided, less the requests spread over the object', () => {
    const e = objectEconomics(DEFAULT_PRICES, RF3_3Z, PRICES_ONLY);
    // 400 KB: 400,000 × 0.0356e-9 − 1.19e-6 = $1.305e-5; per byte over stock 0.04e-9: 81.56 %.
    expect(e.savingUsd(400_000)).toBeCloseTo(1.305e-5, 15);
    expect(e.savedFraction(400_000)).toBeCloseTo(1.305e-5 / 400_000 / 0.04e-9, 12);
    // 10 KB costs more than it saves.
    expect(e.savingUsd(10_000)).toBeLessThan(0);
  });

  it('a follower in the leader zone saves nothing and still reads: fewer zones, larger break-even', () => {
    // RF 3 over 2 zones: one follower crosses ($0.02/GB), both read (0.0032 + 2 × 0.0006):
    // (0.02 − 0.0044) = 0.0156 $/GB → 1.19e-6 / 0.0156e-9 = 76,282 bytes, 78 % at most.
    const twoZones = objectEconomics(DEFAULT_PRICES, { replicationFactor: 3, zones: 2 }, PRICES_ONLY);
    expect(twoZones.crossZoneFollowers).toBe(1);
    expect(Math.round(twoZones.breakEvenObjectBytes!)).toBe(76_282);
    expect(twoZones.maxSavedFraction).toBeCloseTo(0.78, 12);
    // If the in-zone follower replicated inline instead, only one reader and one GET remain:
    // (0.02 − 0.0038) → 1.16e-6 / 0.0162e-9 = 71,605 bytes.
    const inlineInZone = objectEconomics(
      DEFAULT_PRICES,
      { replicationFactor: 3, zones: 2 },
      { ...PRICES_ONLY, storeReaders: 1, getsPerObject: 1 },
    );
    expect(Math.round(inlineInZone.breakEvenObjectBytes!)).toBe(71_605);
    // One zone: nothing crosses, nothing ever pays.
    const oneZone = objectEconomics(DEFAULT_PRICES, { replicationFactor: 3, zones: 1 }, PRICES_ONLY);
    expect(oneZone.breakEvenObjectBytes).toBeUndefined();
    expect(oneZone.savedFraction(1e6)).toBe(0);
  });

  it('follows the price file: a per-request allowance, a dearer vCPU', () => {
    // The pre-2025 allowance: the first 512 KiB of each request free of upload and retrieval, so a
    // small object pays requests only: 1.19e-6 / 0.04e-9 = 29,750 bytes.
    const merged = mergePrices({ freeBytesPerRequest: 524_288, region: 'eu-west-1' }, 'p.json');
    if ('errors' in merged) throw new Error(merged.errors.join('\n'));
    expect(merged.prices.region).toBe('eu-west-1');
    const allowance = objectEconomics(merged.prices, RF3_3Z, PRICES_ONLY);
    expect(Math.round(allowance.breakEvenObjectBytes!)).toBe(29_750);
    // Beyond the allowance the per-GB charges return: at 1 MB, (1e6 × 0.04 − 0.0044 × 475,712)/1e9 − 1.19e-6.
    expect(allowance.savingUsd(1e6)).toBeCloseTo((1e6 * 0.04 - 0.0044 * (1e6 - 524_288)) / 1e9 - 1.19e-6, 15);

    const dear = mergePrices({ vcpuHourUsd: 1 }, 'p.json');
    if ('errors' in dear) throw new Error(dear.errors.join('\n'));
    // 137.1 s/GB at $1/h = 0.0381 $/GB: more than the 0.0356 the store saves — never pays.
    const e = objectEconomics(dear.prices, RF3_3Z, { residualFraction: 0, retentionSec: 0 });
    expect(e.breakEvenObjectBytes).toBeUndefined();
  });

  it('refuses text where a number belongs and the reverse', () => {
    expect(mergePrices({ region: 3, vcpuHourUsd: 'cheap' }, 'p.json')).toEqual({
      errors: [
        'p.json: "region" must be a string',
        'p.json: "vcpuHourUsd" must be a number >= 0, got "cheap"',
      ],
    });
  });
});
