import { FetchFillFilter, type FetchFillStats } from '../../src/filters/fetch-fill.js';
import { type FetchStripStats, newFetchStripStats } from '../../src/filters/fetch-strip.js';
import { newProduceWalStats, type ProduceWalStats } from '../../src/filters/produce-wal-stats.js';
import { createLogger } from '../../src/log.js';
import { newListenerCounters } from '../../src/net/counters.js';
import type { TelemetrySources } from '../../src/telemetry/index.js';
import { newRangeReaderStats, type WalRangeReaderStats } from '../../src/wal/range-reader.js';
import type { WalWriterStats } from '../../src/wal/wal-writer.js';

export const silentLog = createLogger('silent');

/** Stats objects as a sidecar with a WAL keeps them, mutable by the test. */
export function fakeSources() {
  const client = newListenerCounters();
  const replication = newListenerCounters();
  const produce: ProduceWalStats = newProduceWalStats();
  const fetchStrip: FetchStripStats = newFetchStripStats();

  // The follower side's own stats objects, so the fixture has every field they have.
  const fetchFill: FetchFillStats = new FetchFillFilter({ readerFor: () => undefined, log: silentLog }).stats;
  const reader: WalRangeReaderStats = newRangeReaderStats();
  const writer: WalWriterStats = {
    objectsUploaded: 0,
    bytesUploaded: 0,
    batchesUploaded: 0,
    uploadAttempts: 0,
    uploadRetries: 0,
    uploadFailures: 0,
    sealedBySize: 0,
    sealedByLinger: 0,
    sealedByFlush: 0,
    sealedProducersWaiting: 0,
    refusedOverloaded: 0,
    batchesRejected: 0,
    batchesUnconfirmed: 0,
    tentativeBatches: 0,
    objectsAbandoned: 0,
    batchesAbandoned: 0,
    bytesAbandoned: 0,
    pendingBytes: 0,
    uploadsInFlight: 0,
    queuedObjects: 0,
  };
  const sources: TelemetrySources = {
    brokerId: 7,
    memoryLimitBytes: 536_870_912,
    listeners: () => [
      { name: 'client', counters: client },
      { name: 'replication', counters: replication },
    ],
    wal: {
      produce: () => produce,
      fetchStrip: () => fetchStrip,
      fetchFill: () => fetchFill,
      reader: () => reader,
      writer: () => writer,
      metadata: () => ({ published: 0, records: 0, overflowed: 0, sendFailures: 0, queued: 0, inFlight: 0 }),
    },
  };
  return { sources, client, replication, produce, fetchStrip, fetchFill, reader, writer };
}
