import { ApiKey, decodeMetadataResponse, encodeMetadataRequest, topicNamesById } from '@walproxy/shared';
import type { Logger } from '../log.js';
import type { HostPort } from '../net/proxy-listener.js';
import { brokerRequest } from './broker-request.js';
import { type PartitionHealth, partitionHealth } from './partition-health.js';
import type { SaslCredentials } from './sasl-client.js';

export interface TopicNamesOptions {
  refreshIntervalMs?: number;
  /** Refreshes for ids not known run at most this often, one at a time (machine-wide: one map per sidecar). */
  minRefreshGapMs?: number;
  /**
   * An id a refresh did not name (no Describe ACL on it, or not propagated yet) is taken as
   * unknown this long: no refresh, no held response for it in the meantime.
   */
  unknownTtlMs?: number;
  /** Credentials when the broker's listener is SASL_PLAINTEXT (--metadata-sasl-*). */
  sasl?: SaslCredentials;
  /** How the id → name map is read; the local broker's Metadata by default (tests replace it). */
  fetchNames?: () => Promise<Map<string, string>>;
  now?: () => number;
  /** The local broker's node.id: each refresh also counts the partitions it leads (partitionHealth). */
  brokerId?: number;
}

/** Metadata v12: topic ids in the response (v10+), flexible, and known to every 3.x/4.x broker. */
const METADATA_VERSION = 12;

/**
 * Topic id → name, from the local broker. Produce v13 (KIP-516) names topics by id only, while
 * operators select WAL topics by name. Refreshed periodically, and (rate-limited: one at a time,
 * at most one a second) when an unknown id shows up, e.g. a topic created a moment ago. An id a
 * refresh that started after it was first seen did not name is remembered as unknown for
 * `unknownTtlMs`: a sidecar granted Describe only on WAL topics (docs/security.md) sees ids of
 * every other topic in Produce v13, and must not pay a Metadata request for each of them.
 */
export class TopicNames {
  private names = new Map<string, string>();
  /** Ids a refresh did not name, with when that refresh started. */
  private readonly unknown = new Map<string, number>();
  /** Ids asked for and not known, with how many refreshes had started when first asked for. */
  private readonly asked = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private refreshing?: Promise<void>;
  private lastRefreshMs = Number.NEGATIVE_INFINITY;
  /** Refreshes started, the periodic ones included. */
  refreshes = 0;
  /** The broker's partitions as the last answered refresh saw them; undefined before one (or without brokerId). */
  partitions: PartitionHealth | undefined;

  private readonly refreshIntervalMs: number;
  private readonly minRefreshGapMs: number;
  private readonly unknownTtlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly broker: HostPort,
    private readonly log: Logger,
    private readonly options: TopicNamesOptions = {},
  ) {
    this.refreshIntervalMs = options.refreshIntervalMs ?? 30_000;
    this.minRefreshGapMs = options.minRefreshGapMs ?? 1_000;
    this.unknownTtlMs = options.unknownTtlMs ?? 30_000;
    this.now = options.now ?? Date.now;
  }

  async start(): Promise<void> {
    await this.refresh().catch((error: Error) =>
      this.log.warn({ error: error.message }, 'topic id lookup failed; will retry'),
    );
    this.timer = setInterval(() => void this.refresh().catch(() => undefined), this.refreshIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * The name of a topic id (hex), or undefined while unknown; a rate-limited refresh then starts
   * unless the id is known to be unknown.
   */
  nameOf(topicId: string): string | undefined {
    const name = this.names.get(topicId);
    if (name !== undefined || this.isUnknown(topicId)) return name;
    this.noteAsked(topicId);
    if (this.refreshing === undefined && this.now() - this.lastRefreshMs >= this.minRefreshGapMs) {
      void this.refresh().catch(() => undefined);
    }
    return undefined;
  }

  /** Whether a recent refresh, started after the id was first asked for, did not name it. */
  isUnknown(topicId: string): boolean {
    const since = this.unknown.get(topicId);
    if (since === undefined) return false;
    if (this.now() - since < this.unknownTtlMs) return true;
    this.unknown.delete(topicId);
    return false;
  }

  /**
   * The name of a topic id, asking the broker if it is not known yet: waits for a refresh that
   * started after this call (rate-limited, so at most about `minRefreshGapMs` plus one Metadata
   * round trip). Undefined at once for an id known to be unknown.
   */
  async resolve(topicId: string): Promise<string | undefined> {
    const known = this.names.get(topicId);
    if (known !== undefined || this.isUnknown(topicId)) return known;
    this.noteAsked(topicId);
    const askedAt = this.asked.get(topicId)!;
    // A refresh under way may have started before the topic existed: wait for one that did not.
    while (!this.names.has(topicId) && !this.isUnknown(topicId)) {
      if (this.refreshing !== undefined) {
        const number = this.refreshes;
        await this.refreshing.catch(() => undefined);
        if (number > askedAt) break;
        continue;
      }
      const wait = this.lastRefreshMs + this.minRefreshGapMs - this.now();
      if (wait > 0) {
        await new Promise((r) => setTimeout(r, wait));
        continue;
      }
      await this.refresh().catch((error: Error) =>
        this.log.warn({ error: error.message }, 'topic id lookup failed'),
      );
      break;
    }
    return this.names.get(topicId);
  }

  idOf(name: string): string | undefined {
    for (const [id, n] of this.names) if (n === name) return id;
    return undefined;
  }

  refresh(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    const startedAt = this.now();
    this.lastRefreshMs = startedAt;
    const number = ++this.refreshes;
    this.refreshing = (async () => {
      try {
        this.names = await (this.options.fetchNames ?? (() => this.fetchNames()))();
        // Ids first asked for before this refresh started and still not named: unknown for a while.
        for (const [id, askedAt] of this.asked) {
          if (this.names.has(id)) this.asked.delete(id);
          else if (askedAt < number) {
            this.asked.delete(id);
            this.unknown.set(id, startedAt);
          }
        }
        for (const id of this.unknown.keys()) if (this.names.has(id)) this.unknown.delete(id);
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }

  private noteAsked(topicId: string): void {
    if (this.asked.has(topicId)) return;
    // Bounded: a client naming random ids must not grow it without end.
    if (this.asked.size >= 10_000) this.asked.clear();
    this.asked.set(topicId, this.refreshes);
    if (this.unknown.size >= 10_000) this.unknown.clear();
  }

  private async fetchNames(): Promise<Map<string, string>> {
    const body = await brokerRequest(
      this.broker,
      ApiKey.Metadata,
      METADATA_VERSION,
      encodeMetadataRequest(
        { topics: null, allowAutoTopicCreation: false, includeTopicAuthorizedOperations: false },
        METADATA_VERSION,
      ),
      this.options.sasl ? { sasl: this.options.sasl } : {},
    );
    const metadata = decodeMetadataResponse(body, METADATA_VERSION);
    if (this.options.brokerId !== undefined)
      this.partitions = partitionHealth(metadata, this.options.brokerId);
    return topicNamesById(metadata);
  }
}
