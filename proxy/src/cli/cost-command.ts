import { readFileSync } from 'node:fs';
import type { Argv } from 'yargs';
import { type CostInputs, type CostResult, computeCost } from '../cost/model.js';
import { DEFAULT_PRICES, mergePrices, type PriceTable } from '../cost/prices.js';
import { FlagErrors, flag, parseBytes, parseDuration, parseNumber, present } from '../tools/options.js';

export function costOptions<T>(yargs: Argv<T>): Argv<T> {
  return yargs
    .option('throughput-mbps', {
      type: 'string',
      describe: 'produced megabytes (10^6 bytes) per second into WAL topics, all brokers together',
    })
    .option('rf', { type: 'string', describe: 'replication factor of the topics', default: '3' })
    .option('zones', {
      type: 'string',
      describe: 'availability zones the replicas spread over',
      default: '3',
    })
    .option('linger-ms', {
      type: 'string',
      describe: 'the sidecar seals an object at most this long after its first batch (--wal-linger-ms)',
      default: '10',
    })
    .option('object-bytes', {
      type: 'string',
      describe: 'target object size (--wal-target-bytes): 400000, 400KB, 1MiB',
      default: '400000',
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
    .option('prices', {
      type: 'string',
      describe: 'JSON file overriding any price of the built-in table (docs/cost.md)',
    })
    .option('json', { type: 'boolean', describe: 'print the result as JSON', default: false });
}

export interface ParsedCost {
  inputs: CostInputs;
  prices: PriceTable;
  json: boolean;
}

export function parseCostFlags(raw: Record<string, unknown>): { parsed: ParsedCost } | { errors: string[] } {
  const errors = new FlagErrors();
  const mbps = flag(raw, 'throughput-mbps', errors, (t) => parseNumber(t, 0, 1e9));
  if (!present(raw['throughput-mbps'])) errors.add('throughput-mbps', 'is required (megabytes per second)');
  const rf = flag(raw, 'rf', errors, (t) => parseNumber(t, 1, 32, true));
  const zones = flag(raw, 'zones', errors, (t) => parseNumber(t, 1, 32, true));
  const lingerMs = flag(raw, 'linger-ms', errors, (t) => parseNumber(t, 0, 60_000));
  const objectBytes = flag(raw, 'object-bytes', errors, parseBytes);
  const brokers = flag(raw, 'brokers', errors, (t) => parseNumber(t, 1, 100_000, true));
  const retentionMs = flag(raw, 'retention', errors, parseDuration);
  const residual = flag(raw, 'residual', errors, (t) => parseNumber(t, 0, 1));
  let prices: PriceTable = DEFAULT_PRICES;
  if (present(raw.prices)) {
    const file = String(raw.prices);
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(file, 'utf8'));
    } catch (error) {
      errors.add('prices', `cannot read ${file}: ${(error as Error).message}`);
    }
    if (json !== undefined) {
      const merged = mergePrices(json, file);
      if ('errors' in merged) for (const e of merged.errors) errors.add('prices', e);
      else prices = merged.prices;
    }
  }
  if (errors.list.length > 0) return { errors: errors.list };
  return {
    parsed: {
      inputs: {
        throughputBytesPerSec: mbps! * 1e6,
        replicationFactor: rf!,
        zones: zones!,
        lingerMs: lingerMs!,
        objectBytes: objectBytes!,
        brokers: brokers!,
        retentionSec: retentionMs! / 1000,
        residualFraction: residual!,
      },
      prices,
      json: raw.json === true,
    },
  };
}

export function runCost(raw: Record<string, unknown>): void {
  const result = parseCostFlags(raw);
  if ('errors' in result) {
    const errors = new FlagErrors();
    errors.list.push(...result.errors);
    errors.exitIfAny('cost');
    return;
  }
  const { inputs, prices, json } = result.parsed;
  const cost = computeCost(inputs, prices);
  process.stdout.write(
    json ? `${JSON.stringify({ inputs, prices, ...cost }, null, 2)}\n` : formatCost(inputs, prices, cost),
  );
}

const usd = (n: number) =>
  n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 }).padStart(12);
const qty = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: n < 100 ? 2 : 0 });

export function formatCost(inputs: CostInputs, prices: PriceTable, cost: CostResult): string {
  const mbps = (bps: number) => `${(bps / 1e6).toLocaleString('en-US', { maximumFractionDigits: 2 })} MB/s`;
  const line = (item: string, quantity: string, amount: number) =>
    `  ${item.padEnd(52)}${quantity.padStart(22)}${usd(amount)}\n`;
  let out = '';
  out += `${mbps(inputs.throughputBytesPerSec)} produced (${qty(cost.producedGbPerMonth)} GB/month), RF ${inputs.replicationFactor} over ${inputs.zones} zone(s): ${cost.crossZoneFollowers} of ${cost.followers} followers in another zone\n`;
  out += `${inputs.brokers} broker(s), linger ${inputs.lingerMs} ms, target ${qty(inputs.objectBytes)} B: objects of ${qty(Math.round(cost.effectiveObjectBytes))} B, ${qty(cost.objectsPerSecond)}/s; retention ${qty(inputs.retentionSec)} s\n`;
  out += `prices: ${prices.source}\n\n`;
  out += `${'USD per 30-day month'.padEnd(76)}${'$'.padStart(12)}\n`;
  out += 'stock Kafka, cross-zone replication\n';
  for (const l of cost.stock) out += line(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += line('total', '', cost.stockUsd);
  out += 'walproxy, replication through S3 Express One Zone\n';
  for (const l of cost.walproxy) out += line(l.item, `${qty(l.quantity)} ${l.unit}`, l.usd);
  out += line('total', '', cost.walproxyUsd);
  const pct = cost.stockUsd > 0 ? ` (${((cost.savedUsd / cost.stockUsd) * 100).toFixed(1)} %)` : '';
  out += `\n${cost.savedUsd >= 0 ? 'saved' : 'EXTRA cost'} per month: $${usd(Math.abs(cost.savedUsd)).trim()}${pct}\n`;
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
