import { LATENCY_BUDGET_TOPIC_KEY, parseLatencyBudgetMs } from '../wal/sealing-policy.js';
import { WAL_WRITER_LIMITS } from '../wal/wal-writer-types.js';

/**
 * Per-topic settings, chosen by name or glob (`--wal-topic`, `--topic-config`). Later rules win
 * over earlier ones, so a specific `--topic-config orders:latency.budget.ms=25` can follow a broad
 * `--topic-config '*:latency.budget.ms=100'`.
 */
export interface TopicSettings {
  /** Whether produced batches of this topic go to the WAL. */
  wal: boolean;
  /**
   * The acks=all latency the WAL may add to this topic's batches (docs/cost.md): its objects
   * wait at most this less the store's latency, and topics of one budget share their objects.
   */
  latencyBudgetMs: number;
  /**
   * Deprecated (`latency.budget.ms` replaces it): when set, a batch of this topic waits at most
   * this long in its object, even where the budget would allow more.
   */
  lingerMs?: number | undefined;
  /** An object holding this topic's batches is sealed by size at this many bytes at most. */
  targetBytes: number;
  /** Release the Produce response only once the batches it acknowledges are stored. */
  durableAck: boolean;
  /**
   * How followers get this topic's batches. `auto` (default): through the WAL while the topic's
   * budget group pays for its objects, inline (not copied) while it would not (the sealing
   * policy). `wal`: always as references they read from the store, whatever the objects cost.
   * `inline`: as stock replication (the WAL is still written, e.g. as the extra durable copy).
   */
  mode: TopicMode;
  /** Leader side: how long a follower's Fetch response may wait for this topic's batches still uploading. */
  maxHoldMs: number;
  /**
   * Zone-local produce (docs/zone-local.md): a zone-aware producer's batches for a leader in
   * another zone are stored in its own zone's bucket and forwarded to the leader by reference.
   */
  zoneLocal: boolean;
}

export type TopicMode = 'auto' | 'wal' | 'inline';
const TOPIC_MODES: readonly TopicMode[] = ['auto', 'wal', 'inline'];

export interface TopicRule {
  pattern: string;
  settings: Partial<TopicSettings>;
}

/** A parsed value, or the reason the text is not one. */
type Parsed<T> = { value: T } | { error: string };

/** Keys accepted by --topic-config, with how to parse each value. */
export const TOPIC_CONFIG_KEYS = {
  'linger.ms': (v: string) =>
    parseBoundedInt(v, WAL_WRITER_LIMITS.lingerMs.min, WAL_WRITER_LIMITS.lingerMs.max),
  'target.bytes': (v: string) =>
    parseBoundedInt(v, WAL_WRITER_LIMITS.targetBytes.min, WAL_WRITER_LIMITS.targetBytes.max),
  'durable.ack': (v: string) => parseBool(v),
  'max.hold.ms': (v: string) => parseBoundedInt(v, 0, 60_000),
  wal: (v: string) => parseBool(v),
  mode: (v: string): Parsed<TopicMode> =>
    (TOPIC_MODES as readonly string[]).includes(v)
      ? { value: v as TopicMode }
      : { error: `'${v}' is not ${TOPIC_MODES.join(', ')}` },
  'zone.local': (v: string) => parseBool(v),
  [LATENCY_BUDGET_TOPIC_KEY]: parseLatencyBudgetMs,
} as const satisfies Record<string, (v: string) => Parsed<unknown>>;

const SETTING_OF_KEY: Record<keyof typeof TOPIC_CONFIG_KEYS, keyof TopicSettings> = {
  'linger.ms': 'lingerMs',
  'target.bytes': 'targetBytes',
  'durable.ack': 'durableAck',
  'max.hold.ms': 'maxHoldMs',
  wal: 'wal',
  mode: 'mode',
  'zone.local': 'zoneLocal',
  [LATENCY_BUDGET_TOPIC_KEY]: 'latencyBudgetMs',
};

function parseBoundedInt(v: string, min: number, max: number): Parsed<number> {
  const n = Number(v);
  return Number.isInteger(n) && n >= min && n <= max
    ? { value: n }
    : { error: `'${v}' is not a whole number from ${min} to ${max}` };
}

function parseBool(v: string): Parsed<boolean> {
  if (v === 'true') return { value: true };
  if (v === 'false') return { value: false };
  return { error: `'${v}' is not true or false` };
}

/** Parses `<topic-or-glob>:<key>=<value>`; returns a message naming what is wrong otherwise. */
export function parseTopicConfig(text: string): TopicRule | string {
  const match = /^([^:]+):([a-z.]+)=(.*)$/.exec(text);
  if (!match) return `'${text}' is not <topic-or-glob>:<key>=<value>`;
  const [, pattern, key, value] = match as unknown as [string, string, string, string];
  if (!(key in TOPIC_CONFIG_KEYS)) {
    return `'${key}' in '${text}' is not one of ${Object.keys(TOPIC_CONFIG_KEYS).join(', ')}`;
  }
  const parsed: Parsed<unknown> = TOPIC_CONFIG_KEYS[key as keyof typeof TOPIC_CONFIG_KEYS](value);
  if ('error' in parsed) return `${key} in '${text}': ${parsed.error}`;
  return { pattern, settings: { [SETTING_OF_KEY[key as keyof typeof TOPIC_CONFIG_KEYS]]: parsed.value } };
}

/** `*` matches any run of characters, `?` one character; everything else is literal. */
export function globToRegExp(glob: string): RegExp {
  const escaped = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${escaped}$`);
}

export class TopicPolicy {
  private readonly rules: Array<{ match: RegExp; settings: Partial<TopicSettings> }>;
  private readonly cache = new Map<string, TopicSettings>();

  constructor(
    private readonly defaults: TopicSettings,
    rules: TopicRule[],
  ) {
    this.rules = rules.map((r) => ({ match: globToRegExp(r.pattern), settings: r.settings }));
  }

  settingsFor(topic: string): TopicSettings {
    let settings = this.cache.get(topic);
    if (!settings) {
      settings = { ...this.defaults };
      for (const rule of this.rules) if (rule.match.test(topic)) Object.assign(settings, rule.settings);
      // Internal topics (__consumer_offsets, __transaction_state, the WAL's own metadata topic)
      // are written by coordinators, not only through Produce: never WAL them.
      if (topic.startsWith('__')) {
        settings.wal = false;
        settings.zoneLocal = false;
      }
      if (this.cache.size > 100_000) this.cache.clear();
      this.cache.set(topic, settings);
    }
    return settings;
  }
}
