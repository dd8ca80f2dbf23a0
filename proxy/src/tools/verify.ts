// `walproxy wal verify`: WAL objects vs the metadata topic vs (optionally) the brokers' logs.
import { parseWalObject, WalFormatError, type WalIndexEntry } from '@walproxy/shared';
import type { WalMetadataRecordV1 } from '../metadata/wal-metadata-publisher.js';
import type { ObjectStore } from '../store/index.js';
import { parseWalObjectKey } from '../wal/object-key.js';
import type { BrokerLogs, LogBatchHeader, PartitionLog } from './broker-logs.js';
import { type ListedWalObject, listWalObjects, mapLimit, readObjectIndex } from './wal-index.js';

/** Problems make verify fail; info findings are reported only. */
export type FindingKind =
  | 'missing'
  | 'corrupt'
  | 'past-end'
  | 'mismatch'
  | 'broker-log'
  | 'orphan'
  | 'unindexed'
  | 'unreadable-record';

export const INFO_KINDS: ReadonlySet<FindingKind> = new Set(['orphan', 'unindexed']);

export interface Finding {
  kind: FindingKind;
  /** The object concerned (or the record's position for unreadable records). */
  key: string;
  message: string;
}

export interface VerifyOptions {
  store: ObjectStore;
  prefix: string;
  records: readonly WalMetadataRecordV1[];
  unreadableRecords?: readonly string[];
  sinceMs?: number;
  untilMs?: number;
  /** Check only header, trailer and footer (range reads), not every batch's CRC. */
  footersOnly?: boolean;
  brokerLogs?: BrokerLogs;
  concurrency?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface VerifyReport {
  objects: number;
  bytes: number;
  records: number;
  findings: Finding[];
  problems: number;
}

function span(r: WalMetadataRecordV1): string {
  return `${r.topic}-${r.partition} offsets ${r.baseOffset}..${r.lastOffset}`;
}

function inScope(key: string, options: VerifyOptions): boolean {
  if (!key.startsWith(options.prefix)) return false;
  const createdAtMs = parseWalObjectKey(key)?.createdAtMs;
  if (createdAtMs === undefined) return options.sinceMs === undefined && options.untilMs === undefined;
  if (options.sinceMs !== undefined && createdAtMs < options.sinceMs) return false;
  if (options.untilMs !== undefined && createdAtMs >= options.untilMs) return false;
  return true;
}

export async function verifyWal(options: VerifyOptions): Promise<VerifyReport> {
  const findings: Finding[] = [];
  const { store } = options;
  const { objects } = await listWalObjects(store, options.prefix, {
    sinceMs: options.sinceMs,
    untilMs: options.untilMs,
  });
  const listed = new Map<string, ListedWalObject>(objects.map((o) => [o.key, o]));

  for (const where of options.unreadableRecords ?? []) {
    findings.push({ kind: 'unreadable-record', key: where, message: 'metadata record is not readable' });
  }

  const recordsByObject = new Map<string, WalMetadataRecordV1[]>();
  let recordCount = 0;
  for (const record of options.records) {
    if (!inScope(record.object, options)) continue;
    recordCount++;
    let list = recordsByObject.get(record.object);
    if (!list) {
      list = [];
      recordsByObject.set(record.object, list);
    }
    list.push(record);
  }

  // Metadata pointing at keys the listing does not have: confirm with HEAD (a key the listing
  // filtered out, or a listing that missed it, still counts as present).
  const sizes = new Map<string, number>(objects.map((o) => [o.key, o.size]));
  for (const key of recordsByObject.keys()) {
    if (sizes.has(key)) continue;
    const head = await store.head(key);
    if (head === undefined) {
      const records = recordsByObject.get(key)!;
      findings.push({
        kind: 'missing',
        key,
        message: `object does not exist; ${records.length} metadata record(s) point at it (${records.map(span).join('; ')})`,
      });
    } else sizes.set(key, head.size);
  }

  const keys = [...sizes.keys()].sort();
  let done = 0;
  await mapLimit(keys, options.concurrency ?? 8, async (key) => {
    const size = sizes.get(key)!;
    let entries: WalIndexEntry[] | undefined;
    try {
      entries = options.footersOnly
        ? (await readObjectIndex(store, key, size)).entries
        : parseWalObject(await store.get(key)).entries;
    } catch (error) {
      if (!(error instanceof WalFormatError)) throw error;
      findings.push({
        kind: 'corrupt',
        key,
        message: `${size} bytes, not a whole WAL object: ${error.code}: ${error.message}`,
      });
    }
    const records = recordsByObject.get(key) ?? [];
    if (records.length === 0 && listed.has(key)) {
      findings.push({
        kind: 'orphan',
        key,
        message: `no metadata record points at this object${entries ? ` (${entries.length} batches)` : ''}`,
      });
    }
    const byPosition = new Map((entries ?? []).map((e) => [e.position, e]));
    const indexed = new Set<number>();
    for (const record of records)
      checkRecord(key, size, record, byPosition, indexed, findings, options.brokerLogs);
    if (entries && records.length > 0 && indexed.size < entries.length) {
      findings.push({
        kind: 'unindexed',
        key,
        message: `${entries.length - indexed.size} of ${entries.length} batches have no metadata record (acks=0 producers, or a dropped record)`,
      });
    }
    options.onProgress?.(++done, keys.length);
  });

  findings.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.kind < b.kind ? -1 : 1));
  return {
    objects: objects.length,
    bytes: objects.reduce((t, o) => t + o.size, 0),
    records: recordCount,
    findings,
    problems: findings.filter((f) => !INFO_KINDS.has(f.kind)).length,
  };
}

