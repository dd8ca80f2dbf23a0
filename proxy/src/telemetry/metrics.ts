// Metrics of one sidecar. Cumulative counts and gauges are observed from the stats objects the
// filters, the WAL writer, the range reader and the listeners keep anyway (read at collection, so
// they cost nothing per message); distributions (sizes, durations) are recorded from the
// diagnostics-channel events. Attributes are low-cardinality: listener names, reasons, outcomes,
// API names — never topics, partitions or object keys.
import type { Attributes, Histogram, Meter, ObservableResult } from '@opentelemetry/api';
import type { FetchFillEvent } from '../filters/fetch-fill.js';
import type { FetchStripEvent } from '../filters/fetch-strip.js';
import type { ProduceDurableAckEvent } from '../filters/produce-wal.js';
import type {
  WalAppendRefusedEvent,
  WalReaderGetEvent,
  WalSealEvent,
  WalUploadAttemptEvent,
  WalUploadEndEvent,
  WalUploadStartEvent,
} from '../wal/channels.js';
import type { TelemetrySources } from './sources.js';

const MS_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000];

/** A duration histogram in ms with walproxy's buckets (every room's durations use the same ones). */
export function msHistogram(meter: Meter, name: string, description: string): Histogram {
  return meter.createHistogram(name, {
    unit: 'ms',
    description,
    advice: { explicitBucketBoundaries: MS_BUCKETS },
  });
}
const SIZE_BUCKETS = [
  16 << 10,
  64 << 10,
  128 << 10,
  256 << 10,
  512 << 10,
  1 << 20,
  2 << 20,
  4 << 20,
  8 << 20,
  16 << 20,
  64 << 20,
];

/** The histograms and event counters fed from diagnostics-channel events. */
export class ChannelMetrics {
  readonly objectSize: Histogram;
  readonly sealAge: Histogram;
  readonly uploadQueued: Histogram;
  readonly uploadDuration: Histogram;
  readonly attemptDuration: Histogram;
  readonly durableAck: Histogram;
  readonly hold: Histogram;
  readonly fill: Histogram;
  readonly readerGet: Histogram;
  readonly refused;

  constructor(meter: Meter) {
    const ms = (name: string, description: string) => msHistogram(meter, name, description);
    this.objectSize = meter.createHistogram('walproxy.wal.object.size', {
      unit: 'By',
      description: 'Size of each sealed WAL object, by seal reason (size, linger, flush)',
      advice: { explicitBucketBoundaries: SIZE_BUCKETS },
    });
    this.sealAge = ms(
      'walproxy.wal.object.age',
      'Time from a WAL object’s first batch to its seal, by seal reason',
    );
    this.uploadQueued = ms(
      'walproxy.wal.upload.queue.duration',
      'Time a sealed object waited for an upload slot',
    );
    this.uploadDuration = ms(
      'walproxy.wal.upload.duration',
      'Time from seal to settlement of an object upload, queueing and retries included, by outcome',
    );
    this.attemptDuration = ms(
      'walproxy.wal.upload.attempt.duration',
      'Duration of one upload attempt, by outcome',
    );
    this.durableAck = ms(
      'walproxy.produce.durable_ack.duration',
      'Time a Produce response was held after the broker answered, until its batches were stored, by outcome',
    );
    this.hold = ms(
      'walproxy.fetch.hold.duration',
      'Leader side: time a follower Fetch response waited for batches still uploading',
    );
    this.fill = ms(
      'walproxy.fetch.fill.duration',
      'Follower side: time from a response with references to the rebuilt response (range GETs included)',
    );
    this.readerGet = ms(
      'walproxy.wal.reader.get.duration',
      'Follower side: duration of one GET from the store (whole object or a range), by outcome',
    );
    this.refused = meter.createCounter('walproxy.wal.append.refused', {
      unit: '{batch}',
      description: 'Batches the WAL writer refused to copy, by kind (OVERLOADED, CLOSED)',
    });
  }

