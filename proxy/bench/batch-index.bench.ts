// Memory (JS heap + array buffers) per WalBatchIndex entry, and the cost of add/lookup (issue #12, case 10):
//   node --expose-gc --import tsx proxy/bench/batch-index.bench.ts [entries]
// Adds `entries` distinct stored batches of 12 partitions, forces GC, and prints the heap growth
// per entry (the index's maxEntries is derived from the sidecar's memory limit from it).
import { recordBatchAt } from '@walproxy/shared';
import { sampleBatch } from '../../shared/test/helpers/record-batches.js';
import { WalBatchIndex } from '../src/wal/batch-index.js';
import type { WalAppendTicket } from '../src/wal/index.js';

const entries = Number(process.argv[2] ?? 1_000_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const template = sampleBatch(0n, 5, 100, 1);
const batches: Buffer[] = [];
// Distinct batches (distinct CRCs) without holding a million buffers: vary the timestamp in place.
function batchNumber(n: number): Buffer {
  const b = Buffer.from(template);
  b.writeBigInt64BE(BigInt(n), 43); // producer id: distinct producer keys too
  b.writeUInt32BE(n >>> 0, 17); // a distinct CRC (the index trusts the caller's bytes)
  return b;
}
for (let n = 0; n < 16; n++) batches.push(batchNumber(n));

/** JS heap plus ArrayBuffer backing stores (typed arrays live outside the JS heap). */
function used(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

async function main(): Promise<void> {
  const tickets: WalAppendTicket[] = [];
  // Each 1,000 batches share one object, as a 400 KB object with ~1 KB batches would.
  const objects = Math.ceil(entries / 1000);
  for (let o = 0; o < objects; o++) {
    const location = {
      objectKey: `wal/2026/12/01/10/1/${o}.wal`,
      position: 28,
      length: template.length,
      objectSize: 400_000,
      uploadedAtMs: 1,
    };
    tickets.push({ durable: Promise.resolve(location) } as WalAppendTicket);
  }
  gc!();
  const before = used();
  const index = new WalBatchIndex({ maxEntries: entries, maxAgeMs: 3_600_000 });
  const addStart = performance.now();
  for (let n = 0; n < entries; n++) {
    const b = batchNumber(n);
    index.add(`topic-${n % 3}`, n % 4, b, tickets[Math.floor(n / 1000)]!);
  }
  const addMs = performance.now() - addStart;
  await new Promise((r) => setTimeout(r, 10));
  gc!();
  const after = used();
  const lookupStart = performance.now();
  let found = 0;
  const probes = Math.min(entries, 200_000);
  for (let n = entries - probes; n < entries; n++) {
    const b = batchNumber(n);
    const batch = recordBatchAt(b, 0);
    if (!batch.partial && index.lookup(`topic-${n % 3}`, n % 4, batch).found) found++;
  }
  const lookupMs = performance.now() - lookupStart;
  console.log(
    JSON.stringify({
      entries: index.size,
      bytesPerEntry: Math.round((after - before) / index.size),
      indexAllocatedBytesPerEntry:
        'stats' in index
          ? Math.round((index.stats as { allocatedBytes?: number }).allocatedBytes! / index.size)
          : undefined,
      addUsPerEntry: Number(((addMs * 1000) / entries).toFixed(2)),
      lookupUsPerEntry: Number(((lookupMs * 1000) / probes).toFixed(2)),
      found,
      rssMiB: Math.round(process.memoryUsage().rss / 1048576),
    }),
  );
}
await main();
