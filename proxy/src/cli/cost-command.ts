import { readFileSync } from 'node:fs';
import type { Argv } from 'yargs';
import {
  FlagErrors,
  flag,
  flagText,
  parseBytes,
  parseDuration,
  parseNumber,
  present,
} from '../config/flag-values.js';
import { SIDECAR_DEFAULTS } from '../config/sidecar-config.js';
import { countersFromJson, countersFromScrapes } from '../cost/counters-source.js';
import { type ClusterLayout, DEFAULT_CPU, objectEconomics, SECONDS_PER_MONTH } from '../cost/economics.js';
import { type MeasuredCost, type MeasuredCounters, priceMeasured } from '../cost/measured.js';
import { type CostInputs, type CostResult, computeCost } from '../cost/model.js';
import { DEFAULT_PRICES, mergePrices, type PriceTable } from '../cost/prices.js';
import { WAL_DEFAULTS } from '../wal/defaults.js';
import {
  LATENCY_BUDGET_LIMITS,
  SEALING_DEFAULTS,
  type SteadyState,
  steadyState,
} from '../wal/sealing-policy.js';
import { exitOnFlagErrors } from './terminal.js';

export function costOptions<T>(yargs: Argv<T>): Argv<T> {
  return yargs
    .option('throughput-mbps', {
      type: 'string',
      describe:
        'a hypothetical rate: produced megabytes (10^6 bytes) per second into WAL topics, all brokers together',
    })
    .option('from-metrics', {
      type: 'string',
      array: true,
      describe:
        "instead of a rate, price what happened: each sidecar's /metrics (URL or file of Prometheus text), or a JSON file of counters (repeatable, summed; docs/cost.md)",
    })
    .option('duration', {
      type: 'string',
      describe: 'with --from-metrics: how long the counters counted (default: the longest process_uptime)',
    })
    .option('rf', { type: 'string', describe: 'replication factor of the topics', default: '3' })
    .option('zones', {
      type: 'string',
      describe: 'availability zones the replicas spread over',
      default: '3',
    })
    .option('mode', {
      type: 'string',
      describe:
        "the topics' mode (topic-config mode): auto prices the sealing policy as a default sidecar runs it, inline where objects would not pay (saved 0, never negative), with the cost of forcing the WAL beside it; wal prices every batch through the WAL",
      default: 'auto',
    })
    .option('latency-budget-ms', {
      type: 'string',
      describe: `the latency budget (--wal-latency-budget-ms, latency.budget.ms) the sealing policy seals objects by: linger = budget - store latency; with --mode=wal it replaces --linger-ms`,
      defaultDescription: `${SIDECAR_DEFAULTS['wal-latency-budget-ms']}, the sidecar's (--mode=wal: unset, --linger-ms)`,
    })
    .option('linger-ms', {
      type: 'string',
      describe:
        '--mode=wal without --latency-budget-ms: the sidecar seals an object at most this long after its first batch (--wal-linger-ms)',
      // A default sidecar's: the default budget's linger.
      default: String(WAL_DEFAULTS.lingerMs),
    })
    .option('object-bytes', {
      type: 'string',
      describe: 'target object size (--wal-target-bytes): 400000, 400KB, 1MiB',
      default: String(WAL_DEFAULTS.objectBytes),
    })
    .option('brokers', {
      type: 'string',
      describe: 'leader brokers the throughput is spread over (each sidecar seals its own objects)',
      default: '1',
    })
    .option('retention', {
      type: 'string',
      describe: 'how long WAL objects are kept before wal gc or a lifecycle rule deletes them',
      default: '1h',
    })
    .option('residual', {
      type: 'string',
      describe:
        'fraction of stock replication bytes that still cross zones (references, headers); measured 0.0114',
      default: '0.0114',
    })
    .option('proxy-cpu-seconds-per-gb', {
      type: 'string',
      describe: 'sidecar CPU per produced GB with the sidecars in the path, WAL or not (measured 35.6)',
      default: String(DEFAULT_CPU.proxySecondsPerGb),
    })
    .option('wal-cpu-seconds-per-gb', {
      type: 'string',
      describe: 'sidecar CPU per GB the WAL path adds: upload, GETs, fills (measured 137.1)',
      default: String(DEFAULT_CPU.walSecondsPerGb),
    })
    .option('prices', {
      type: 'string',
      describe: 'JSON file overriding any price of the built-in table (docs/cost.md)',
    })
    .option('json', { type: 'boolean', describe: 'print the result as JSON', default: false });
}

