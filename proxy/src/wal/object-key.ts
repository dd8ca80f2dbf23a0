// WAL object keys (docs/wal-writer.md, "Object keys"):
//
//   <prefix><yyyy>/<mm>/<dd>/<hh>/<brokerId>/<ms, 13 digits>-<sequence, 8 hex>-<random, 12 hex>.wal
//
// The UTC hour buckets let `list` walk one hour at a time and let lifecycle rules and `wal gc`
// expire whole hours; the id sorts by creation time (the zero-padded timestamp first). Uniqueness
// does not rest on the clock: the per-process sequence separates objects of one process within a
// millisecond, and the random suffix separates two processes with the same broker id (a restarted
// sidecar, or two started by mistake), whose sequences both start at 0.
import { randomBytes } from 'node:crypto';
import { assertValidPrefix } from '../store/index.js';

/** Date.now() has 13 digits until the year 2286; padding keeps lexical order equal to numeric order. */
const TIMESTAMP_DIGITS = 13;
const SEQUENCE_HEX_DIGITS = 8;
const RANDOM_BYTES = 6;
const SEQUENCE_MODULUS = 16 ** SEQUENCE_HEX_DIGITS;

/**
 * Shared by every writer in the process, so two writers with the same broker id and prefix (tests,
 * or a sidecar that recreates its writer) cannot repeat an id either. Wrapping after 2^32 objects is
 * harmless: the timestamp orders keys, the sequence only has to differ within one millisecond.
 */
let sequence = 0;

const KEY =
  /^(?<prefix>.*?)(?<year>\d{4})\/(?<month>\d{2})\/(?<day>\d{2})\/(?<hour>\d{2})\/(?<brokerId>\d+)\/(?<createdAtMs>\d{13})-(?<sequence>[0-9a-f]{8})-(?<random>[0-9a-f]{12})\.wal$/;

export interface WalObjectKeyParts {
  /** The writer's key prefix, `''` or ending in `/`. */
  prefix: string;
  brokerId: number;
  /** The writer's clock when it opened the object; equals the WAL header's creation time. */
  createdAtMs: number;
  sequence: number;
  /** 12 hex digits. */
  random: string;
}

/** Checks a key prefix: empty, or a valid store prefix that ends with `/` (so the year is its own segment). */
export function assertValidKeyPrefix(prefix: string): void {
  if (prefix !== '' && !prefix.endsWith('/')) {
    throw new RangeError(`WAL key prefix ${JSON.stringify(prefix)} must be empty or end with "/"`);
  }
  assertValidPrefix(prefix);
}

/** A new, never before generated key for an object a writer opens at `nowMs`. */
export function newWalObjectKey(prefix: string, brokerId: number, nowMs: number): string {
  const seq = sequence;
  sequence = (sequence + 1) % SEQUENCE_MODULUS;
  return `${walHourPrefix(prefix, nowMs)}${brokerId}/${String(nowMs).padStart(TIMESTAMP_DIGITS, '0')}-${seq
    .toString(16)
    .padStart(SEQUENCE_HEX_DIGITS, '0')}-${randomBytes(RANDOM_BYTES).toString('hex')}.wal`;
}

/** `<prefix><yyyy>/<mm>/<dd>/<hh>/`: the list prefix of every writer's objects opened in that UTC hour. */
export function walHourPrefix(prefix: string, atMs: number): string {
  const t = new Date(atMs);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${prefix}${t.getUTCFullYear()}/${two(t.getUTCMonth() + 1)}/${two(t.getUTCDate())}/${two(t.getUTCHours())}/`;
}

/** The parts of a key this module made, or undefined for any other key (probes, foreign files). */
export function parseWalObjectKey(key: string): WalObjectKeyParts | undefined {
  const g = KEY.exec(key)?.groups;
  if (g === undefined) return undefined;
  const parts = {
    prefix: g.prefix!,
    brokerId: Number(g.brokerId),
    createdAtMs: Number(g.createdAtMs),
    sequence: Number.parseInt(g.sequence!, 16),
    random: g.random!,
  };
  // The bucket must be the one the timestamp falls in, or the key was not made here.
  const bucket = `${parts.prefix}${g.year}/${g.month}/${g.day}/${g.hour}/`;
  return walHourPrefix(parts.prefix, parts.createdAtMs) === bucket ? parts : undefined;
}
