import { WalObjectBuilder } from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { parseBytes, parseDuration, parseTime } from '../../src/config/flag-values.js';
import type { WalMetadataRecordV1 } from '../../src/metadata/wal-metadata-publisher.js';
import type { BrokerLogs, PartitionLog } from '../../src/tools/broker-logs.js';
import { selectForGc } from '../../src/tools/gc.js';
import { verifyWal } from '../../src/tools/verify.js';
import { describePartitions, listWalObjects, readObjectIndex } from '../../src/tools/wal-index.js';
import { newWalObjectKey } from '../../src/wal/object-key.js';
import { MemoryObjectStore } from '../wal/memory-store.js';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);

/** Puts one WAL object of `batches` batches of topic t, partitions 0/1 alternating; returns its metadata. */
async function putObject(
  store: MemoryObjectStore,
  createdAtMs: number,
  batches: number,
  firstOffset = 0,
): Promise<{ key: string; records: WalMetadataRecordV1[] }> {
  const key = newWalObjectKey('', 1, createdAtMs);
  const builder = new WalObjectBuilder({ writerBrokerId: 1, createdAtMs });
  const appended = [];
  for (let i = 0; i < batches; i++) {
    const batch = makeBatch({ recordCount: 3, lastOffsetDelta: 2, records: Buffer.from(`records-${i}`) });
    const at = builder.append({ topicName: 't', partition: i % 2, batch });
    appended.push({ ...at, partition: i % 2, crc: batch.readUInt32BE(17) });
  }
  await store.put(key, builder.seal());
  const size = store.objects.get(key)!.length;
  const records: WalMetadataRecordV1[] = [0, 1].flatMap((partition) => {
    const mine = appended.filter((a) => a.partition === partition);
    if (mine.length === 0) return [];
    const batchesOut = mine.map((a, i) => ({
      position: a.position,
      length: a.length,
      baseOffset: firstOffset + i * 3,
      lastOffset: firstOffset + i * 3 + 2,
      crc: a.crc,
      records: 3,
    }));
    const record: WalMetadataRecordV1 = {
      v: 1,
      broker: 1,
      object: key,
      objectSize: size,
      topic: 't',
      topicId: null,
      partition,
      baseOffset: batchesOut[0]!.baseOffset,
      lastOffset: batchesOut.at(-1)!.lastOffset,
      createdAtMs,
      batches: batchesOut,
    };
    return [record];
  });
  return { key, records };
}

