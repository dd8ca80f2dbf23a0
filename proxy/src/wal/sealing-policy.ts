// When the leader side seals a WAL object, and whether a group of topics goes through the WAL at
// all (issue #14, docs/cost.md "Sealing policy"). Pure: no timers, no I/O; every call gets the
// time. One policy per sidecar (per broker); the WAL writer asks it, the Produce path feeds it.
//
// Topics are grouped by their latency budget: one open object per budget value, so a topic with a
// tight budget never seals a loose one's objects early, and a group's objects, mode and rate are
// its own. Within a group an object waits as long as its oldest batch's budget allows (budget less
// the store's latency) unless it fills up first, and is uploaded only if it saves more than its
// requests cost (break-even); a smaller one is abandoned and its batches replicate inline. A group
// whose objects would not pay replicates inline altogether, and switches back with hysteresis.
import type { ObjectEconomics } from '../cost/economics.js';
import { lingerFor, type StoreLatency, WAL_DEFAULTS } from './defaults.js';

export type ReplicationMode = 'wal' | 'inline';

export const SEALING_DEFAULTS = {
  // The WAL's shape: one set for the writer, the policy, the flags and `walproxy cost` (defaults.ts).
  latencyBudgetMs: WAL_DEFAULTS.latencyBudgetMs,
  storeLatency: WAL_DEFAULTS.storeLatency,
  timerSlackMs: WAL_DEFAULTS.timerSlackMs,
  maxObjectBytes: WAL_DEFAULTS.objectBytes,
  /** Time constant of a group's rate and saving estimates. */
  rateWindowMs: 10_000,
  /**
   * A group leaves the WAL only after its objects have paid too little for this long without a
   * break: staying costs nothing (an object below break-even is abandoned, not uploaded) but the
   * held batches' latency, so a lull between bursts that pay is no reason to leave.
   */
  exitAfterMs: 60_000,
  /**
   * A group enters the WAL only once this many of its virtual objects in a row would each have
   * paid (at least the entry threshold's size): the first requests after a quiet spell, holding
   * what a producer accumulated while it fetched metadata (up to a batch.size per partition per
   * request), make a few large objects at a rate whose steady objects do not pay. A rate that pays
   * enters this many lingers after it shows, a burst included.
   */
  enterAfterPayingObjects: 3,
  /** Least time in a mode before the next switch (the first one: rateWindowMs after the group appears). */
  minDwellMs: 30_000,
  /** Switch to the WAL when the group's objects would save as much as steady objects this many times break-even… */
  walAtBreakEvenMultiple: 1.5,
  /** …and back to inline when they would save less than steady objects this many times break-even. */
  inlineBelowBreakEvenMultiple: 1.1,
  /**
   * Real objects abandoned in a row (below break-even, none uploaded between) after which a group
   * leaves the WAL at once, whatever the dwell and the exit delay: its virtual objects promised
   * what its real ones do not deliver (producers whose requests are capped by their batch.size
   * make objects of one request each), and every held batch waits a linger for nothing.
   */
  abandonedInARowToLeave: 20,
  /**
   * After a WAL stretch whose real objects did not pay, the group enters the WAL again only at
   * this multiple of the rate it entered at — or once this long has passed (the workload may
   * have changed).
   */
  retryRateMultiple: 1.5,
  retryAfterMs: 600_000,
} as const;

/** `latency.budget.ms` values accepted (per topic and --wal-latency-budget-ms). */
export const LATENCY_BUDGET_LIMITS = { min: 1, max: 60_000 } as const;
export const LATENCY_BUDGET_TOPIC_KEY = 'latency.budget.ms';

/** The shape of topic-policy.ts's TOPIC_CONFIG_KEYS parsers. */
export function parseLatencyBudgetMs(text: string): { value: number } | { error: string } {
  const n = Number(text);
  const { min, max } = LATENCY_BUDGET_LIMITS;
  return /^\d+$/.test(text) && n >= min && n <= max
    ? { value: n }
    : { error: `'${text}' is not a whole number of milliseconds from ${min} to ${max}` };
}

