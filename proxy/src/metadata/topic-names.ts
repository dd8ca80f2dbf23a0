import { ApiKey, decodeMetadataResponse, encodeMetadataRequest, topicNamesById } from '@walproxy/shared';
import type { Logger } from '../log.js';
import type { HostPort } from '../net/proxy-listener.js';
import { brokerRequest } from './broker-request.js';
import type { SaslCredentials } from './sasl-client.js';

export interface TopicNamesOptions {
  refreshIntervalMs?: number;
  /** An unknown id triggers a refresh at most this often. */
  minRefreshGapMs?: number;
  /** Credentials when the broker's listener is SASL_PLAINTEXT (--metadata-sasl-*). */
  sasl?: SaslCredentials;
}

/** Metadata v12: topic ids in the response (v10+), flexible, and known to every 3.x/4.x broker. */
const METADATA_VERSION = 12;

/**
 * Topic id → name, from the local broker. Produce v13 (KIP-516) names topics by id only, while
 * operators select WAL topics by name. Refreshed periodically, and at once (rate-limited) when
 * an unknown id shows up, e.g. a topic created a moment ago.
 */
export class TopicNames {
  private names = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private refreshing?: Promise<void>;
  private lastRefreshMs = 0;

  private readonly refreshIntervalMs: number;
  private readonly minRefreshGapMs: number;

  constructor(
    private readonly broker: HostPort,
    private readonly log: Logger,
    private readonly options: TopicNamesOptions = {},
  ) {
    this.refreshIntervalMs = options.refreshIntervalMs ?? 30_000;
    this.minRefreshGapMs = options.minRefreshGapMs ?? 1_000;
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

  /** The name of a topic id (hex), or undefined while unknown (a refresh is then under way). */
  nameOf(topicId: string): string | undefined {
    const name = this.names.get(topicId);
    if (name === undefined && Date.now() - this.lastRefreshMs >= this.minRefreshGapMs) {
      void this.refresh().catch(() => undefined);
    }
    return name;
  }

  /** The name of a topic id, asking the broker again if it is not known yet. */
  async resolve(topicId: string): Promise<string | undefined> {
    const known = this.names.get(topicId);
    if (known !== undefined) return known;
    // A refresh already under way may have started before the topic existed: one more if so.
    for (let attempt = 0; attempt < 2 && !this.names.has(topicId); attempt++) {
      await this.refresh().catch((error: Error) =>
        this.log.warn({ error: error.message }, 'topic id lookup failed'),
      );
    }
    return this.names.get(topicId);
  }

  idOf(name: string): string | undefined {
    for (const [id, n] of this.names) if (n === name) return id;
    return undefined;
  }

  refresh(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    this.lastRefreshMs = Date.now();
    this.refreshing = (async () => {
      try {
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
        this.names = topicNamesById(decodeMetadataResponse(body, METADATA_VERSION));
      } finally {
        this.refreshing = undefined;
      }
    })();
    return this.refreshing;
  }
}
