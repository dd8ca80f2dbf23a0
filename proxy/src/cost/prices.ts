// The one price table `walproxy cost` uses (docs/cost.md). Every field can be overridden by a JSON
// file (`--prices file.json`) holding any subset of these keys; unknown keys are refused so a typo
// never silently falls back to a default.

/** USD prices; GB means 10^9 bytes, as AWS price lists use it. */
export interface PriceTable {
  /** Where and when the prices were read; printed with every result. */
  source: string;
  /** Cross-zone transfer per GB moved, both directions together ($0.01 out + $0.01 in). */
  crossZonePerGb: number;
  /** S3 Express One Zone PUT request, per 1,000. */
  putPer1000: number;
  /** S3 Express One Zone GET request, per 1,000. */
  getPer1000: number;
  /** S3 Express One Zone upload (per GB written). */
  uploadPerGb: number;
  /** S3 Express One Zone retrieval (per GB read). */
  retrievalPerGb: number;
  /** S3 Express One Zone storage, per GB-month. */
  storagePerGbMonth: number;
  /**
   * Bytes of each request free of the per-GB upload/retrieval charge. 0 = every byte is charged
   * (AWS's post-April-2025 FAQ example); 524288 = the older "512 KiB per request free" rule.
   */
  freeBytesPerRequest: number;
}

export const DEFAULT_PRICES: PriceTable = {
  source:
    'AWS us-east-1, S3 Express One Zone after the April 2025 cut; read 2026-11-30 (walproxy shared/reference/costs-and-peers.md)',
  crossZonePerGb: 0.02,
  putPer1000: 0.00113,
  getPer1000: 0.00003,
  uploadPerGb: 0.0032,
  retrievalPerGb: 0.0006,
  storagePerGbMonth: 0.11,
  freeBytesPerRequest: 0,
};

const NUMERIC_KEYS = Object.keys(DEFAULT_PRICES).filter((k) => k !== 'source') as Array<
  Exclude<keyof PriceTable, 'source'>
>;

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
    if (key === 'source') {
      if (typeof value !== 'string') errors.push(`${origin}: "source" must be a string`);
      else prices.source = value;
    } else if ((NUMERIC_KEYS as string[]).includes(key)) {
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
        errors.push(`${origin}: "${key}" must be a number >= 0, got ${JSON.stringify(value)}`);
      } else {
        prices[key as (typeof NUMERIC_KEYS)[number]] = value;
      }
    } else {
      errors.push(`${origin}: unknown price "${key}" (known: source, ${NUMERIC_KEYS.join(', ')})`);
    }
  }
  return errors.length > 0 ? { errors } : { prices };
}
