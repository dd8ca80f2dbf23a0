// Flag parsing shared by the operator commands (`walproxy wal …`, `walproxy cost`): every bad value
// becomes one line naming its flag, all reported at once, exit code 2 — the sidecar's style.
import type { Argv } from 'yargs';
import type { ObjectStoreOptions } from '../store/index.js';
import { parseS3Flags, s3FlagOptions } from '../store/s3-options.js';

export const EXIT_PROBLEMS = 1;
export const EXIT_CONFIG_ERROR = 2;

/** Collects `--flag: reason` lines. */
export class FlagErrors {
  readonly list: string[] = [];
  add(flag: string, message: string): void {
    this.list.push(`--${flag}: ${message}`);
  }
  /** Writes every error as `walproxy <command>: --flag: reason` and exits 2 when there is any. */
  exitIfAny(command: string): void {
    if (this.list.length === 0) return;
    for (const line of this.list) process.stderr.write(`walproxy ${command}: ${line}\n`);
    process.exit(EXIT_CONFIG_ERROR);
  }
}

export function present(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `500ms`, `30s`, `15m`, `2h`, `7d`, or combinations like `1h30m`; milliseconds, or an error. */
export function parseDuration(text: string): number | string {
  const trimmed = text.trim();
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(trimmed); m !== null; m = re.exec(trimmed)) {
    total += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    matched = re.lastIndex;
  }
  if (trimmed === '' || matched !== trimmed.length) {
    return `'${text}' is not a duration (a number with a unit: ms, s, m, h, d; e.g. 90s, 2h, 1h30m)`;
  }
  return Math.round(total);
}

/**
 * A point in time: an ISO 8601 date-time (`2026-01-02T03:04:05Z`), milliseconds since the epoch,
 * or a duration meaning that long before `nowMs` (`2h` = two hours ago).
 */
export function parseTime(text: string, nowMs: number): number | string {
  const trimmed = text.trim();
  if (/^\d{10,}$/.test(trimmed)) return Number(trimmed);
  const duration = parseDuration(trimmed);
  if (typeof duration === 'number') return nowMs - duration;
  if (/^\d{4}-\d{2}-\d{2}/.test(trimmed)) {
    const ms = Date.parse(trimmed);
    if (!Number.isNaN(ms)) return ms;
  }
  return `'${text}' is not a time (ISO 8601 like 2026-01-02T03:04:05Z, epoch milliseconds, or a duration ago like 2h)`;
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
};

/** Bytes: `400000`, `400KB`, `1MiB` (KB/MB/GB decimal, KiB/MiB/GiB binary). */
export function parseBytes(text: string): number | string {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) return `'${text}' is not a size in bytes (e.g. 400000, 400KB, 1MiB)`;
  const bytes = Math.round(Number(m[1]) * unit);
  return bytes >= 1 ? bytes : `'${text}' must be at least 1 byte`;
}

/** A finite number within [min, max]. */
export function parseNumber(text: string, min: number, max: number, integer = false): number | string {
  const value = Number(String(text).trim());
  const what = integer ? 'a whole number' : 'a number';
  if (String(text).trim() === '' || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    return `'${text}' is not ${what} from ${min} to ${max}`;
  }
  if (value < min || value > max) return `'${text}' is not ${what} from ${min} to ${max}`;
  return value;
}

export function parseBool(text: string): boolean | string {
  const t = String(text).trim().toLowerCase();
  if (t === 'true') return true;
  if (t === 'false') return false;
  return `'${text}' is not true or false`;
}

/** Reads one flag through `parse`, recording the error under its name. */
export function flag<T>(
  raw: Record<string, unknown>,
  name: string,
  errors: FlagErrors,
  parse: (text: string) => T | string,
): T | undefined {
  const value = raw[name];
  if (!present(value)) return undefined;
  const text = Array.isArray(value) ? String(value.at(-1)) : String(value);
  const parsed = parse(text);
  if (typeof parsed === 'string') {
    errors.add(name, parsed);
    return undefined;
  }
  return parsed;
}

/** The object store flags, named as the sidecar names them (`--wal-store-url` is `--store-url` here). */
export function storeOptions<T>(yargs: Argv<T>, withPrefix = true): Argv<T> {
  const withStore = s3FlagOptions(yargs).option('store-url', {
    type: 'string',
    describe: 'where the WAL objects are, as the sidecars were given it: s3://bucket/prefix or file:///dir',
  });
  if (!withPrefix) return withStore;
  return withStore.option('prefix', {
    type: 'string',
    describe: "only keys starting with this (relative to the store URL), e.g. '2026/01/02/'",
    default: '',
  });
}

export interface StoreFlags {
  url: string;
  options: ObjectStoreOptions;
  prefix: string;
}

/** Credentials come from the AWS SDK's default chain; they are never flags. */
export function parseStoreFlags(raw: Record<string, unknown>, errors: FlagErrors): StoreFlags | undefined {
  const url = present(raw['store-url']) ? String(raw['store-url']) : undefined;
  if (url === undefined) errors.add('store-url', 'is required (s3://bucket/prefix or file:///dir)');
  else if (!/^(s3|file):\/\//.test(url))
    errors.add('store-url', `'${url}' is not s3://bucket/prefix or file:///dir`);
  const options = parseS3Flags(raw, errors);
  const prefix = present(raw.prefix) ? String(raw.prefix) : '';
  if (prefix.startsWith('/') || prefix.includes('//'))
    errors.add('prefix', `'${prefix}' must not start with "/" or contain "//"`);
  return url === undefined ? undefined : { url, options, prefix };
}

/** Writes a progress line on a terminal only (stderr), at most every 100 ms; silent when piped. */
export class Progress {
  private last = 0;
  private shown = false;
  constructor(private readonly enabled = process.stderr.isTTY === true) {}
  update(text: string): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (now - this.last < 100) return;
    this.last = now;
    this.shown = true;
    process.stderr.write(`\r\x1b[K${text}`);
  }
  done(): void {
    if (this.shown) process.stderr.write('\r\x1b[K');
    this.shown = false;
  }
}