export interface SealingPolicyOptions {
  economics: Pick<
    ObjectEconomics,
    'breakEvenObjectBytes' | 'savingUsd' | 'savingPerByte' | 'stockUsdPerByte'
  >;
  maxObjectBytes?: number;
  storeLatency?: StoreLatency;
  timerSlackMs?: number;
  rateWindowMs?: number;
  exitAfterMs?: number;
  enterAfterPayingObjects?: number;
  minDwellMs?: number;
  walAtBreakEvenMultiple?: number;
  inlineBelowBreakEvenMultiple?: number;
  abandonedInARowToLeave?: number;
  retryAfterMs?: number;
  /** Called once per switch, synchronously, from the call that noticed it (count it, log it). */
  onSwitch?: (event: ModeSwitch) => void;
}

/** What the writer knows about a group's open object. */
export interface OpenObject {
  /** Record batch bytes in it (not the object's header, index or footer). */
  bytes: number;
  /** When its first batch was appended: the oldest batch's budget runs from here. */
  openedAtMs: number;
  /** It holds a batch whose topic needs the stored copy whatever it costs (durable ack, mode=wal). */
  requiresStore: boolean;
  /**
   * An earlier deadline than the budget's, when a batch in it may wait less (a topic's
   * deprecated `linger.ms`, a tentative batch confirmed late): the object seals or is abandoned
   * then.
   */
  sealAtMs?: number | undefined;
}

export type SealDecision =
  /** Nothing yet: ask again at sealAtMs (arm a timer), or on the next append. */
  | { action: 'wait'; sealAtMs: number }
  | { action: 'seal'; reason: 'size' | 'deadline' }
  /** Upload nothing: the object would cost more than it saves; its batches replicate inline. */
  | { action: 'inline'; reason: 'below_break_even' };

export interface ModeSwitch {
  budgetMs: number;
  from: ReplicationMode;
  to: ReplicationMode;
  atMs: number;
  /** What the group's recent objects would save through the WAL, as a share of the stock cost. */
  savedFraction: number;
  bytesPerSec: number;
}

export interface SealingGroupStats {
  budgetMs: number;
  mode: ReplicationMode;
  /** Longest an object waits for more batches: budget − store latency − timer slack. */
  lingerMs: number;
  bytesPerSec: number;
  /** What the group's recent objects would save through the WAL (0 when none would pay). */
  savedFraction: number;
  switchesToWal: number;
  switchesToInline: number;
}

interface Group {
  budgetMs: number;
  mode: ReplicationMode;
  createdAtMs: number;
  switchedAtMs: number;
  switchesToWal: number;
  switchesToInline: number;
  /** The object the group would have open now, whether its batches go to the WAL or not. */
  virtual: { openedAtMs: number; bytes: number } | undefined;
  /** Exponentially decayed sums (time constant rateWindowMs), as of decayedAtMs. */
  decayedAtMs: number;
  observedBytes: number;
  /** Bytes of closed virtual objects, and what those would have saved (0 for each one below break-even). */
  closedBytes: number;
  savedUsd: number;
  /** Since when, without a break, the group's objects have paid less than the inline threshold. */
  belowExitSinceMs: number | undefined;
  /** Closed virtual objects in a row of at least the entry threshold's size. */
  payingInARow: number;
  /** The group's rate when it last entered the WAL. */
  enteredAtRate: number;
  /** The real objects of the current WAL stretch: bytes, what the uploaded ones saved, abandoned in a row. */
  real: { bytes: number; savedUsd: number; abandonedInARow: number };
  /** The last WAL stretch whose real objects did not pay: the rate it entered at, and when it ended. */
  failed: { atRate: number; endedAtMs: number } | undefined;
}

export class SealingPolicy {
  readonly maxObjectBytes: number;
  readonly #economics: SealingPolicyOptions['economics'];
  #storeLatency: StoreLatency;
  readonly #timerSlackMs: number;
  readonly #tau: number;
  readonly #exitAfterMs: number;
  readonly #enterAfterPayingObjects: number;
  /** Size of the steady objects at the entry threshold; undefined when nothing ever pays. */
  readonly #walAtBytes: number | undefined;
  readonly #minDwellMs: number;
  /** Saving per byte of steady objects at the two thresholds; undefined when nothing ever pays. */
  readonly #walAtPerByte: number | undefined;
  readonly #inlineBelowPerByte: number | undefined;
  readonly #onSwitch: ((event: ModeSwitch) => void) | undefined;
  readonly #abandonedInARowToLeave: number;
  readonly #retryAfterMs: number;
  readonly #groups = new Map<number, Group>();