export interface ParsedCost {
  inputs: CostInputs;
  prices: PriceTable;
  /** --mode: auto (the sealing policy decides) or wal (every batch through the WAL). */
  mode: 'auto' | 'wal';
  /**
   * What the sealing policy settles on per broker at the budget (the flag, or the sidecar's
   * default with --mode=auto); undefined for --mode=wal without --latency-budget-ms.
   */
  policy:
    | { budgetMs: number; defaultBudget: boolean; state: SteadyState; walAtBytes: number | undefined }
    | undefined;
  /** --mode=auto: the same rate and budget with every batch forced through the WAL (mode=wal). */
  forcedWal: CostInputs | undefined;
  json: boolean;
}

function parsePricesFlag(raw: Record<string, unknown>, errors: FlagErrors): PriceTable {
  if (!present(raw.prices)) return DEFAULT_PRICES;
  const file = String(raw.prices);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    errors.add('prices', `cannot read ${file}: ${(error as Error).message}`);
    return DEFAULT_PRICES;
  }
  const merged = mergePrices(json, file);
  if ('errors' in merged) {
    for (const e of merged.errors) errors.add('prices', e);
    return DEFAULT_PRICES;
  }
  return merged.prices;
}

export function parseCostFlags(raw: Record<string, unknown>): { parsed: ParsedCost } | { errors: string[] } {
  const errors = new FlagErrors();
  const mbps = flag(raw, 'throughput-mbps', errors, (t) => parseNumber(t, 0, 1e9));
  const modeText = flagText(raw, 'mode') ?? 'auto';
  if (modeText !== 'auto' && modeText !== 'wal')
    errors.add('mode', `'${modeText}' is not auto or wal (a mode=inline topic costs what stock does)`);
  const mode = modeText === 'wal' ? 'wal' : 'auto';
  if (!present(raw['throughput-mbps'])) errors.add('throughput-mbps', 'is required (megabytes per second)');
  const rf = flag(raw, 'rf', errors, (t) => parseNumber(t, 1, 32, true));
  const zones = flag(raw, 'zones', errors, (t) => parseNumber(t, 1, 32, true));
  const lingerMs = flag(raw, 'linger-ms', errors, (t) => parseNumber(t, 0, 60_000));
  const budgetMs = flag(raw, 'latency-budget-ms', errors, (t) =>
    parseNumber(t, LATENCY_BUDGET_LIMITS.min, LATENCY_BUDGET_LIMITS.max, true),
  );
  const objectBytes = flag(raw, 'object-bytes', errors, parseBytes);
  const brokers = flag(raw, 'brokers', errors, (t) => parseNumber(t, 1, 100_000, true));
  const retentionMs = flag(raw, 'retention', errors, parseDuration);
  const residual = flag(raw, 'residual', errors, (t) => parseNumber(t, 0, 1));
  const proxyCpu = flag(raw, 'proxy-cpu-seconds-per-gb', errors, (t) => parseNumber(t, 0, 1e6));
  const walCpu = flag(raw, 'wal-cpu-seconds-per-gb', errors, (t) => parseNumber(t, 0, 1e6));
  const prices = parsePricesFlag(raw, errors);
  if (errors.list.length > 0) return { errors: errors.list };
  const inputs: CostInputs = {
    throughputBytesPerSec: mbps! * 1e6,
    replicationFactor: rf!,
    zones: zones!,
    lingerMs: lingerMs!,
    objectBytes: objectBytes!,
    brokers: brokers!,
    retentionSec: retentionMs! / 1000,
    residualFraction: residual!,
    proxyCpuSecondsPerGb: proxyCpu!,
    walCpuSecondsPerGb: walCpu!,
  };
  let policy: ParsedCost['policy'];
  let forcedWal: CostInputs | undefined;
  // A sidecar's topics run mode=auto at its latency budget unless told otherwise: price that by
  // default (issue #27: the old default, mode=wal at a 10 ms linger, priced a sidecar nobody runs).
  const budget =
    budgetMs ?? (mode === 'auto' ? Number(SIDECAR_DEFAULTS['wal-latency-budget-ms']) : undefined);
  if (budget !== undefined) {
    const economics = objectEconomics(prices, inputs, {
      retentionSec: inputs.retentionSec,
      residualFraction: inputs.residualFraction,
      walCpuSecondsPerGb: inputs.walCpuSecondsPerGb,
    });
    const state = steadyState(economics, budget, inputs.throughputBytesPerSec / inputs.brokers, {
      maxObjectBytes: inputs.objectBytes,
    });
    inputs.lingerMs = state.lingerMs;
    const breakEven = economics.breakEvenObjectBytes;
    const walAtBytes =
      breakEven === undefined ? undefined : breakEven * SEALING_DEFAULTS.walAtBreakEvenMultiple;
    policy = { budgetMs: budget, defaultBudget: budgetMs === undefined, state, walAtBytes };
    if (mode === 'auto') {
      inputs.mode = state.mode;
      forcedWal = { ...inputs, mode: 'wal' };
    } else {
      inputs.mode = 'wal';
    }
  }
  return { parsed: { inputs, prices, mode, policy, forcedWal, json: raw.json === true } };
}

