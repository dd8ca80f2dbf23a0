// The one floor every flag parser stands on (the sidecar's option groups in this folder and the
// operator commands in cli/): one error sink, and the value parsers — lists, host:port, broker-id
// maps, address templates, numbers, bytes and durations with units, booleans — that read a value
// the same way and refuse it with the same words wherever the flag is.
import type { HostPort } from '../net/proxy-listener.js';

/** How flag parsers collect errors: one line per bad setting, named by flag. */
export interface FlagErrorSink {
  add(flag: string, message: string): void;
}

/** Collects `--flag: reason` lines, so an operator sees every bad setting of one run at once. */
export class FlagErrors implements FlagErrorSink {
  readonly list: string[] = [];
  add(flag: string, message: string): void {
    // Files shared by two settings (the egress inherits the replication ingress's) report once.
    const line = `--${flag}: ${message}`;
    if (!this.list.includes(line)) this.list.push(line);
  }
}

/** Set: a flag yargs left out, or set to nothing (`--x=`), counts as unset everywhere. */
export function present(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

/** A flag's value as text, undefined when unset; given several times, the last one wins. */
export function flagText(raw: Record<string, unknown>, name: string): string | undefined {
  const value = raw[name];
  if (!present(value)) return undefined;
  return Array.isArray(value) ? String(value.at(-1)) : String(value);
}

export function parseHostPort(text: string): HostPort | string {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s]+):(\d+)$/.exec(text.trim());
  if (!match) return `'${text}' is not host:port`;
  const port = Number(match[2]);
  if (port < 1 || port > 65_535) return `port ${port} in '${text}' is outside 1-65535`;
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
}

/** A repeatable, comma-separable flag's values, trimmed, empty ones dropped. */
export function list(value: unknown): string[] {
  if (!present(value)) return [];
  const items = Array.isArray(value) ? value : [value];
  return items
    .flatMap((item) => String(item).split(','))
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** `<broker-id>=<host:port>` entries of `flag`, by broker id; a bad entry is reported and skipped. */
export function brokerAddresses(
  entries: string[],
  flag: string,
  errors: FlagErrorSink,
): Map<number, HostPort> {
  const addresses = new Map<number, HostPort>();
  for (const entry of entries) {
    const match = /^(\d+)=(.+)$/.exec(entry);
    const address = match ? parseHostPort(match[2]!) : undefined;
    if (!match || typeof address !== 'object') {
      errors.add(flag, `'${entry}' is not <broker-id>=<host:port>`);
      continue;
    }
    addresses.set(Number(match[1]), address);
  }
  return addresses;
}

/** A `host:port` template with `{id}` for the broker id (`example` shows one); undefined when unset. */
export function addressTemplate(
  raw: Record<string, unknown>,
  flag: string,
  example: string,
  errors: FlagErrorSink,
): string | undefined {
  const template = flagText(raw, flag);
  if (
    template !== undefined &&
    (!template.includes('{id}') || typeof parseHostPort(template.replaceAll('{id}', '0')) === 'string')
  ) {
    errors.add(flag, `'${template}' must be host:port containing {id}, e.g. ${example}`);
  }
  return template;
}

/** Broker ids of a list flag; a value that is not one is reported and skipped. */
export function brokerIds(entries: string[], flag: string, errors: FlagErrorSink): number[] {
  const ids: number[] = [];
  for (const id of entries) {
    if (!/^\d+$/.test(id)) errors.add(flag, `'${id}' is not a broker id`);
    else ids.push(Number(id));
  }
  return ids;
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

/**
 * `true` or `false`, exactly as the help says (a YAML file's booleans arrive as the same words, a
 * bare `--x` as true: boolOption).
 */
export function parseBool(text: string): boolean | string {
  if (text === 'true') return true;
  if (text === 'false') return false;
  return `'${text}' is not true or false`;
}

/**
 * The yargs declaration of a true/false flag: bare `--x` is true; `--x=true`, `--x false`,
 * `--no-x`, WALPROXY_X=false and a YAML `x: true` read as they say; any other value (`--x=yes`,
 * `--x=1`) is refused by parseBool, naming the flag. Declared without a yargs type on purpose:
 * yargs' `boolean` reads `--x=yes` as false without a word, and its `string` reads a bare `--x` as
 * unset. `defaultValue` is shown in --help only: the parsers apply their own defaults.
 */
export function boolOption(describe: string, defaultValue?: boolean | 'true' | 'false') {
  return { describe, ...(defaultValue !== undefined ? { defaultDescription: String(defaultValue) } : {}) };
}

/** Reads one flag through `parse`, recording the error under its name. */
export function flag<T>(
  raw: Record<string, unknown>,
  name: string,
  errors: FlagErrorSink,
  parse: (text: string) => T | string,
): T | undefined {
  const text = flagText(raw, name);
  if (text === undefined) return undefined;
  const parsed = parse(text);
  if (typeof parsed === 'string') {
    errors.add(name, parsed);
    return undefined;
  }
  return parsed;
}

/** A true/false flag; undefined when unset. */
export function boolFlag(
  raw: Record<string, unknown>,
  name: string,
  errors: FlagErrorSink,
): boolean | undefined {
  return flag(raw, name, errors, parseBool);
}

/** A host:port flag; undefined when unset. */
export function hostPortFlag(
  raw: Record<string, unknown>,
  name: string,
  errors: FlagErrorSink,
): HostPort | undefined {
  return flag(raw, name, errors, parseHostPort);
}
