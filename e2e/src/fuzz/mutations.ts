// Seeded, deterministic mutations of Kafka frames and record batches, for the fuzz tests of the
// filters (proxy/test/filters/*.fuzz.test.ts) and against a real broker (e2e/test/fuzz-produce.test.ts).
//
// Every case draws from its own PRNG, seeded from WALPROXY_FUZZ_SEED and the case index, so a
// failure names both and reruns alone:
//   WALPROXY_FUZZ_SEED=<seed> WALPROXY_FUZZ_CASE=<index> npx vitest run --project unit <file>
// WALPROXY_FUZZ_CASES multiplies every file's case count (e.g. 10 for a long run).
import { CRC_START, crc32c, encodeFrame } from '@walproxy/shared';

/** The seed every file starts from; any 32-bit value. */
export const FUZZ_SEED = parseSeed(process.env.WALPROXY_FUZZ_SEED);

function parseSeed(text: string | undefined): number {
  if (text === undefined || text === '') return 0x5eed_f022;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`WALPROXY_FUZZ_SEED must be an integer, got ${text}`);
  return value >>> 0;
}

/** The case indexes a file runs: all `count` (times WALPROXY_FUZZ_CASES), or the one asked for. */
export function fuzzCases(count: number): number[] {
  const only = process.env.WALPROXY_FUZZ_CASE;
  if (only !== undefined && only !== '') return [Number(only)];
  const factor = Number(process.env.WALPROXY_FUZZ_CASES ?? '1');
  return Array.from({ length: Math.round(count * factor) }, (_, i) => i);
}

/** How a failure names its case. */
export function caseName(file: string, index: number, what: string): string {
  return `${file} seed ${FUZZ_SEED} case ${index}: ${what}`;
}