export interface ParsedMeasured {
  sources: string[];
  durationSec: number | undefined;
  layout: ClusterLayout;
  retentionSec: number;
  residualFraction: number;
  prices: PriceTable;
  json: boolean;
}

export function parseMeasuredFlags(
  raw: Record<string, unknown>,
): { parsed: ParsedMeasured } | { errors: string[] } {
  const errors = new FlagErrors();
  if (present(raw['throughput-mbps'])) {
    errors.add('from-metrics', 'prices what was measured; leave out --throughput-mbps (a hypothetical rate)');
  }
  const durationMs = flag(raw, 'duration', errors, parseDuration);
  const rf = flag(raw, 'rf', errors, (t) => parseNumber(t, 1, 32, true));
  const zones = flag(raw, 'zones', errors, (t) => parseNumber(t, 1, 32, true));
  const retentionMs = flag(raw, 'retention', errors, parseDuration);
  const residual = flag(raw, 'residual', errors, (t) => parseNumber(t, 0, 1));
  const prices = parsePricesFlag(raw, errors);
  if (errors.list.length > 0) return { errors: errors.list };
  const from = raw['from-metrics'];
  return {
    parsed: {
      sources: (Array.isArray(from) ? from : [from]).map(String),
      durationSec: durationMs === undefined ? undefined : durationMs / 1000,
      layout: { replicationFactor: rf!, zones: zones! },
      retentionSec: retentionMs! / 1000,
      residualFraction: residual!,
      prices,
      json: raw.json === true,
    },
  };
}

/** Reads every source: http(s) URLs are fetched, anything else is a file; JSON counters or Prometheus text. */
export async function loadCounters(
  sources: string[],
  durationSec: number | undefined,
): Promise<{ counters: MeasuredCounters } | { errors: string[] }> {
  const texts: Array<{ origin: string; text: string }> = [];
  const errors: string[] = [];
  for (const origin of sources) {
    try {
      if (/^https?:\/\//.test(origin)) {
        const response = await fetch(origin, { signal: AbortSignal.timeout(10_000) });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        texts.push({ origin, text: await response.text() });
      } else {
        texts.push({ origin, text: readFileSync(origin, 'utf8') });
      }
    } catch (error) {
      errors.push(`${origin}: cannot read: ${(error as Error).message}`);
    }
  }
  if (errors.length > 0) return { errors };
  const json = texts.filter((t) => t.text.trimStart().startsWith('{'));
  if (json.length > 0) {
    if (texts.length > 1) return { errors: ['a JSON counters file is the whole run: give it alone'] };
    const { origin, text } = json[0]!;
    try {
      return countersFromJson(JSON.parse(text), origin);
    } catch (error) {
      return { errors: [`${origin}: not JSON: ${(error as Error).message}`] };
    }
  }
  return countersFromScrapes(texts, durationSec);
}