  constructor(options: SealingPolicyOptions) {
    const d = SEALING_DEFAULTS;
    this.#economics = options.economics;
    this.maxObjectBytes = options.maxObjectBytes ?? d.maxObjectBytes;
    this.#storeLatency = options.storeLatency ?? d.storeLatency;
    this.#timerSlackMs = options.timerSlackMs ?? d.timerSlackMs;
    this.#tau = options.rateWindowMs ?? d.rateWindowMs;
    this.#exitAfterMs = options.exitAfterMs ?? d.exitAfterMs;
    this.#enterAfterPayingObjects = options.enterAfterPayingObjects ?? d.enterAfterPayingObjects;
    this.#minDwellMs = options.minDwellMs ?? d.minDwellMs;
    const enter = options.walAtBreakEvenMultiple ?? d.walAtBreakEvenMultiple;
    const exit = options.inlineBelowBreakEvenMultiple ?? d.inlineBelowBreakEvenMultiple;
    if (!(exit >= 1 && enter >= exit)) {
      throw new RangeError(`need 1 <= inline multiple (${exit}) <= wal multiple (${enter})`);
    }
    const breakEven = options.economics.breakEvenObjectBytes;
    if (breakEven !== undefined) {
      this.#walAtBytes = breakEven * enter;
      this.#walAtPerByte = options.economics.savingPerByte(this.#walAtBytes);
      this.#inlineBelowPerByte = options.economics.savingPerByte(breakEven * exit);
    }
    this.#onSwitch = options.onSwitch;
    this.#abandonedInARowToLeave = options.abandonedInARowToLeave ?? d.abandonedInARowToLeave;
    this.#retryAfterMs = options.retryAfterMs ?? d.retryAfterMs;
  }

  /**
   * A real object of a `mode=auto` group was decided (the writer: uploaded, or abandoned below
   * break-even). The policy chooses by the objects the group would make; these are the ones it
   * does make, and they may be smaller (each producer's next acks=all request waits for the
   * object, and a request is capped by the producer's batch.size): a WAL stretch whose real
   * objects do not pay ends, and is not tried again at the same rate for a while.
   */
  objectDecided(budgetMs: number, bytes: number, uploaded: boolean, nowMs: number): void {
    const g = this.#groups.get(budgetMs);
    if (g === undefined || g.mode !== 'wal') return;
    g.real.bytes += bytes;
    if (uploaded) {
      g.real.savedUsd += this.#economics.savingUsd(bytes);
      g.real.abandonedInARow = 0;
      return;
    }
    if (++g.real.abandonedInARow >= this.#abandonedInARowToLeave) this.#switch(g, 'inline', nowMs);
  }

  /** Longest an object of this budget waits for more batches; 0: the WAL can never meet the budget. */
  lingerMs(budgetMs: number): number {
    return lingerFor(budgetMs, this.#storeLatency, this.#timerSlackMs);
  }

  /** Measured store latencies (e.g. the upload and fill p99s) replace the assumed ones from here on. */
  setStoreLatency(latency: StoreLatency): void {
    this.#storeLatency = latency;
  }

  /**
   * Every produced batch of a WAL topic with this budget, whether it is copied or not: the
   * group's rate and mode come from these, inline groups included.
   */
  observe(budgetMs: number, bytes: number, nowMs: number): void {
    const g = this.#group(budgetMs, nowMs);
    this.#closeExpired(g, nowMs);
    this.#decay(g, nowMs);
    g.observedBytes += bytes;
    // The same rule as the writer's: seal before a batch that would overfill a non-empty object.
    if (g.virtual !== undefined && g.virtual.bytes + bytes > this.maxObjectBytes)
      this.#closeVirtual(g, nowMs);
    g.virtual ??= { openedAtMs: nowMs, bytes: 0 };
    g.virtual.bytes += bytes;
    if (g.virtual.bytes >= this.maxObjectBytes) this.#closeVirtual(g, nowMs);
    this.#evaluate(g, nowMs);
  }

  /** Whether this budget's batches go to the WAL now ('wal') or replicate as stock ('inline'). */
  mode(budgetMs: number, nowMs: number): ReplicationMode {
    const g = this.#group(budgetMs, nowMs);
    this.#closeExpired(g, nowMs);
    this.#evaluate(g, nowMs);
    return g.mode;
  }

  /**
   * A group's mode as last decided, without deciding again or creating the group: undefined for
   * a budget no batch was observed with. For those who explain what the produce path chose (the
   * fetch strip's inline reasons), not for choosing.
   */
  currentMode(budgetMs: number): ReplicationMode | undefined {
    return this.#groups.get(budgetMs)?.mode;
  }

  /**
   * What to do with a group's open object now: after each append and when the timer set for a
   * `wait` fires. Never later than the oldest batch's budget allows; never an upload that costs
   * more than it saves, unless a batch in it needs the stored copy.
   */
  sealDecision(budgetMs: number, open: OpenObject, nowMs: number): SealDecision {
    if (open.bytes >= this.maxObjectBytes) return { action: 'seal', reason: 'size' };
    const sealAtMs = Math.min(open.openedAtMs + this.lingerMs(budgetMs), open.sealAtMs ?? Infinity);
    if (nowMs < sealAtMs) return { action: 'wait', sealAtMs };
    if (open.requiresStore || this.#economics.savingUsd(open.bytes) > 0) {
      return { action: 'seal', reason: 'deadline' };
    }
    return { action: 'inline', reason: 'below_break_even' };
  }

  stats(nowMs: number): SealingGroupStats[] {
    return [...this.#groups.values()].map((g) => {
      this.#closeExpired(g, nowMs);
      this.#decay(g, nowMs);
      return {
        budgetMs: g.budgetMs,
        mode: g.mode,
        lingerMs: this.lingerMs(g.budgetMs),
        bytesPerSec: this.#rate(g, nowMs),
        savedFraction: this.#savedFraction(g),
        switchesToWal: g.switchesToWal,
        switchesToInline: g.switchesToInline,
      };
    });
  }

  #group(budgetMs: number, nowMs: number): Group {
    let g = this.#groups.get(budgetMs);
    if (g === undefined) {
      // Stock replication until the group has shown the WAL would pay: never worse than stock.
      g = {
        budgetMs,
        mode: 'inline',
        createdAtMs: nowMs,
        switchedAtMs: nowMs,
        switchesToWal: 0,
        switchesToInline: 0,
        virtual: undefined,
        decayedAtMs: nowMs,
        observedBytes: 0,
        closedBytes: 0,
        savedUsd: 0,
        belowExitSinceMs: undefined,
        payingInARow: 0,
        enteredAtRate: 0,
        real: { bytes: 0, savedUsd: 0, abandonedInARow: 0 },
        failed: undefined,
      };
      this.#groups.set(budgetMs, g);
    }
    return g;
  }

