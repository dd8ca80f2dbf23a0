import type { SidecarCounters } from './kafka-cluster.js';

/** What e2e files get from the shared cluster (serializable: it crosses into test workers). */
export interface ClusterInfo {
  bootstrap: string;
  directBootstrap: string;
  adminUrls: Record<number, string>;
  sidecarLogs: Record<number, string>;
  kafkaVersion: string;
  ports: { base: number };
  /** Each broker's log.dirs, to compare replicas and WAL objects with what the brokers stored. */
  dataDirs: Record<number, string>;
  /** The real S3 API server the sidecars write WAL objects to. */
  s3: S3Info;
  /** The global setup's control port (harness-control.ts): pids, and a killed sidecar started again. */
  controlUrl: string;
}

export interface S3Info {
  endpoint: string;
  bucket: string;
  /** Key prefix of the WAL objects in the bucket. */
  prefix: string;
  /** moto's pid: SIGSTOP/SIGCONT simulate an outage without losing its in-memory objects. */
  pid: number;
  /** Topics matching this glob go to the WAL on the shared cluster. */
  walTopicGlob: string;
}

export async function sidecarCounters(info: ClusterInfo, brokerId: number): Promise<SidecarCounters> {
  const response = await fetch(`${info.adminUrls[brokerId]}/counters`);
  if (!response.ok) throw new Error(`sidecar ${brokerId} counters: HTTP ${response.status}`);
  return (await response.json()) as SidecarCounters;
}

/** Anything that reads one sidecar's counters: the shared cluster's info, or a KafkaCluster. */
export type CounterSource = ClusterInfo | { sidecarCounters(brokerId: number): Promise<SidecarCounters> };

/** Every sidecar's counters at one moment, by broker id. */
export type CounterSnapshot = Record<number, SidecarCounters>;

/**
 * Reads the counters of every sidecar (brokers 1–3 unless told), so that a test can subtract two
 * snapshots: the shared cluster's counters are cumulative over every file that ran before.
 */
export async function counterSnapshot(
  source: CounterSource,
  brokerIds: readonly number[] = [1, 2, 3],
): Promise<CounterSnapshot> {
  const read = (id: number) =>
    'adminUrls' in source ? sidecarCounters(source, id) : source.sidecarCounters(id);
  const all = await Promise.all(brokerIds.map(read));
  return Object.fromEntries(brokerIds.map((id, i) => [id, all[i]!]));
}

/**
 * What `pick` counted between two snapshots, summed over the sidecars of `after` (or only over
 * `brokerIds`). A counter a sidecar does not have counts as 0.
 */
export function counterDelta(
  before: CounterSnapshot,
  after: CounterSnapshot,
  pick: (counters: SidecarCounters) => number | undefined,
  brokerIds: readonly number[] = Object.keys(after).map(Number),
): number {
  return brokerIds.reduce((sum, id) => {
    const was = before[id] ? (pick(before[id]) ?? 0) : 0;
    return sum + (pick(after[id]!) ?? 0) - was;
  }, 0);
}

/** The counters tests subtract most, as `pick` functions for counterDelta. */
export const counters = {
  /** Leader side: batches a follower got as a reference instead of bytes. */
  referencesSent: (c: SidecarCounters) => numberAt(c.wal?.fetchStrip, 'referencesSent'),
  /** Leader side: record bytes sent as references. */
  bytesReferenced: (c: SidecarCounters) => numberAt(c.wal?.fetchStrip, 'bytesReferenced'),
  /** Leader side: record bytes of marked (follower) Fetch responses that went inline. */
  inlineBytes: (c: SidecarCounters) => numberAt(c.wal?.fetchStrip, 'inlineBytes'),
  /** Leader side: batches sent inline for one reason (fetch-strip.ts, FetchStripStats.inline). */
  inlineBatches: (reason: string) => (c: SidecarCounters) =>
    numberAt(c.wal?.fetchStrip?.inline as Record<string, unknown> | undefined, reason),
  /**
   * Follower side: record bytes that came inline in answers to its fetches (those it sent unmarked
   * while backing off from a store included, where the follower side counts them).
   */
  followerInlineBytes: (c: SidecarCounters) => numberAt(c.wal?.fetchFill, 'inlineBytes'),
  /** Follower side: batches filled back from the store. */
  referencesFilled: (c: SidecarCounters) => numberAt(c.wal?.fetchFill, 'referencesFilled'),
  /** Leader side: Produce partitions answered with an error because the store did not confirm in time. */
  durableAckFailures: (c: SidecarCounters) => c.wal?.produce.durableAckFailures,
  /**
   * Leader side: batches not copied to the WAL because the store was degraded (a failed or slow
   * upload, a load-starved store): they replicate inline, as stock. The counted fallback.
   */
  batchesNotCopiedStoreDegraded: (c: SidecarCounters) =>
    numberAt(c.wal?.produce as Record<string, unknown> | undefined, 'batchesNotCopiedStoreDegraded'),
  /** Requests of one API and version ('Produce v13') that reached one listener ('client'). */
  requests: (listener: string, apiAndVersion: string) => (c: SidecarCounters) =>
    c.listeners[listener]?.requests[apiAndVersion],
};

function numberAt(record: Record<string, unknown> | undefined, key: string): number | undefined {
  const value = record?.[key];
  return typeof value === 'number' ? value : undefined;
}

/**
 * Waits until no sidecar's WAL writer holds bytes not yet stored and no WAL metadata publisher has
 * records queued or a send under way. The publisher is a kafkajs producer whose Produce requests
 * reach the sidecars' client listeners (the brokers advertise the sidecars' addresses), up to one
 * flush interval (2 s) after the WAL objects they index were stored: a test that counts the client
 * listeners' requests by version starts counting after an earlier file's last records went out,
 * not during their send.
 */
export async function walPublishingIdle(
  source: CounterSource,
  { timeoutMs = 30_000, brokerIds = [1, 2, 3] as readonly number[] } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const snapshot = await counterSnapshot(source, brokerIds);
    const busy = Object.values(snapshot).filter(
      (c) =>
        (c.wal?.writer.pendingBytes ?? 0) > 0 ||
        (c.wal?.metadata.queued ?? 0) > 0 ||
        (c.wal?.metadata.inFlight ?? 0) > 0,
    );
    if (busy.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(
        `WAL writers or metadata publishers still busy after ${timeoutMs} ms: ${busy.map((c) => `sidecar ${c.brokerId} pendingBytes ${c.wal?.writer.pendingBytes}, metadata ${JSON.stringify(c.wal?.metadata)}`).join('; ')}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