/** A small deterministic PRNG (mulberry32): fast, and the same sequence on every machine. */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** The PRNG of case `index` of a file: independent of every other case. */
  static forCase(file: string, index: number): Rng {
    let h = FUZZ_SEED ^ 0x9e37_79b9;
    for (const ch of `${file}#${index}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x0100_0193);
    return new Rng(h);
  }

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    this.#state = (this.#state + 0x6d2b_79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return n <= 0 ? 0 : Math.floor((this.next() / 0x1_0000_0000) * n);
  }

  /** An integer in [min, max]. */
  range(min: number, max: number): number {
    return min + this.int(max - min + 1);
  }

  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  bytes(n: number): Buffer {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = this.int(256);
    return out;
  }
}

// ---- mutations --------------------------------------------------------------------------------------

export interface Mutated {
  bytes: Buffer;
  /** What was done, for the failure message. */
  what: string;
}

const INT32_EDGES = [0, 1, -1, 0x7fff_ffff, -0x8000_0000, 61, 49, 0x7f, 0x80, 0xffff];
const BYTE_EDGES = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff];

/**
 * One random edit of a frame's payload (bytes after the size prefix), from `from` on, keeping the
 * size prefix true to the new length: the pipe's frame decoder only ever hands filters whole
 * frames. Bit flips, byte and int overwrites (edge values included), truncation, insertion,
 * deletion, trailing garbage, a duplicated slice.
 */
export function mutateFrame(rng: Rng, frame: Buffer, from = 4): Mutated {
  const payload = Buffer.from(frame.subarray(4));
  const start = Math.max(0, from - 4);
  const at = () => start + rng.int(Math.max(1, payload.length - start));
  const kind = rng.int(9);
  let out = payload;
  let what: string;
  switch (kind) {
    case 0: {
      const flips = rng.range(1, 3);
      const places: string[] = [];
      for (let i = 0; i < flips; i++) {
        const p = at();
        const bit = rng.int(8);
        out[p]! ^= 1 << bit;
        places.push(`${p}.${bit}`);
      }
      what = `flip bits ${places.join(',')}`;
      break;
    }
    case 1: {
      const p = at();
      const value = rng.chance(0.5) ? rng.pick(BYTE_EDGES) : rng.int(256);
      out[p] = value;
      what = `byte ${p} = ${value}`;
      break;
    }
    case 2: {
      const p = Math.min(at(), Math.max(start, payload.length - 2));
      const value = rng.pick([0, 1, -1, 0x7fff, -0x8000, 2, 13]);
      if (p + 2 <= out.length) out.writeInt16BE(value, p);
      what = `int16 at ${p} = ${value}`;
      break;
    }
    case 3: {
      const p = Math.min(at(), Math.max(start, payload.length - 4));
      const value = rng.pick(INT32_EDGES);
      if (p + 4 <= out.length) out.writeInt32BE(value, p);
      what = `int32 at ${p} = ${value}`;
      break;
    }
    case 4: {
      const p = at();
      out = out.subarray(0, p);
      what = `truncate to ${p}`;
      break;
    }
    case 5: {
      const p = at();
      const n = rng.range(1, 8);
      out = Buffer.concat([out.subarray(0, p), rng.bytes(n), out.subarray(p)]);
      what = `insert ${n} bytes at ${p}`;
      break;
    }
    case 6: {
      const p = at();
      const n = rng.range(1, 8);
      out = Buffer.concat([out.subarray(0, p), out.subarray(p + n)]);
      what = `delete ${n} bytes at ${p}`;
      break;
    }
    case 7: {
      const n = rng.range(1, 16);
      out = Buffer.concat([out, rng.bytes(n)]);
      what = `append ${n} bytes`;
      break;
    }
    default: {
      const p = at();
      const n = rng.range(1, 32);
      const q = at();
      out = Buffer.concat([out.subarray(0, q), out.subarray(p, p + n), out.subarray(q)]);
      what = `copy ${n} bytes from ${p} to ${q}`;
      break;
    }
  }
  return { bytes: framed(out), what };
}

// Magic v2 batch header fields (docs/kafka-protocol.md, "Record batch v2").
const FIELDS = {
  baseOffset: { at: 0, size: 8 },
  length: { at: 8, size: 4 },
  partitionLeaderEpoch: { at: 12, size: 4 },
  magic: { at: 16, size: 1 },
  crc: { at: 17, size: 4 },
  attributes: { at: 21, size: 2 },
  lastOffsetDelta: { at: 23, size: 4 },
  baseTimestamp: { at: 27, size: 8 },
  maxTimestamp: { at: 35, size: 8 },
  producerId: { at: 43, size: 8 },
  producerEpoch: { at: 51, size: 2 },
  baseSequence: { at: 53, size: 4 },
  recordCount: { at: 57, size: 4 },
} as const;

/** Fields a producer sets and the CRC covers; `producerId` and the rest stay out of the fuzz's reach with a fixed CRC. */
const CRC_COVERED: Array<keyof typeof FIELDS> = [
  'attributes',
  'lastOffsetDelta',
  'baseTimestamp',
  'maxTimestamp',
  'recordCount',
];

function writeField(batch: Buffer, field: keyof typeof FIELDS, value: number): void {
  const { at, size } = FIELDS[field];
  if (size === 1) batch.writeInt8((value << 24) >> 24, at);
  else if (size === 2) batch.writeInt16BE((value << 16) >> 16, at);
  else if (size === 4) batch.writeInt32BE(value | 0, at);
  else batch.writeBigInt64BE(BigInt(value), at);
}

/**
 * One edit of a batch header or body, in place in `buffer` at [offset, offset + size): magic,
 * Length, CRC, record count, attributes, offsets delta, timestamps, base offset and leader epoch,
 * or bits of the records; half of the edits of CRC-covered fields recompute the CRC, so the
 * batch gets past a CRC check to the checks behind it.
 */
export function mutateBatch(rng: Rng, buffer: Buffer, offset: number, size: number): string {
  const batch = buffer.subarray(offset, offset + size);
  const fixCrc = rng.chance(0.5);
  const kind = rng.int(10);
  let what: string;
  switch (kind) {
    case 0: {
      const magic = rng.pick([0, 1, 3, 0xff]);
      writeField(batch, 'magic', magic);
      what = `magic ${magic}`;
      break;
    }
    case 1: {
      const length = batch.readInt32BE(8);
      const value = rng.pick([length + 1, length - 1, length + 12, length - 12, 0, 48, 49, -1, 0x7fff_ffff]);
      writeField(batch, 'length', value);
      what = `Length ${length} -> ${value}`;
      break;
    }
    case 2: {
      const bit = rng.int(32);
      batch.writeUInt32BE((batch.readUInt32BE(17) ^ (1 << bit)) >>> 0, 17);
      return 'flip a CRC bit';
    }
    case 3: {
      const count = batch.readInt32BE(57);
      const value = rng.pick([0, -1, count + 1, count - 1, 0x7fff_ffff]);
      writeField(batch, 'recordCount', value);
      what = `record count ${count} -> ${value}`;
      break;
    }
    case 4: {
      const attributes = batch.readInt16BE(21);
      // codecs 5-7 do not exist; bit 3 LogAppendTime, 4 transactional, 5 control, 6 delete horizon
      const value = attributes ^ rng.pick([5, 6, 7, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 15]);
      writeField(batch, 'attributes', value);
      what = `attributes ${attributes} -> ${value}`;
      break;
    }
    case 5: {
      const field = rng.pick(CRC_COVERED);
      const value = rng.pick(INT32_EDGES);
      writeField(batch, field, value);
      what = `${field} = ${value}`;
      break;
    }
    case 6: {
      const field = rng.pick(['baseOffset', 'partitionLeaderEpoch'] as const);
      const value = rng.pick([0, -1, 5, 0x7fff_ffff]);
      writeField(batch, field, value);
      return `${field} = ${value}`;
    }
    default: {
      const p = rng.range(61, Math.max(61, size - 1));
      if (p < size) batch[p]! ^= 1 << rng.int(8);
      what = `flip a records bit at ${p}`;
      break;
    }
  }
  if (fixCrc && size >= CRC_START) {
    batch.writeUInt32BE(crc32c(batch.subarray(CRC_START)), 17);
    what += ', CRC recomputed';
  }
  return what;
}

/** Whether bytes hold exactly one complete, CRC-valid magic v2 batch: what a 4.x broker takes in one partition of a Produce. */
export function oneValidBatch(records: Buffer | null): boolean {
  if (records === null || records.length < 61) return false;
  if (records.readInt32BE(8) + 12 !== records.length || records[16] !== 2) return false;
  if ((records.readInt16BE(21) & 0x07) > 4 || (records.readInt16BE(21) & 0x20) !== 0) return false;
  if (records.readInt32BE(57) < 1) return false;
  return crc32c(records.subarray(CRC_START)) === records.readUInt32BE(17);
}

/** JSON with bigints and buffers, to compare decoded messages. */
export function plain(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (_k, v) =>
      typeof v === 'bigint'
        ? `${v}n`
        : v && typeof v === 'object' && v.type === 'Buffer' && Array.isArray(v.data)
          ? Buffer.from(v.data).toString('hex')
          : v,
    ),
  );
}

/** `payload` with its 4-byte size prefix. */
export function framed(payload: Buffer): Buffer {
  return encodeFrame(payload);
}

/**
 * The length prefix of a records field edited in place (`records` is a view of `frame`): an
 * int32 before v9-style flexible versions, an unsigned varint of length + 1 in them. The new value
 * says a byte more or less, twelve more or less, null, or more than the frame holds; the frame's
 * size prefix stays true to its length.
 */
export function editRecordsLength(rng: Rng, frame: Buffer, records: Buffer, flexible: boolean): Mutated {
  const at = records.byteOffset - frame.byteOffset;
  const length = records.length;
  const value = rng.pick([length + 1, length - 1, length + 12, length - 12, -1, 0, 0x7fff_fff0]);
  let prefixAt: number;
  let prefix: Buffer;
  if (flexible) {
    const old = uvarint(length + 1);
    prefixAt = at - old.length;
    prefix = uvarint(Math.max(0, value + 1));
  } else {
    prefixAt = at - 4;
    prefix = Buffer.alloc(4);
    prefix.writeInt32BE(value, 0);
  }
  const payload = Buffer.concat([frame.subarray(4, prefixAt), prefix, frame.subarray(at)]);
  return { bytes: framed(payload), what: `records length ${length} -> ${value}` };
}

function uvarint(value: number): Buffer {
  const out: number[] = [];
  let v = value >>> 0;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return Buffer.from(out);
}