  #decay(g: Group, toMs: number): void {
    if (toMs <= g.decayedAtMs) return;
    const f = Math.exp(-(toMs - g.decayedAtMs) / this.#tau);
    g.observedBytes *= f;
    g.closedBytes *= f;
    g.savedUsd *= f;
    g.decayedAtMs = toMs;
  }

  /** A virtual object whose linger ran out closed then, whether anything arrived since or not. */
  #closeExpired(g: Group, nowMs: number): void {
    if (g.virtual === undefined) return;
    const deadline = g.virtual.openedAtMs + this.lingerMs(g.budgetMs);
    if (nowMs >= deadline) this.#closeVirtual(g, deadline);
  }

  #closeVirtual(g: Group, atMs: number): void {
    const v = g.virtual;
    if (v === undefined) return;
    g.virtual = undefined;
    this.#decay(g, atMs);
    g.closedBytes += v.bytes;
    g.savedUsd += Math.max(0, this.#economics.savingUsd(v.bytes));
    g.payingInARow = this.#walAtBytes !== undefined && v.bytes >= this.#walAtBytes ? g.payingInARow + 1 : 0;
  }

  #savedFraction(g: Group): number {
    const perStockByte = this.#economics.stockUsdPerByte;
    return g.closedBytes > 0 && perStockByte > 0 ? g.savedUsd / g.closedBytes / perStockByte : 0;
  }

  /** Decayed bytes over the decayed time since the group appeared: unbiased from the first batch on. */
  #rate(g: Group, nowMs: number): number {
    const window = this.#tau * (1 - Math.exp(-(nowMs - g.createdAtMs) / this.#tau));
    return window > 0 ? (g.observedBytes * 1000) / window : 0;
  }

  #evaluate(g: Group, nowMs: number): void {
    const perByte = g.closedBytes > 0 ? g.savedUsd / g.closedBytes : 0;
    const canPay = this.#walAtPerByte !== undefined && this.lingerMs(g.budgetMs) > 0;
    if (!canPay || this.#inlineBelowPerByte === undefined || perByte < this.#inlineBelowPerByte) {
      g.belowExitSinceMs ??= nowMs;
    } else {
      g.belowExitSinceMs = undefined;
    }
    const dwell = g.switchesToWal + g.switchesToInline === 0 ? this.#tau : this.#minDwellMs;
    if (nowMs - g.switchedAtMs < dwell) return;
    let to: ReplicationMode | undefined;
    if (g.mode === 'inline') {
      if (
        canPay &&
        perByte >= this.#walAtPerByte! &&
        g.payingInARow >= this.#enterAfterPayingObjects &&
        !this.#failedLately(g, nowMs)
      )
        to = 'wal';
    } else if (
      !canPay ||
      (g.belowExitSinceMs !== undefined && nowMs - g.belowExitSinceMs >= this.#exitAfterMs)
    ) {
      to = 'inline';
    }
    if (to === undefined) return;
    this.#switch(g, to, nowMs);
  }

  /** Whether the group's last WAL stretch did not pay, at about today's rate and lately. */
  #failedLately(g: Group, nowMs: number): boolean {
    const f = g.failed;
    if (f === undefined) return false;
    if (nowMs - f.endedAtMs >= this.#retryAfterMs) {
      g.failed = undefined;
      return false;
    }
    return this.#rate(g, nowMs) < f.atRate * SEALING_DEFAULTS.retryRateMultiple;
  }

  #switch(g: Group, to: ReplicationMode, nowMs: number): void {
    const from = g.mode;
    if (from === to) return;
    if (to === 'inline') {
      // What the stretch's real objects saved, against what steady objects at the exit threshold
      // would: below it (or nothing uploaded at all), the WAL did not pay at this rate.
      const { bytes, savedUsd } = g.real;
      const paid =
        bytes > 0 && this.#inlineBelowPerByte !== undefined && savedUsd / bytes >= this.#inlineBelowPerByte;
      if (bytes > 0 && !paid) g.failed = { atRate: g.enteredAtRate, endedAtMs: nowMs };
    } else {
      g.enteredAtRate = this.#rate(g, nowMs);
      g.real = { bytes: 0, savedUsd: 0, abandonedInARow: 0 };
    }
    g.mode = to;
    g.switchedAtMs = nowMs;
    if (to === 'wal') g.switchesToWal++;
    else g.switchesToInline++;
    this.#onSwitch?.({
      budgetMs: g.budgetMs,
      from,
      to,
      atMs: nowMs,
      savedFraction: this.#savedFraction(g),
      bytesPerSec: this.#rate(g, nowMs),
    });
  }
}