export async function runCost(raw: Record<string, unknown>): Promise<void> {
  const fail = (list: string[]) => {
    const errors = new FlagErrors();
    errors.list.push(...list);
    exitOnFlagErrors(errors, 'cost');
  };
  if (present(raw['from-metrics'])) {
    const result = parseMeasuredFlags(raw);
    if ('errors' in result) return fail(result.errors);
    const { sources, durationSec, layout, prices, json } = result.parsed;
    const loaded = await loadCounters(sources, durationSec);
    if ('errors' in loaded) return fail(loaded.errors.map((e) => `--from-metrics: ${e}`));
    const cost = priceMeasured(loaded.counters, prices, layout, {
      retentionSec: result.parsed.retentionSec,
      residualFraction: result.parsed.residualFraction,
    });
    process.stdout.write(
      json
        ? `${JSON.stringify({ counters: loaded.counters, layout, prices, ...cost }, null, 2)}\n`
        : formatMeasured(sources.length, loaded.counters, layout, prices, cost),
    );
    return;
  }
  const result = parseCostFlags(raw);
  if ('errors' in result) return fail(result.errors);
  const { inputs, prices, mode, policy, forcedWal, json } = result.parsed;
  const cost = computeCost(inputs, prices);
  const forced = forcedWal && computeCost(forcedWal, prices);
  process.stdout.write(
    json
      ? `${JSON.stringify({ mode, inputs, prices, policy, ...cost, ...(forced ? { forcedWal: forced } : {}) }, null, 2)}\n`
      : formatCost(inputs, prices, cost, policy, forced),
  );
}

const usd = (n: number) =>
  n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 }).padStart(12);
const qty = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: n < 100 ? 2 : 0 });
const line = (item: string, quantity: string, amount: number) =>
  `  ${item.padEnd(52)}${quantity.padStart(22)}${usd(amount)}\n`;