  seal(e: WalSealEvent): void {
    this.objectSize.record(e.size, { reason: e.reason });
    this.sealAge.record(e.ageMs, { reason: e.reason });
  }
  uploadStart(e: WalUploadStartEvent): void {
    this.uploadQueued.record(e.queuedMs);
  }
  uploadAttempt(e: WalUploadAttemptEvent): void {
    this.attemptDuration.record(e.durationMs, { outcome: e.error === undefined ? 'ok' : 'error' });
  }
  uploadEnd(e: WalUploadEndEvent): void {
    this.uploadDuration.record(e.durationMs, { outcome: e.error === undefined ? 'stored' : 'failed' });
  }
  appendRefused(e: WalAppendRefusedEvent): void {
    this.refused.add(1, { kind: e.kind });
  }
  durableAckDone(e: ProduceDurableAckEvent): void {
    this.durableAck.record(e.durationMs, { outcome: e.outcome });
  }
  strip(e: FetchStripEvent): void {
    if (e.heldBatches > 0) this.hold.record(e.holdMs);
  }
  filled(e: FetchFillEvent): void {
    this.fill.record(e.durationMs);
  }
  readerGot(e: WalReaderGetEvent): void {
    this.readerGet.record(e.durationMs, { outcome: e.outcome });
  }
}

type Observe = (result: ObservableResult<Attributes>) => void;