/** What the policy settles on for a steady stream: for `walproxy cost --latency-budget-ms` and the docs. */
export interface SteadyState {
  mode: ReplicationMode;
  lingerMs: number;
  objectBytes: number;
  objectsPerSec: number;
  /** 0 inline; the objects' saved share of the stock cost through the WAL. */
  savedFraction: number;
}

export function steadyState(
  economics: Pick<ObjectEconomics, 'breakEvenObjectBytes' | 'savedFraction'>,
  budgetMs: number,
  bytesPerSec: number,
  options: Pick<
    SealingPolicyOptions,
    'maxObjectBytes' | 'storeLatency' | 'timerSlackMs' | 'walAtBreakEvenMultiple'
  > = {},
): SteadyState {
  const d = SEALING_DEFAULTS;
  const lingerMs = lingerFor(budgetMs, options.storeLatency, options.timerSlackMs);
  const cap = options.maxObjectBytes ?? d.maxObjectBytes;
  const objectBytes = Math.min(cap, (bytesPerSec * lingerMs) / 1000);
  const breakEven = economics.breakEvenObjectBytes;
  const wal =
    breakEven !== undefined &&
    objectBytes > 0 &&
    objectBytes >= breakEven * (options.walAtBreakEvenMultiple ?? d.walAtBreakEvenMultiple);
  return {
    mode: wal ? 'wal' : 'inline',
    lingerMs,
    objectBytes,
    objectsPerSec: wal ? bytesPerSec / objectBytes : 0,
    savedFraction: wal ? economics.savedFraction(objectBytes) : 0,
  };
}