export function formatCost(
  inputs: CostInputs,
  prices: PriceTable,
  cost: CostResult,
  policy?: ParsedCost['policy'],
  /** --mode=auto: what forcing every batch through the WAL (mode=wal) would cost instead. */
  forced?: CostResult,
): string {
  const mbps = (bps: number) => `${(bps / 1e6).toLocaleString('en-US', { maximumFractionDigits: 2 })} MB/s`;
  let out = '';
  out += `${mbps(inputs.throughputBytesPerSec)} produced (${qty(cost.producedGbPerMonth)} GB/month), RF ${inputs.replicationFactor} over ${inputs.zones} zone(s): ${cost.crossZoneFollowers} of ${cost.followers} followers in another zone\n`;
  if (policy) {
    const walAt = policy.walAtBytes === undefined ? 'never' : `${qty(Math.ceil(policy.walAtBytes))} B`;
    out += `latency budget ${policy.budgetMs} ms${policy.defaultBudget ? " (the sidecar's default)" : ''} per broker: linger ${policy.state.lingerMs} ms, objects of ${qty(Math.round(policy.state.objectBytes))} B → ${policy.state.mode === 'wal' ? 'through the WAL' : 'INLINE (stock replication)'} (the WAL from ${walAt})\n`;
  }
  out +=
    inputs.mode === 'inline'
      ? `${inputs.brokers} broker(s); no objects\n`
      : `${inputs.brokers} broker(s), linger ${inputs.lingerMs} ms, target ${qty(inputs.objectBytes)} B: objects of ${qty(Math.round(cost.effectiveObjectBytes))} B, ${qty(cost.objectsPerSecond)}/s; retention ${qty(inputs.retentionSec)} s\n`;
  out += `prices (${prices.region}, ${prices.storeClass}): ${prices.source}\n\n`;
  out += `${'USD per 30-day month'.padEnd(76)}${'$'.padStart(12)}\n`;
  out += 'stock Kafka, cross-zone replication\n';
  for (const l of cost.stock) out += line(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += line('total', '', cost.stockUsd);
  out += `walproxy, replication through ${prices.storeClass}\n`;
  for (const l of cost.walproxy) out += line(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += line('total', '', cost.walproxyUsd);
  out += 'relaying, as any proxy in front of the broker (not in the saving)\n';
  for (const l of cost.proxy) out += line(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += line('walproxy total with relaying', '', cost.totalUsd);
  const pct = (n: number) => (cost.stockUsd > 0 ? ` (${((n / cost.stockUsd) * 100).toFixed(1)} %)` : '');
  out += `\n${cost.savedUsd >= 0 ? 'saved' : 'EXTRA cost'} per month: $${usd(Math.abs(cost.savedUsd)).trim()}${pct(cost.savedUsd)}`;
  out += `; net of relaying: $${usd(cost.netSavedUsd).trim()}${pct(cost.netSavedUsd)}\n`;
  if (forced) {
    const objects = `linger ${inputs.lingerMs} ms, objects of ${qty(Math.round(forced.effectiveObjectBytes))} B`;
    out += `forced through the WAL (mode=wal, ${objects}): walproxy $${usd(forced.walproxyUsd).trim()}, ${forced.savedUsd >= 0 ? 'saved' : 'EXTRA cost'} $${usd(Math.abs(forced.savedUsd)).trim()}${pct(forced.savedUsd)}\n`;
  }
  out +=
    cost.breakEvenBytesPerSec === undefined
      ? 'break-even throughput: none; with these objects and prices walproxy never costs less\n'
      : `break-even throughput: ${mbps(cost.breakEvenBytesPerSec)} (below it walproxy costs more than it saves)\n`;
  out +=
    cost.breakEvenObjectBytes === undefined
      ? 'break-even object size: none; per byte the store costs more than cross-zone transfer\n'
      : `break-even object size: ${qty(Math.ceil(cost.breakEvenObjectBytes))} B (a smaller object costs more than it saves)\n`;
  return out;
}

export function formatMeasured(
  sidecars: number,
  counters: MeasuredCounters,
  layout: ClusterLayout,
  prices: PriceTable,
  cost: MeasuredCost,
): string {
  const row = (item: string, quantity: string, run: number) =>
    `  ${item.padEnd(52)}${quantity.padStart(22)}${usd(run)}${usd(cost.durationSec > 0 ? (run * SECONDS_PER_MONTH) / cost.durationSec : 0)}\n`;
  const mb = (bytes: number) => `${qty(bytes / 1e6)} MB`;
  let out = '';
  out += `measured: ${sidecars} source(s) over ${qty(cost.durationSec)} s; RF ${layout.replicationFactor} over ${layout.zones} zone(s): ${cost.crossZoneFollowers} of ${layout.replicationFactor - 1} followers in another zone\n`;
  out += `replicated ${mb(counters.referencedBytes)} as references, ${mb(counters.inlineBytes)} inline; ${qty(counters.puts)} PUTs (${mb(counters.bytesUploaded)}), ${qty(counters.gets)} GETs (${mb(counters.bytesRead)})\n`;
  out += `prices (${prices.region}, ${prices.storeClass}): ${prices.source}\n\n`;
  out += `${'USD'.padEnd(76)}${'this run'.padStart(12)}${'per month'.padStart(12)}\n`;
  out += 'stock Kafka, cross-zone replication of the same bytes\n';
  for (const l of cost.stock) out += row(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += row('total', '', cost.stockUsd);
  out += 'walproxy, as measured\n';
  for (const l of cost.walproxy) out += row(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += row('total', '', cost.walproxyUsd);
  out += 'relaying, as any proxy in front of the broker (not in the saving)\n';
  for (const l of cost.proxy) out += row(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += row('walproxy total with relaying', '', cost.totalUsd);
  out += `\n${cost.savedUsd >= 0 ? 'saved' : 'EXTRA cost'}: $${usd(Math.abs(cost.savedUsd)).trim()} this run, $${usd(Math.abs(cost.perMonth.savedUsd)).trim()} per month at its rate (${(cost.savedFraction * 100).toFixed(1)} % of stock); net of relaying $${usd(cost.perMonth.netSavedUsd).trim()} per month\n`;
  if (!cost.crossZoneMeasured) {
    out += `cross-zone bytes estimated: the inline bytes and --residual of the referenced ones (no kernel count given)\n`;
  }
  if (!cost.cpuMeasured) {
    out += 'sidecar CPU NOT MEASURED (not in every source): the walproxy total leaves it out\n';
  }
  return out;
}