/** Registers the observable instruments that read `sources` at each collection. */
export function observeSources(meter: Meter, sources: TelemetrySources): void {
  const counter = (name: string, unit: string, description: string, observe: Observe) =>
    meter.createObservableCounter(name, { unit, description }).addCallback(observe);
  const upDown = (name: string, unit: string, description: string, observe: Observe) =>
    meter.createObservableUpDownCounter(name, { unit, description }).addCallback(observe);
  const gauge = (name: string, unit: string, description: string, observe: Observe) =>
    meter.createObservableGauge(name, { unit, description }).addCallback(observe);
  // OpenTelemetry's process metrics (semantic conventions): what `walproxy cost --from-metrics`
  // prices the sidecar's CPU with. The Prometheus exporter has none of its own.
  counter('process.cpu.time', 's', 'CPU time of the sidecar process, by cpu.mode (user, system)', (r) => {
    const usage = process.cpuUsage();
    r.observe(usage.user / 1e6, { 'cpu.mode': 'user' });
    r.observe(usage.system / 1e6, { 'cpu.mode': 'system' });
  });
  gauge('process.uptime', 's', 'Time since the sidecar process started', (r) => r.observe(process.uptime()));

  const perListener =
    (pick: (c: ReturnType<TelemetrySources['listeners']>[number]['counters']) => number): Observe =>
    (r) => {
      for (const { name, counters } of sources.listeners()) r.observe(pick(counters), { listener: name });
    };

  upDown(
    'walproxy.connections.active',
    '{connection}',
    'Open downstream connections, by listener',
    perListener((c) => c.connectionsActive),
  );
  counter(
    'walproxy.connections.accepted',
    '{connection}',
    'Downstream connections accepted, by listener',
    perListener((c) => c.connectionsAccepted),
  );
  counter(
    'walproxy.listener.protocol_errors',
    '{connection}',
    'Connections closed for a protocol error, by listener',
    perListener((c) => c.closedForProtocolError),
  );
  counter(
    'walproxy.listener.upstream_connect_failures',
    '{connection}',
    'Failed connects to the upstream, by listener',
    perListener((c) => c.upstreamConnectFailures),
  );
  counter(
    'walproxy.listener.tls_handshake_failures',
    '{connection}',
    'TLS handshakes refused (no or bad client certificate, protocol mismatch), by listener',
    perListener((c) => c.tlsHandshakeFailures),
  );
  counter(
    'walproxy.listener.upstream_tls_handshake_failures',
    '{connection}',
    "TLS handshakes to the upstream that failed after TCP connected (the peer's certificate refused; a peer refusing ours counts on its side, under TLS 1.3), by listener; each also counts as an upstream connect failure",
    perListener((c) => c.upstreamTlsHandshakeFailures),
  );
  counter(
    'walproxy.listener.bytes',
    'By',
    'Bytes through a listener, by direction (from/to downstream/upstream; to_* after filters)',
    (r) => {
      for (const { name, counters: c } of sources.listeners()) {
        r.observe(c.bytesFromDownstream, { listener: name, direction: 'from_downstream' });
        r.observe(c.bytesToUpstream, { listener: name, direction: 'to_upstream' });
        r.observe(c.bytesFromUpstream, { listener: name, direction: 'from_upstream' });
        r.observe(c.bytesToDownstream, { listener: name, direction: 'to_downstream' });
      }
    },
  );
  counter(
    'walproxy.requests',
    '{request}',
    'Kafka requests forwarded or answered, by listener and API',
    (r) => {
      for (const { name, counters } of sources.listeners()) {
        const byApi = new Map<string, number>();
        for (const [key, n] of Object.entries(counters.requests)) {
          // Keys are "<ApiName> v<version>": versions are summed, keeping the series few.
          const api = key.replace(/ v\d+$/, '');
          byApi.set(api, (byApi.get(api) ?? 0) + n);
        }
        for (const [api, n] of byApi) r.observe(n, { listener: name, api });
      }
    },
  );

  const memoryLimit = sources.memoryLimitBytes;
  if (memoryLimit !== undefined) {
    gauge(
      'walproxy.memory.limit.bytes',
      'By',
      'The memory limit (--memory-limit-bytes, else the cgroup limit, else 512 MiB) the bounds of the caches and queues are derived from',
      (r) => r.observe(memoryLimit),
    );
  }
  // Resident memory, what the container's limit holds the process to (an OOM kill is a dead sidecar).
  gauge('walproxy.memory.used.bytes', 'By', 'Resident memory of the sidecar process (RSS)', (r) =>
    r.observe(process.memoryUsage.rss()),
  );

  const store = sources.store;
  if (store) {
    gauge(
      'walproxy.store.healthy',
      '1',
      'Whether the WAL store is in use (1) or every batch replicates inline while it is probed (0)',
      (r) => r.observe(store().usable ? 1 : 0),
    );
  }

  const epochWait = sources.fetchEpochWait;
  if (epochWait) {
    counter(
      'walproxy.fetch.leader_epoch_waits',
      '{partition}',
      "Follower side: partitions a new leader answered UNKNOWN_LEADER_EPOCH (it had not yet applied its leader change), by outcome: answered_later (asked again every 20 ms and delivered with the leader's answer, instead of the broker's 1 s backoff); passed_waited, passed_not_asked, passed_reask_failed (responses passed on as stock)",
      (r) => {
        const s = epochWait();
        r.observe(s.partitionsAnsweredLater, { outcome: 'answered_later' });
        r.observe(s.passed.waitedLongEnough, { outcome: 'passed_waited' });
        r.observe(s.passed.notAsked, { outcome: 'passed_not_asked' });
        r.observe(s.passed.reaskFailed, { outcome: 'passed_reask_failed' });
      },
    );
  }

  const wal = sources.wal;
  if (!wal) return;
  counter(
    'walproxy.replication.bytes',
    'By',
    'Replicated record bytes by side (leader, follower) and path (referenced: through the object store; inline: across the link)',
    (r) => {
      const strip = wal.fetchStrip();
      const fill = wal.fetchFill();
      r.observe(strip.bytesReferenced, { side: 'leader', path: 'referenced' });
      r.observe(strip.inlineBytes, { side: 'leader', path: 'inline' });
      r.observe(fill.bytesFilled, { side: 'follower', path: 'referenced' });
      r.observe(fill.inlineBytes, { side: 'follower', path: 'inline' });
    },
  );
  counter(
    'walproxy.fetch.references',
    '{batch}',
    'Batches sent as references (leader) or filled from the store (follower)',
    (r) => {
      r.observe(wal.fetchStrip().referencesSent, { side: 'leader' });
      r.observe(wal.fetchFill().referencesFilled, { side: 'follower' });
    },
  );
  counter(
    'walproxy.fetch.inline.batches',
    '{batch}',
    'Leader side: batches of marked follower fetches sent inline, by reason',
    (r) => {
      // Every reason the strip counts, named in snake case (notInWal: not_in_wal).
      for (const [reason, batches] of Object.entries(wal.fetchStrip().inline)) {
        r.observe(batches, { reason: snakeCase(reason) });
      }
    },
  );
  counter(
    'walproxy.fetch.inline.bytes',
    'By',
    'Record bytes of follower fetches that went inline, by side and reason: side=leader for what the leader side sent inline in marked responses, side=follower for what reached the follower side inline',
    (r) => {
      for (const [reason, bytes] of Object.entries(wal.fetchStrip().inlineBytesByReason)) {
        r.observe(bytes, { side: 'leader', reason: snakeCase(reason) });
      }
      const inline = wal.fetchFill().inline;
      r.observe(inline.unreferenced, { side: 'follower', reason: 'unreferenced' });
      r.observe(inline.inlineSegments, { side: 'follower', reason: 'inline_segments' });
      r.observe(inline.requestedInline, { side: 'follower', reason: 'requested_inline' });
      r.observe(inline.backoff, { side: 'follower', reason: 'backoff' });
      r.observe(inline.unmarkedByName, { side: 'follower', reason: 'unmarked_by_name' });
      r.observe(inline.otherVersion, { side: 'follower', reason: 'other_version' });
    },
  );
  counter(
    'walproxy.fetch.holds',
    '{response}',
    'Leader side: follower fetch responses held for uploading batches',
    (r) => r.observe(wal.fetchStrip().holds),
  );
  counter(
    'walproxy.fetch.fallbacks',
    '{partition}',
    'Follower side: partitions whose references could not be filled, by reason',
    (r) => {
      const f = wal.fetchFill().fallbacks;
      r.observe(f.getFailed, { reason: 'get_failed' });
      r.observe(f.deadline, { reason: 'deadline' });
      r.observe(f.backoff, { reason: 'backoff' });
      r.observe(f.crcMismatch, { reason: 'crc_mismatch' });
      r.observe(f.digestMismatch, { reason: 'digest_mismatch' });
      r.observe(f.lengthMismatch, { reason: 'length_mismatch' });
      r.observe(f.malformed, { reason: 'malformed' });
    },
  );
  counter(
    'walproxy.fetch.digest_mismatches',
    '{partition}',
    'Follower side: referenced batches refused because their records are not the ones the leader stored (the object was overwritten or forged); the partition went inline',
    (r) => r.observe(wal.fetchFill().fallbacks.digestMismatch),
  );
  counter(
    'walproxy.fetch.deadline_misses',
    '{response}',
    'Follower side: fetch responses released at the fill deadline with store reads unanswered',
    (r) => r.observe(wal.fetchFill().deadlineMisses),
  );
  counter(
    'walproxy.fetch.store_backoffs',
    '{backoff}',
    "Follower side: times a store's reads failed or were late and its leaders' fetches went inline",
    (r) => r.observe(wal.fetchFill().backoffs),
  );
  gauge(
    'walproxy.fetch.pending_inline',
    '{partition}',
    'Follower side: partitions asking the leader side for inline bytes now',
    (r) => r.observe(wal.fetchFill().pendingInline),
  );

  counter('walproxy.produce.requests', '{request}', 'Produce requests with batches copied to the WAL', (r) =>
    r.observe(wal.produce().requestsCopied),
  );
  counter('walproxy.produce.batches', '{batch}', 'Produced batches copied to the WAL', (r) =>
    r.observe(wal.produce().batchesCopied),
  );
  counter('walproxy.produce.bytes', 'By', 'Produced batch bytes copied to the WAL', (r) =>
    r.observe(wal.produce().bytesCopied),
  );
  counter(
    'walproxy.produce.durable_ack.failures',
    '{partition}',
    'Durable-ack partitions whose batch was not stored; after_append: the broker had appended it and walproxy answered REQUEST_TIMED_OUT',
    (r) => {
      const p = wal.produce();
      r.observe(p.durableAckFailures - p.durableAckFailuresAfterAppend, { after_append: 'false' });
      r.observe(p.durableAckFailuresAfterAppend, { after_append: 'true' });
    },
  );
  counter('walproxy.produce.not_copied', '{item}', 'Produce data not copied to the WAL, by reason', (r) => {
    const p = wal.produce();
    r.observe(p.unknownTopicIds, { reason: 'unknown_topic_id' });
    r.observe(p.unsupportedVersions, { reason: 'unsupported_version' });
    r.observe(p.requestsNotDecoded, { reason: 'request_not_decoded' });
    r.observe(p.batchesNotCopied, { reason: 'not_v2_batch' });
    r.observe(p.partitionsNotCopied, { reason: 'unreadable_partition' });
    r.observe(p.batchesNotCopiedStoreDegraded, { reason: 'store_degraded' });
    r.observe(p.batchesNotCopiedInlineMode, { reason: 'inline_mode' });
    r.observe(p.partitionsNamedTwice, { reason: 'partition_named_twice' });
  });
  counter(
    'walproxy.produce.not_copied.bytes',
    'By',
    'Produced batch bytes of WAL topics not copied, by reason (store_degraded; inline_mode: the budget group replicates inline)',
    (r) => {
      const p = wal.produce();
      r.observe(p.bytesNotCopiedStoreDegraded, { reason: 'store_degraded' });
      r.observe(p.bytesNotCopiedInlineMode, { reason: 'inline_mode' });
    },
  );

  counter('walproxy.wal.objects.uploaded', '{object}', 'WAL objects stored', (r) =>
    r.observe(wal.writer().objectsUploaded),
  );
  counter('walproxy.wal.bytes.uploaded', 'By', 'Bytes of WAL objects stored', (r) =>
    r.observe(wal.writer().bytesUploaded),
  );
  counter(
    'walproxy.wal.upload.attempts',
    '{attempt}',
    'Store calls for WAL objects, first attempts included',
    (r) => r.observe(wal.writer().uploadAttempts),
  );
  counter('walproxy.wal.upload.retries', '{attempt}', 'Upload attempts after the first', (r) =>
    r.observe(wal.writer().uploadRetries),
  );
  counter(
    'walproxy.wal.upload.failures',
    '{object}',
    'WAL objects not stored (their batches count as not stored)',
    (r) => r.observe(wal.writer().uploadFailures),
  );
  counter('walproxy.wal.seals', '{object}', 'WAL objects sealed, by reason', (r) => {
    const w = wal.writer();
    r.observe(w.sealedBySize, { reason: 'size' });
    r.observe(w.sealedByLinger, { reason: 'linger' });
    r.observe(w.sealedByFlush, { reason: 'flush' });
    r.observe(w.sealedProducersWaiting, { reason: 'producers_waiting' });
  });
  counter(
    'walproxy.wal.objects.abandoned',
    '{object}',
    'WAL objects not uploaded, by reason (below_break_even: they would cost more than their batches inline)',
    (r) => r.observe(wal.writer().objectsAbandoned, { reason: 'below_break_even' }),
  );
  counter(
    'walproxy.wal.bytes.abandoned',
    'By',
    'Batch bytes of WAL objects not uploaded (followers get them inline), by reason',
    (r) => r.observe(wal.writer().bytesAbandoned, { reason: 'below_break_even' }),
  );
  gauge('walproxy.wal.pending.bytes', 'By', 'Batch bytes copied and not yet stored or failed', (r) =>
    r.observe(wal.writer().pendingBytes),
  );
  counter(
    'walproxy.wal.batches.dropped',
    '{batch}',
    'Tentative batches never stored: refused by the broker, or not confirmed in time',
    (r) => {
      const w = wal.writer();
      r.observe(w.batchesRejected, { reason: 'not_appended' });
      r.observe(w.batchesUnconfirmed, { reason: 'unconfirmed' });
    },
  );
  gauge(
    'walproxy.wal.tentative.batches',
    '{batch}',
    'Batches waiting for the broker to confirm the append',
    (r) => r.observe(wal.writer().tentativeBatches),
  );
  gauge('walproxy.wal.uploads.in_flight', '{upload}', 'Store calls running', (r) =>
    r.observe(wal.writer().uploadsInFlight),
  );
  gauge('walproxy.wal.uploads.queued', '{object}', 'Sealed objects waiting for an upload slot', (r) =>
    r.observe(wal.writer().queuedObjects),
  );

  counter(
    'walproxy.wal.reader.gets',
    '{request}',
    'Follower side: GETs sent to the store, by kind (whole object, ranged)',
    (r) => {
      const s = wal.reader();
      r.observe(s.wholeObjectGets, { kind: 'whole' });
      r.observe(s.gets - s.wholeObjectGets, { kind: 'ranged' });
    },
  );
  counter(
    'walproxy.wal.reader.objects',
    '{object}',
    'Follower side: distinct objects read (GETs over this: GETs per object)',
    (r) => r.observe(wal.reader().objectsRead),
  );
  counter('walproxy.wal.reader.bytes', 'By', 'Follower side: bytes the GETs returned', (r) =>
    r.observe(wal.reader().bytesFetched),
  );
  counter(
    'walproxy.wal.reader.cache.lookups',
    '{read}',
    'Follower side: range reads by cache result (hit, miss)',
    (r) => {
      const s = wal.reader();
      r.observe(s.cacheHits, { result: 'hit' });
      r.observe(s.cacheMisses, { result: 'miss' });
    },
  );
  gauge(
    'walproxy.wal.reader.cache.hit_ratio',
    '1',
    'Follower side: cache hits over reads since start (0 before any read)',
    (r) => {
      const s = wal.reader();
      const reads = s.cacheHits + s.cacheMisses;
      r.observe(reads === 0 ? 0 : s.cacheHits / reads);
    },
  );
  gauge('walproxy.wal.reader.cache.size', 'By', 'Follower side: bytes of object spans in the cache', (r) =>
    r.observe(wal.reader().cachedBytes),
  );

  counter('walproxy.wal.metadata.published', '{record}', 'WAL metadata pieces published', (r) =>
    r.observe(wal.metadata().published),
  );
  counter(
    'walproxy.wal.metadata.overflowed',
    '{record}',
    'WAL metadata pieces dropped because the queue was full',
    (r) => r.observe(wal.metadata().overflowed),
  );
  counter('walproxy.wal.metadata.send_failures', '{request}', 'Failed sends to the metadata topic', (r) =>
    r.observe(wal.metadata().sendFailures),
  );
  gauge('walproxy.wal.metadata.queued', '{record}', 'WAL metadata pieces waiting to be sent', (r) =>
    r.observe(wal.metadata().queued),
  );

  const sealing = wal.sealing;
  if (sealing) {
    counter(
      'walproxy.wal.mode.switches',
      '{switch}',
      'Switches of a latency-budget group between the WAL and inline replication, by to (wal, inline) and budget_ms',
      (r) => {
        for (const g of sealing()) {
          const budget = String(g.budgetMs);
          r.observe(g.switchesToWal, { to: 'wal', budget_ms: budget });
          r.observe(g.switchesToInline, { to: 'inline', budget_ms: budget });
        }
      },
    );
    gauge('walproxy.wal.groups', '{group}', 'Latency-budget groups by mode (wal, inline)', (r) => {
      const groups = sealing();
      r.observe(groups.filter((g) => g.mode === 'wal').length, { mode: 'wal' });
      r.observe(groups.filter((g) => g.mode === 'inline').length, { mode: 'inline' });
    });
    gauge(
      'walproxy.wal.group.rate',
      'By/s',
      'Produced bytes per second of a latency-budget group (10 s time constant), by budget_ms and mode',
      (r) => {
        for (const g of sealing()) r.observe(g.bytesPerSec, { budget_ms: String(g.budgetMs), mode: g.mode });
      },
    );
    gauge(
      'walproxy.wal.group.saved_fraction',
      '1',
      'Share of the stock replication cost the group’s recent objects would save through the WAL, by budget_ms',
      (r) => {
        for (const g of sealing()) r.observe(g.savedFraction, { budget_ms: String(g.budgetMs) });
      },
    );
  }

  const cost = wal.cost;
  if (cost) {
    // One pricing per collection serves all three instruments.
    let priced: { at: number; value: ReturnType<typeof cost> } | undefined;
    const current = () => {
      const now = Date.now();
      if (priced === undefined || now - priced.at > 1_000) priced = { at: now, value: cost() };
      return priced.value;
    };
    counter(
      'walproxy.cost.spent',
      'USD',
      'What this sidecar’s replication cost since it started, priced from its counters, by item (put_requests, upload, get_requests, retrieval, storage, cross_zone, cpu_wal; cpu_proxy: relaying and idling, as any proxy, not in the saving)',
      (r) => {
        for (const line of [...current().walproxy, ...current().proxy]) {
          if (line.key !== undefined) r.observe(line.usd, { item: line.key });
        }
      },
    );
    counter(
      'walproxy.cost.stock',
      'USD',
      'What stock replication would have cost for the bytes this sidecar replicated as leader',
      (r) => r.observe(current().stockUsd),
    );
    gauge(
      'walproxy.cost.saved',
      'USD',
      'walproxy.cost.stock less walproxy.cost.spent without cpu_proxy (docs/cost.md, what a saving is); negative: it cost more',
      (r) => r.observe(current().savedUsd),
    );
  }
}

function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}
