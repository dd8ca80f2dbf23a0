import type { FetchFillStats } from '../../src/filters/fetch-fill.js';
import type { FetchStripStats } from '../../src/filters/fetch-strip.js';
import type { ProduceWalStats } from '../../src/filters/produce-wal.js';
import { createLogger } from '../../src/log.js';
import { newListenerCounters } from '../../src/net/counters.js';
import type { TelemetrySources } from '../../src/telemetry/index.js';
import type { WalRangeReaderStats } from '../../src/wal/range-reader.js';
import type { WalWriterStats } from '../../src/wal/wal-writer.js';

export const silentLog = createLogger('silent');

/** Stats objects as a sidecar with a WAL keeps them, mutable by the test. */
export function fakeSources() {
  const client = newListenerCounters();
  const replication = newListenerCounters();
  const produce: ProduceWalStats = {
    requestsCopied: 0,
    batchesCopied: 0,
    bytesCopied: 0,
    durableAckFailures: 0,
    durableAckFailuresAfterAppend: 0,
    batchesNotCopiedStoreDegraded: 0,
    bytesNotCopiedStoreDegraded: 0,
    batchesNotCopiedInlineMode: 0,
    bytesNotCopiedInlineMode: 0,
    unknownTopicIds: 0,
    unsupportedVersions: 0,
    batchesNotCopied: 0,
    partitionsNotCopied: 0,
  };
  const fetchStrip: FetchStripStats = {
    responsesRewritten: 0,
    referencesSent: 0,
    bytesReferenced: 0,
    inlineBytes: 0,
    inline: { notInWal: 0, notStoredInTime: 0, requestedInline: 0, unknownTopic: 0 },
    holds: 0,
    holdMsTotal: 0,
    holdMsMax: 0,
  };
  const fetchFill: FetchFillStats = {
    requestsMarked: 0,
    requestsUnmarked: 0,
    responsesFilled: 0,
    referencesFilled: 0,
    bytesFilled: 0,
    inlineBytes: 0,
    fallbacks: { getFailed: 0, crcMismatch: 0, lengthMismatch: 0, malformed: 0 },
    pendingInline: 0,
    pendingExpired: 0,
    fillLatencyMs: { sum: 0, count: 0, max: 0 },
  };
  const reader: WalRangeReaderStats = {
    gets: 0,
    bytesFetched: 0,
    cacheHits: 0,
    cacheMisses: 0,
    sharedGets: 0,
    cachedBytes: 0,
  };
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
      metadata: () => ({ published: 0, records: 0, overflowed: 0, sendFailures: 0, queued: 0 }),
    },
  };
  return { sources, client, replication, produce, fetchStrip, fetchFill, reader, writer };
}