describe('wal tools on a memory store', () => {
  it('lists WAL objects by key creation time and reads footers by range reads', async () => {
    const store = new MemoryObjectStore();
    const b = await putObject(store, T0 + 1000, 2);
    const a = await putObject(store, T0, 4);
    await store.put('.walproxy-validate-x', Buffer.from('probe'));
    const { objects, foreign } = await listWalObjects(store, '');
    expect(objects.map((o) => o.key)).toEqual([a.key, b.key]);
    expect(objects[0]!.createdAtMs).toBe(T0);
    expect(foreign).toEqual(['.walproxy-validate-x']);
    expect((await listWalObjects(store, '', { sinceMs: T0 + 1 })).objects.map((o) => o.key)).toEqual([b.key]);
    expect((await listWalObjects(store, '', { untilMs: T0 + 1 })).objects.map((o) => o.key)).toEqual([a.key]);
    const index = await readObjectIndex(store, a.key, store.objects.get(a.key)!.length);
    expect(index.header).toEqual({ formatVersion: 1, writerBrokerId: 1, createdAtMs: T0 });
    expect(index.entries).toHaveLength(4);
    expect(describePartitions(index.entries)).toBe('t[0,1]');
  });

  it('verify passes when objects and metadata agree', async () => {
    const store = new MemoryObjectStore();
    const a = await putObject(store, T0, 4);
    const b = await putObject(store, T0 + 1, 2, 12);
    const report = await verifyWal({ store, prefix: '', records: [...a.records, ...b.records] });
    expect(report).toMatchObject({ objects: 2, records: 4, problems: 0, findings: [] });
  });

  it('classifies a deleted object, a truncated object, a record past the end, a footer mismatch and an orphan', async () => {
    const store = new MemoryObjectStore();
    const deleted = await putObject(store, T0, 2);
    const truncated = await putObject(store, T0 + 1, 4);
    const pastEnd = await putObject(store, T0 + 2, 2);
    const mismatched = await putObject(store, T0 + 3, 2);
    const orphan = await putObject(store, T0 + 4, 2);
    await store.delete([deleted.key]);
    const full = store.objects.get(truncated.key)!;
    store.objects.set(truncated.key, full.subarray(0, Math.floor(full.length / 2)));
    const size = store.objects.get(pastEnd.key)!.length;
    const extra: WalMetadataRecordV1 = {
      ...pastEnd.records[0]!,
      baseOffset: 100,
      lastOffset: 102,
      batches: [{ position: size - 10, length: 100, baseOffset: 100, lastOffset: 102, crc: 1, records: 3 }],
    };
    const changed = mismatched.records[1]!.batches[0]!;
    changed.crc = (changed.crc ^ 1) >>> 0;

    const report = await verifyWal({
      store,
      prefix: '',
      records: [...deleted.records, ...truncated.records, ...pastEnd.records, extra, ...mismatched.records],
    });
    const kinds = report.findings.map((f) => `${f.kind} ${f.key}`);
    expect(kinds).toContain(`missing ${deleted.key}`);
    expect(kinds).toContain(`corrupt ${truncated.key}`);
    expect(kinds).toContain(`past-end ${truncated.key}`); // its last batch now runs past the end
    expect(kinds).toContain(`past-end ${pastEnd.key}`);
    expect(kinds).toContain(`mismatch ${mismatched.key}`);
    expect(kinds).toContain(`orphan ${orphan.key}`);
    expect(report.findings.find((f) => f.kind === 'missing')!.message).toMatch(
      /object does not exist; 2 metadata record\(s\) point at it \(t-0 offsets 0\.\.2; t-1 offsets 0\.\.2\)/,
    );
    expect(report.findings.find((f) => f.kind === 'corrupt')!.message).toMatch(/WALPROXY_ERR_WAL_/);
    expect(report.findings.find((f) => f.kind === 'mismatch' && f.key === mismatched.key)!.message).toMatch(
      /crc \d+ vs footer \d+/,
    );
    // The orphan is information, not a problem
    expect(report.problems).toBe(report.findings.filter((f) => f.kind !== 'orphan').length);
    expect(report.problems).toBeGreaterThanOrEqual(5);
  });

  it('footers-only verify finds the same truncation by range reads', async () => {
    const store = new MemoryObjectStore();
    const truncated = await putObject(store, T0, 4);
    const full = store.objects.get(truncated.key)!;
    store.objects.set(truncated.key, full.subarray(0, full.length - 1));
    const report = await verifyWal({ store, prefix: '', records: truncated.records, footersOnly: true });
    expect(report.findings.map((f) => f.kind)).toContain('corrupt');
  });

  it('compares metadata with broker logs: a differing CRC is a problem, offsets outside the log are skipped', async () => {
    const store = new MemoryObjectStore();
    const a = await putObject(store, T0, 2);
    const logs = new Map<string, PartitionLog[]>();
    for (const r of a.records) {
      logs.set(`t-${r.partition}`, [
        {
          dir: `/data/t-${r.partition}`,
          batches: r.batches.map((b) => ({
            baseOffset: b.baseOffset,
            lastOffset: b.lastOffset,
            crc: r.partition === 1 ? (b.crc ^ 1) >>> 0 : b.crc,
            size: b.length,
          })),
        },
      ]);
    }
    const brokerLogs: BrokerLogs = { partitionLogs: (t, p) => logs.get(`${t}-${p}`) ?? [] };
    const report = await verifyWal({ store, prefix: '', records: a.records, brokerLogs });
    expect(report.findings.map((f) => f.kind)).toEqual(['broker-log']);
    expect(report.findings[0]!.message).toMatch(/t-1 .*broker log \/data\/t-1 has crc/);
  });

  it('gc selects only objects created before now minus --older-than', async () => {
    const store = new MemoryObjectStore();
    const now = T0 + 3 * 3_600_000;
    const old = await putObject(store, T0, 1);
    const edge = await putObject(store, now - 2 * 3_600_000, 1);
    const fresh = await putObject(store, now - 60_000, 1);
    const { objects } = await listWalObjects(store, '');
    expect(selectForGc(objects, 2 * 3_600_000, now).map((o) => o.key)).toEqual([old.key]);
    expect(selectForGc(objects, 0, now).map((o) => o.key)).toEqual([old.key, edge.key, fresh.key]);
    expect(selectForGc(objects, 7 * 86_400_000, now)).toEqual([]);
  });
});

describe('operator flag parsing', () => {
  it('parses durations, times and sizes, and names what is wrong', () => {
    expect(parseDuration('2h')).toBe(7_200_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('0s')).toBe(0);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2')).toMatch(/is not a duration/);
    expect(parseDuration('2 weeks')).toMatch(/is not a duration/);
    expect(parseTime('2026-01-02T03:04:05Z', 0)).toBe(T0);
    expect(parseTime('2h', T0)).toBe(T0 - 7_200_000);
    expect(parseTime(String(T0), 0)).toBe(T0);
    expect(parseTime('yesterday', 0)).toMatch(/is not a time/);
    expect(parseBytes('400KB')).toBe(400_000);
    expect(parseBytes('1MiB')).toBe(1_048_576);
    expect(parseBytes('0')).toMatch(/at least 1 byte/);
    expect(parseBytes('4q')).toMatch(/is not a size/);
  });
});