function checkRecord(
  key: string,
  size: number,
  record: WalMetadataRecordV1,
  byPosition: Map<number, WalIndexEntry>,
  indexed: Set<number>,
  findings: Finding[],
  brokerLogs: BrokerLogs | undefined,
): void {
  const where = `metadata ${span(record)}`;
  if (record.objectSize !== size) {
    findings.push({
      kind: 'mismatch',
      key,
      message: `${where} says the object has ${record.objectSize} bytes; it has ${size}`,
    });
  }
  for (const batch of record.batches) {
    const at = `${where}, batch at position ${batch.position} (offsets ${batch.baseOffset}..${batch.lastOffset})`;
    const end = batch.position + batch.length;
    if (end > size) {
      findings.push({
        kind: 'past-end',
        key,
        message: `${at} ends at byte ${end}, past the object's end (${size} bytes)`,
      });
      continue;
    }
    if (byPosition.size > 0) {
      const entry = byPosition.get(batch.position);
      const differences: string[] = [];
      if (entry === undefined) differences.push('no batch starts there in the footer');
      else {
        indexed.add(entry.position);
        if (entry.length !== batch.length)
          differences.push(`length ${batch.length} vs footer ${entry.length}`);
        if (entry.crc !== batch.crc) differences.push(`crc ${batch.crc} vs footer ${entry.crc}`);
        if (entry.partition !== record.partition)
          differences.push(`partition ${record.partition} vs footer ${entry.partition}`);
        if (entry.topicName !== '' && entry.topicName !== record.topic)
          differences.push(`topic ${record.topic} vs footer ${entry.topicName}`);
        if (batch.lastOffset - batch.baseOffset !== entry.lastOffsetDelta)
          differences.push(
            `offset span ${batch.lastOffset - batch.baseOffset} vs footer lastOffsetDelta ${entry.lastOffsetDelta}`,
          );
      }
      if (differences.length > 0)
        findings.push({ kind: 'mismatch', key, message: `${at}: ${differences.join(', ')}` });
    }
    if (brokerLogs) {
      for (const log of brokerLogs.partitionLogs(record.topic, record.partition)) {
        const first = log.batches[0];
        const last = log.batches.at(-1);
        // Retention removed it, or this replica has not fetched it yet: nothing to compare.
        if (!first || !last || batch.baseOffset < first.baseOffset || batch.baseOffset > last.lastOffset)
          continue;
        const stored = byBaseOffset(log).get(batch.baseOffset);
        const differences: string[] = [];
        if (stored === undefined) differences.push('no batch starts at that offset');
        else {
          if (stored.crc !== batch.crc) differences.push(`crc ${stored.crc} (recompressed by the broker?)`);
          if (stored.size !== batch.length) differences.push(`size ${stored.size}`);
          if (stored.lastOffset !== batch.lastOffset) differences.push(`last offset ${stored.lastOffset}`);
        }
        if (differences.length > 0) {
          findings.push({
            kind: 'broker-log',
            key,
            message: `${at}: broker log ${log.dir} has ${differences.join(', ')}`,
          });
        }
      }
    }
  }
}

const indexes = new WeakMap<PartitionLog, Map<number, LogBatchHeader>>();
function byBaseOffset(log: PartitionLog): Map<number, LogBatchHeader> {
  let index = indexes.get(log);
  if (!index) {
    index = new Map(log.batches.map((b) => [b.baseOffset, b]));
    indexes.set(log, index);
  }
  return index;
}
