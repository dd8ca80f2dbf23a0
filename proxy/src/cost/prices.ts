// The one price table `walproxy cost` and the sealing policy use (docs/cost.md). Every field can be
// overridden by a JSON file (`--prices file.json`) holding any subset of these keys; unknown keys
// are refused so a typo never silently falls back to a default.

/** USD prices; GB means 10^9 bytes, as AWS price lists use it. */
export interface PriceTable {
  /** Where and when the prices were read; printed with every result. */
  source: string;
  /** The region the prices are for (they differ by region). */
  region: string;
  /** The object store class the WAL objects go to. */
  storeClass: string;
  /** Cross-zone transfer per GB moved, both directions together ($0.01 out + $0.01 in). */
  crossZonePerGb: number;
  /** PUT request, per 1,000. */
  putPer1000: number;
  /** GET request, per 1,000. */
  getPer1000: number;
  /** Upload (per GB written). */
  uploadPerGb: number;
  /** Retrieval (per GB read). */
  retrievalPerGb: number;
  /** Storage, per GB-month. */
  storagePerGbMonth: number;
  /**
   * Bytes of each request free of the per-GB upload/retrieval charge. 0 = every byte is charged
   * (S3 Express One Zone since 2025-04-10); 524288 = the older "512 KiB per request free" rule.
   */
  freeBytesPerRequest: number;
  /** One vCPU for an hour: what the sidecar's own CPU time costs. */
  vcpuHourUsd: number;
}

export const DEFAULT_PRICES: PriceTable = {
  source:
    'AWS us-east-1: S3 Express One Zone after the April 2025 cut and cross-zone transfer, read 2026-11-30 (walproxy shared/reference/costs-and-peers.md); vCPU-hour = m7g.large on-demand Linux $0.0816/h ÷ 2 vCPUs, June 2026 (second-hand: factualminds.com, "Amazon EC2 On-Demand Pricing … (2026)"), an assumption to override',
  region: 'us-east-1',
  storeClass: 'S3 Express One Zone',
  crossZonePerGb: 0.02,
  putPer1000: 0.00113,
  getPer1000: 0.00003,
  uploadPerGb: 0.0032,
  retrievalPerGb: 0.0006,
  storagePerGbMonth: 0.11,
  freeBytesPerRequest: 0,
  vcpuHourUsd: 0.0408,
};

type TextKey = 'source' | 'region' | 'storeClass';
type NumericKey = Exclude<keyof PriceTable, TextKey>;

const TEXT_KEYS: TextKey[] = ['source', 'region', 'storeClass'];
const NUMERIC_KEYS = (Object.keys(DEFAULT_PRICES) as Array<keyof PriceTable>).filter(
  (k): k is NumericKey => !(TEXT_KEYS as string[]).includes(k),
);

/**
 * The defaults with `overrides` applied (parsed JSON). Returns one message per bad key; the
 * caller prefixes the flag name.
 */
export function mergePrices(
  overrides: unknown,
  origin: string,
): { prices: PriceTable } | { errors: string[] } {
  if (typeof overrides !== 'object' || overrides === null || Array.isArray(overrides)) {
    return { errors: [`${origin}: expected a JSON object of prices`] };
  }
  const errors: string[] = [];
  const prices: PriceTable = { ...DEFAULT_PRICES, source: origin };
  for (const [key, value] of Object.entries(overrides)) {
    if ((TEXT_KEYS as string[]).includes(key)) {
      if (typeof value !== 'string') errors.push(`${origin}: "${key}" must be a string`);
      else prices[key as TextKey] = value;
    } else if ((NUMERIC_KEYS as string[]).includes(key)) {
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
        errors.push(`${origin}: "${key}" must be a number >= 0, got ${JSON.stringify(value)}`);
      } else {
        prices[key as NumericKey] = value;
      }
    } else {
      errors.push(`${origin}: unknown price "${key}" (known: ${[...TEXT_KEYS, ...NUMERIC_KEYS].join(', ')})`);
    }
  }
  return errors.length > 0 ? { errors } : { prices };
}
