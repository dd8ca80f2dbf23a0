import { describe, expect, it } from 'vitest';
import { objectEconomics } from '../../src/cost/economics.js';
import { DEFAULT_PRICES } from '../../src/cost/prices.js';
import {
  type ModeSwitch,
  parseLatencyBudgetMs,
  SEALING_DEFAULTS,
  SealingPolicy,
  type SealingPolicyOptions,
  steadyState,
} from '../../src/wal/sealing-policy.js';

const MB = 1e6;
const economics = objectEconomics(DEFAULT_PRICES, { replicationFactor: 3, zones: 3 });
const breakEven = economics.breakEvenObjectBytes!;
const { putMs, getMs } = SEALING_DEFAULTS.storeLatency;
const STORE_MS = putMs + getMs;
/** The linger of a budget under the default store latencies. */
const policy0Linger = (budgetMs: number) => new SealingPolicy({ economics }).lingerMs(budgetMs);

/** Deterministic PRNG (mulberry32), so every trace is the same on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface TopicTrace {
  name: string;
  budgetMs: number;
  /** Produced bytes per second into this topic on this broker at time t. */
  rate: (tMs: number) => number;
  requiresStore?: boolean;
  minBatchBytes?: number;
  seed: number;
}

interface Batch {
  topic: TopicTrace;
  atMs: number;
  bytes: number;
}

/**
 * Producer batches: what a producer at linger.ms 5 sends at the topic's rate (±50 %), 16 KB to
 * 1 MB each unless the topic says otherwise, released as the rate accrues them millisecond by
 * millisecond (so a burst is never stepped over).
 */
function batches(topic: TopicTrace, durationMs: number): Batch[] {
  const rnd = random(topic.seed);
  const min = topic.minBatchBytes ?? 16_000;
  const out: Batch[] = [];
  const draw = (rate: number) => {
    const nominal = Math.min(1_000_000, Math.max(min, rate * 0.005));
    return Math.round(Math.min(1_000_000, Math.max(min, nominal * (0.5 + rnd()))));
  };
  let owed = 0;
  let next = 0;
  for (let t = 0; t < durationMs; t++) {
    const rate = topic.rate(t);
    owed += rate / 1000;
    if (next === 0 && rate > 0) next = draw(rate);
    while (next > 0 && owed >= next) {
      out.push({ topic, atMs: t, bytes: next });
      owed -= next;
      next = rate > 0 ? draw(rate) : 0;
    }
  }
  return out;
}

interface SimObject {
  budgetMs: number;
  bytes: number;
  openedAtMs: number;
  requiresStore: boolean;
  batches: Batch[];
  sealAtMs: number | undefined;
}

interface SealedObject extends SimObject {
  endedAtMs: number;
  reason: string;
}

interface Run {
  durationMs: number;
  sealed: SealedObject[];
  abandoned: SealedObject[];
  inlineBytes: Map<number, number>;
  producedBytes: Map<number, number>;
  switches: ModeSwitch[];
  policy: SealingPolicy;
}

/**
 * A tiny WAL writer on a simulated clock: one open object per budget, appends, timers, seals and
 * abandons exactly as the policy answers; batches of inline groups are not appended.
 */
function simulate(
  topics: TopicTrace[],
  durationMs: number,
  options: Partial<SealingPolicyOptions> = {},
): Run {
  const switches: ModeSwitch[] = [];
  const policy = new SealingPolicy({ economics, ...options, onSwitch: (e) => switches.push(e) });
  const events = topics.flatMap((t) => batches(t, durationMs)).sort((a, b) => a.atMs - b.atMs);
  const open = new Map<number, SimObject>();
  const run: Run = {
    durationMs,
    sealed: [],
    abandoned: [],
    inlineBytes: new Map(),
    producedBytes: new Map(),
    switches,
    policy,
  };
  const add = (m: Map<number, number>, k: number, v: number) => m.set(k, (m.get(k) ?? 0) + v);

  const end = (o: SimObject, atMs: number, reason: string, to: SealedObject[]) => {
    open.delete(o.budgetMs);
    to.push({ ...o, endedAtMs: atMs, reason });
  };
  const decide = (o: SimObject, nowMs: number) => {
    const d = policy.sealDecision(o.budgetMs, o, nowMs);
    o.sealAtMs = undefined;
    if (d.action === 'wait') o.sealAtMs = d.sealAtMs;
    else if (d.action === 'seal') end(o, nowMs, d.reason, run.sealed);
    else {
      end(o, nowMs, d.reason, run.abandoned);
      for (const b of o.batches) add(run.inlineBytes, o.budgetMs, b.bytes);
    }
  };
  const fireTimersUntil = (tMs: number) => {
    for (;;) {
      let next: SimObject | undefined;
      for (const o of open.values()) {
        if (o.sealAtMs !== undefined && o.sealAtMs <= tMs && (!next || o.sealAtMs < next.sealAtMs!)) next = o;
      }
      if (!next) return;
      decide(next, next.sealAtMs!);
    }
  };

  for (const batch of events) {
    fireTimersUntil(batch.atMs);
    const { budgetMs, requiresStore = false } = batch.topic;
    const now = batch.atMs;
    add(run.producedBytes, budgetMs, batch.bytes);
    policy.observe(budgetMs, batch.bytes, now);
    if (policy.mode(budgetMs, now) === 'inline' && !requiresStore) {
      add(run.inlineBytes, budgetMs, batch.bytes);
      continue;
    }
    let o = open.get(budgetMs);
    if (o && o.bytes + batch.bytes > policy.maxObjectBytes) {
      end(o, now, 'size', run.sealed);
      o = undefined;
    }
    if (!o) {
      o = { budgetMs, bytes: 0, openedAtMs: now, requiresStore: false, batches: [], sealAtMs: undefined };
      open.set(budgetMs, o);
    }
    o.bytes += batch.bytes;
    o.requiresStore ||= requiresStore;
    o.batches.push(batch);
    decide(o, now);
  }
  fireTimersUntil(Number.POSITIVE_INFINITY);
  return run;
}

function p50(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor((s.length - 1) / 2)]!;
}

/** The properties every trace must have, and its table. */
function check(name: string, run: Run): { savedFraction: number } {
  // Each property is checked with plain comparisons and asserted once on the list of what broke
  // it: a trace has up to millions of batches, and one expect() per batch made these simulations
  // take minutes on a loaded machine.
  // Never an upload that costs more than it saves, unless a batch in it needs the stored copy.
  const belowBreakEven = run.sealed
    .filter((o) => !o.requiresStore && o.bytes < breakEven)
    .map((o) => `${name}: object of ${o.bytes} B sealed ${o.reason} at ${o.endedAtMs} ms`);
  expect(belowBreakEven).toEqual([]);
  // The oldest batch of every object, uploaded or abandoned, is within its budget once the store
  // has taken its assumed time.
  const overBudget: string[] = [];
  for (const o of [...run.sealed, ...run.abandoned]) {
    for (const b of o.batches) {
      const addedMs = o.endedAtMs - b.atMs + STORE_MS + SEALING_DEFAULTS.timerSlackMs;
      if (addedMs > b.topic.budgetMs || b.topic.budgetMs !== o.budgetMs)
        overBudget.push(
          `${name}: batch at ${b.atMs} ms (budget ${b.topic.budgetMs} ms) in an object of the ${o.budgetMs} ms group ended at ${o.endedAtMs} ms: ${addedMs} ms`,
        );
    }
  }
  expect(overBudget.slice(0, 5)).toEqual([]);
  // Every batch went exactly one way.
  for (const [budget, produced] of run.producedBytes) {
    const stored = run.sealed.filter((o) => o.budgetMs === budget).reduce((n, o) => n + o.bytes, 0);
    expect(stored + (run.inlineBytes.get(budget) ?? 0)).toBe(produced);
  }

  const seconds = run.durationMs / 1000;
  const rows: string[] = [];
  let stockUsd = 0;
  let savedUsd = 0;
  for (const [budget, produced] of [...run.producedBytes].sort((a, b) => a[0] - b[0])) {
    const objects = run.sealed.filter((o) => o.budgetMs === budget);
    const groupStock = produced * economics.stockUsdPerByte;
    const groupSaved = objects.reduce((n, o) => n + economics.savingUsd(o.bytes), 0);
    stockUsd += groupStock;
    savedUsd += groupSaved;
    const switches = run.switches.filter((s) => s.budgetMs === budget).length;
    rows.push(
      `  ${String(budget).padStart(6)} ms ${(produced / seconds / MB).toFixed(3).padStart(9)} MB/s ${String(objects.length).padStart(7)} objects, p50 ${String(Math.round(p50(objects.map((o) => o.bytes)) / 1000)).padStart(5)} KB, ${(objects.length / seconds).toFixed(1).padStart(6)} PUT/s, inline ${((100 * (run.inlineBytes.get(budget) ?? 0)) / produced).toFixed(0).padStart(3)} %, ${String(switches).padStart(2)} switches, saved ${((100 * groupSaved) / groupStock).toFixed(1).padStart(5)} %`,
    );
  }
  const savedFraction = savedUsd / stockUsd;
  console.log(`${name}: saved ${(100 * savedFraction).toFixed(1)} % of stock\n${rows.join('\n')}`);
  return { savedFraction };
}

const MIN = 60_000;
/** Three topics on one broker with different budgets, sharing the broker's rate. */
function threeTopics(rate: (tMs: number) => number): TopicTrace[] {
  return [
    { name: 'orders', budgetMs: 25, rate: (t) => 0.2 * rate(t), seed: 1 },
    { name: 'events', budgetMs: 50, rate: (t) => 0.5 * rate(t), seed: 2 },
    { name: 'logs', budgetMs: 200, rate: (t) => 0.3 * rate(t), seed: 3 },
  ];
}

describe('SealingPolicy over synthetic traces (one broker, three budgets)', () => {
  it.each([0.01, 0.1, 1, 10, 100])(
    'steady %s MB/s: objects pay, budgets hold, one switch at most',
    (mbps) => {
      const run = simulate(
        threeTopics(() => mbps * MB),
        3 * MIN,
      );
      const { savedFraction } = check(`steady ${mbps} MB/s`, run);
      expect(savedFraction).toBeGreaterThanOrEqual(0);
      // A steady rate settles once: inline → wal if it pays, never back.
      for (const budget of [25, 50, 200]) {
        const own = run.switches.filter((s) => s.budgetMs === budget);
        expect(own.length).toBeLessThanOrEqual(1);
        if (own.length === 1) expect(own[0]).toMatchObject({ from: 'inline', to: 'wal' });
      }
    },
  );

  it('steady: quiet groups stay inline, busy ones go through the WAL and save most at 100 MB/s', () => {
    const quiet = simulate(
      threeTopics(() => 0.1 * MB),
      2 * MIN,
    );
    expect(quiet.sealed).toHaveLength(0);
    expect(quiet.switches).toHaveLength(0);
    const busy = simulate(
      threeTopics(() => 100 * MB),
      2 * MIN,
    );
    expect(busy.policy.stats(2 * MIN).map((g) => g.mode)).toEqual(['wal', 'wal', 'wal']);
    // The first rateWindowMs (10 s of 120) replicate inline, before the groups have shown they pay.
    expect(check('steady 100 MB/s (2 min)', busy).savedFraction).toBeGreaterThan(0.7);
  });

  it('bursty on/off (2 s at 50 MB/s, 8 s off): objects pay, budgets hold', () => {
    const run = simulate(
      threeTopics((t) => (t % 10_000 < 2_000 ? 50 * MB : 0)),
      5 * MIN,
    );
    const { savedFraction } = check('bursty 2 s on at 50 MB/s / 8 s off', run);
    expect(savedFraction).toBeGreaterThan(0.5);
    // Silence between bursts is no reason to switch: it costs nothing either way.
    expect(run.switches.filter((s) => s.to === 'inline')).toHaveLength(0);
  });

  it('bursty: short 200 ms spikes at 20 MB/s over a 0.05 MB/s floor', () => {
    const run = simulate(
      threeTopics((t) => (t % 5_000 < 200 ? 20 * MB : 0.05 * MB)),
      5 * MIN,
    );
    expect(
      check('spikes 200 ms at 20 MB/s every 5 s over 0.05 MB/s', run).savedFraction,
    ).toBeGreaterThanOrEqual(0);
  });

  it('ramp 0.01 → 100 → 0.01 MB/s over 10 minutes: at most one switch each way per group', () => {
    const half = 5 * MIN;
    const rate = (t: number) => 0.01 * MB * 10 ** (4 * (t < half ? t / half : 2 - t / half));
    const run = simulate(threeTopics(rate), 2 * half);
    check('ramp 0.01 → 100 → 0.01 MB/s', run);
    for (const budget of [25, 50, 200]) {
      const own = run.switches.filter((s) => s.budgetMs === budget).map((s) => s.to);
      expect(own).toEqual(['wal', 'inline']);
    }
  });

  describe('hovering around the thresholds: none inside the band or for lulls, spaced switches across it', () => {
    // One topic whose steady objects would be ~1.3 × break-even: inside the band between the
    // thresholds (1.1× and 1.5×) with ±10 % wobble. Small producer batches (linger.ms 5 at this
    // rate) so an object is its linger's worth plus the batch that opened it. Four scenarios, each
    // simulating 10–30 minutes of batches: one test each, so that each has its own time.
    const budgetMs = 50;
    const linger = budgetMs - STORE_MS - SEALING_DEFAULTS.timerSlackMs;
    const band = (1.3 * breakEven * 1000) / (linger + 5);
    const topic = (rate: (t: number) => number): TopicTrace => ({
      name: 't',
      budgetMs,
      rate,
      minBatchBytes: 1_000,
      seed: 9,
    });
    const wobble = (t: number) => band * (1 + 0.1 * Math.sin((2 * Math.PI * t) / 44_000));

    it('inside the band: no switch', () => {
      const inBand = simulate([topic(wobble)], 10 * MIN);
      check('inside the band (objects ~1.3 × break-even ± 10 %)', inBand);
      expect(inBand.switches).toHaveLength(0);
    });

    it('into the band from above: stays in the WAL', () => {
      // Into the band from above: the group went through the WAL and stays there.
      const fromAbove = simulate([topic((t) => (t < 2 * MIN ? 4 : 1) * wobble(t))], 10 * MIN);
      check('into the band from 4× above', fromAbove);
      expect(fromAbove.switches.map((s) => s.to)).toEqual(['wal']);
    });

    it('lulls far below the band: stays in the WAL', () => {
      // 45 s above the band, 45 s far below it: the lulls carry few bytes and their objects are
      // abandoned anyway, so the group stays in the WAL.
      const lulls = simulate([topic((t) => (t % 90_000 < 45_000 ? 2.4 / 1.3 : 0.2 / 1.3) * band)], 10 * MIN);
      check('45 s at 2.4×, 45 s at 0.2× break-even', lulls);
      expect(lulls.switches.map((s) => s.to)).toEqual(['wal']);
    });

    it('a random walk across the band: switches spaced by the dwell', () => {
      // A random walk of the rate between 0.3× and 3× the band's middle, a step a second.
      const rnd = random(11);
      const walk: number[] = [0];
      for (let i = 1; i <= 30 * 60; i++) {
        const step = (rnd() + rnd() + rnd() - 1.5) * 0.3;
        walk.push(Math.min(Math.log(3), Math.max(Math.log(0.3), walk[i - 1]! + step)));
      }
      const wander = simulate([topic((t) => band * Math.exp(walk[Math.floor(t / 1000)]!))], 30 * MIN);
      check('random walk 0.3–3 × the band', wander);
      const times = wander.switches.map((s) => s.atMs);
      console.log(`  switches at ${times.map((t) => (t / 1000).toFixed(0)).join(', ')} s`);
      expect(times.length).toBeGreaterThan(2);
      for (let i = 1; i < times.length; i++) {
        expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(SEALING_DEFAULTS.minDwellMs);
      }
      // At most one switch per dwell: ≤ 60 in 30 minutes.
      expect(times.length).toBeLessThanOrEqual((30 * MIN) / SEALING_DEFAULTS.minDwellMs);
    });
  });

  it('switches back no sooner than minDwellMs, and leaves the WAL only after exitAfterMs of objects that do not pay', () => {
    const switches: ModeSwitch[] = [];
    const policy = new SealingPolicy({ economics, onSwitch: (e) => switches.push(e) });
    let t = 0;
    // 400 KB every 30 ms (the budget's linger): objects far above break-even.
    for (; t < 20_000; t += 30) policy.observe(50, 400_000, t);
    expect(switches.map((s) => [s.to, s.atMs])).toEqual([['wal', 10_020]]);
    // Then 5 KB objects: below break-even. Leaving waits for a minute of them after the average
    // has fallen below the threshold.
    const quietFrom = t;
    for (; switches.length < 2; t += 30) policy.observe(50, 5_000, t);
    const left = switches[1]!;
    expect(left.to).toBe('inline');
    expect(left.atMs - quietFrom).toBeGreaterThanOrEqual(SEALING_DEFAULTS.exitAfterMs);
    // Busy again at once: back through the WAL, but not within minDwellMs of leaving it.
    for (; switches.length < 3; t += 30) policy.observe(50, 400_000, t);
    expect(switches[2]!.to).toBe('wal');
    expect(switches[2]!.atMs - left.atMs).toBe(SEALING_DEFAULTS.minDwellMs);
    expect(policy.stats(t)[0]).toMatchObject({ mode: 'wal', switchesToWal: 2, switchesToInline: 1 });
  });

  it("a producer's first requests after a quiet spell do not take a group whose steady objects do not pay into the WAL; a rate that pays still enters, a few lingers later", () => {
    // What `make bench-cost` does between its arms: a group that carried 0.1 MB/s (inline) and
    // was then quiet for a minute, when a producer starts at the next rate; its first requests
    // hold what accumulated while it fetched metadata (300 ms of the rate), in `requests` requests
    // (a request carries at most batch.size per partition) a linger apart.
    const resume = (budgetMs: number, mbps: number, requests = 1) => {
      const switches: ModeSwitch[] = [];
      const policy = new SealingPolicy({ economics, onSwitch: (e) => switches.push(e) });
      const linger = policy.lingerMs(budgetMs);
      let t = 0;
      for (; t < 40_000; t += 50) policy.observe(budgetMs, 5_000, t);
      t += 60_000;
      const startedAt = t;
      for (let i = 0; i < requests; i++, t += linger)
        policy.observe(budgetMs, (0.3 * mbps * MB) / requests, t);
      // Then the producer's requests at linger.ms 5
      for (const end = t + 20_000; t < end; t += 5) policy.observe(budgetMs, 0.005 * mbps * MB, t);
      return switches.map((s) => ({ to: s.to, afterMs: s.atMs - startedAt }));
    };
    // 1 MB/s at a 25 ms budget: 5 KB objects, far below break-even; the first request alone would
    // pay, and took the group into the WAL 5 ms after it arrived when one object was enough
    expect(policy0Linger(25)).toBe(5);
    expect(resume(25, 1)).toEqual([]);
    // the same when the accumulated records come in two requests, two objects that pay
    expect(resume(25, 1, 2)).toEqual([]);
    // 1 MB/s at 50 ms: 30 KB objects, below break-even too
    expect(resume(50, 1)).toEqual([]);
    expect(resume(50, 1, 2)).toEqual([]);
    // 5 MB/s at 50 ms: 150 KB objects pay, and the group enters once enterAfterPayingObjects of
    // them in a row have closed (a linger each)
    const paying = resume(50, 5);
    expect(paying.map((s) => s.to)).toEqual(['wal']);
    // (the first, accumulated request's object closes at once, full; each later one a linger on)
    expect(paying[0]!.afterMs).toBeGreaterThanOrEqual(
      (SEALING_DEFAULTS.enterAfterPayingObjects - 1) * policy0Linger(50),
    );
    expect(paying[0]!.afterMs).toBeLessThanOrEqual(
      (SEALING_DEFAULTS.enterAfterPayingObjects + 1) * policy0Linger(50),
    );
  });

  it('leaves the WAL at once when its real objects are abandoned in a row, and retries only at a higher rate or later', () => {
    // Given a group in the WAL: 200 KB every 30 ms would make objects far above break-even
    const switches: ModeSwitch[] = [];
    const policy = new SealingPolicy({ economics, onSwitch: (e) => switches.push(e) });
    let t = 0;
    for (; t < 12_000; t += 30) policy.observe(50, 200_000, t);
    expect(switches.map((s) => s.to)).toEqual(['wal']);
    // When its real objects are small (each producer request capped at 20 KB) and abandoned,
    // then an uploaded one between resets the count
    const inARow = SEALING_DEFAULTS.abandonedInARowToLeave;
    for (let i = 0; i < inARow - 1; i++) policy.objectDecided(50, 20_000, false, t);
    policy.objectDecided(50, 60_000, true, t);
    for (let i = 0; i < inARow - 1; i++) policy.objectDecided(50, 20_000, false, t);
    expect(switches).toHaveLength(1);
    // And the next abandoned one in a row takes the group inline at once, within the dwell
    policy.objectDecided(50, 20_000, false, t);
    expect(switches.map((s) => [s.to, s.atMs])).toEqual([
      ['wal', switches[0]!.atMs],
      ['inline', t],
    ]);
    // Then at the same rate it stays inline past the dwell: that rate was tried and did not pay
    const left = t;
    for (; t < left + 2 * SEALING_DEFAULTS.minDwellMs; t += 30) policy.observe(50, 200_000, t);
    expect(switches).toHaveLength(2);
    // But at 1.5 × the rate it tries again
    for (; switches.length < 3 && t < left + 200_000; t += 30) policy.observe(50, 320_000, t);
    expect(switches[2]?.to).toBe('wal');
  });

  it('after a WAL stretch that did not pay, tries the same rate again after retryAfterMs', () => {
    const switches: ModeSwitch[] = [];
    const policy = new SealingPolicy({ economics, onSwitch: (e) => switches.push(e), retryAfterMs: 120_000 });
    let t = 0;
    for (; t < 12_000; t += 30) policy.observe(50, 200_000, t);
    for (let i = 0; i < SEALING_DEFAULTS.abandonedInARowToLeave; i++)
      policy.objectDecided(50, 20_000, false, t);
    const left = t;
    for (; switches.length < 3 && t < left + 300_000; t += 30) policy.observe(50, 200_000, t);
    expect(switches.map((s) => s.to)).toEqual(['wal', 'inline', 'wal']);
    expect(switches[2]!.atMs - left).toBeGreaterThanOrEqual(120_000);
    expect(switches[2]!.atMs - left).toBeLessThan(121_000);
  });

  it("groups do not shorten each other's objects: a tight budget beside changes nothing", () => {
    const logs: TopicTrace = { name: 'logs', budgetMs: 200, rate: () => 2 * MB, seed: 3 };
    const tight: TopicTrace = { name: 'orders', budgetMs: 25, rate: () => 0.05 * MB, seed: 1 };
    const alone = simulate([logs], 2 * MIN);
    const beside = simulate([logs, tight], 2 * MIN);
    const sizes = (r: Run) => r.sealed.filter((o) => o.budgetMs === 200).map((o) => [o.openedAtMs, o.bytes]);
    expect(sizes(alone).length).toBeGreaterThan(100);
    expect(sizes(beside)).toEqual(sizes(alone));
  });

  it('a durable-ack topic in a quiet group is stored anyway, and only those objects fall below break-even', () => {
    const run = simulate(
      [
        { name: 'payments', budgetMs: 50, rate: () => 0.02 * MB, requiresStore: true, seed: 5 },
        { name: 'clicks', budgetMs: 50, rate: () => 0.2 * MB, seed: 6 },
      ],
      2 * MIN,
    );
    check('durable ack at 0.02 MB/s beside 0.2 MB/s, same budget', run);
    const small = run.sealed.filter((o) => o.bytes < breakEven);
    expect(small.length).toBeGreaterThan(0);
    expect(small.every((o) => o.requiresStore)).toBe(true);
    // The group is inline: clicks batches are not appended unless they share an object opened for payments.
    expect(run.policy.stats(2 * MIN)[0]?.mode).toBe('inline');
  });

  it('a budget the store alone uses up keeps its group inline, whatever the rate', () => {
    const run = simulate([{ name: 't', budgetMs: STORE_MS, rate: () => 100 * MB, seed: 4 }], MIN);
    expect(run.sealed).toHaveLength(0);
    expect(run.switches).toHaveLength(0);
    expect(run.policy.lingerMs(STORE_MS)).toBe(0);
  });
});

describe('SealingPolicy decisions', () => {
  const policy = new SealingPolicy({ economics });
  const linger = 50 - STORE_MS - SEALING_DEFAULTS.timerSlackMs;

  it('waits until the oldest batch must go, then seals what pays and abandons what does not', () => {
    const open = { bytes: 200_000, openedAtMs: 1_000, requiresStore: false };
    expect(policy.sealDecision(50, open, 1_010)).toEqual({ action: 'wait', sealAtMs: 1_000 + linger });
    expect(policy.sealDecision(50, open, 1_000 + linger)).toEqual({ action: 'seal', reason: 'deadline' });
    const small = { ...open, bytes: Math.floor(breakEven) - 1 };
    expect(policy.sealDecision(50, small, 1_000 + linger)).toEqual({
      action: 'inline',
      reason: 'below_break_even',
    });
    expect(policy.sealDecision(50, { ...small, requiresStore: true }, 1_000 + linger)).toEqual({
      action: 'seal',
      reason: 'deadline',
    });
    expect(policy.sealDecision(50, { ...open, bytes: policy.maxObjectBytes }, 1_001)).toEqual({
      action: 'seal',
      reason: 'size',
    });
  });

  it('takes measured store latencies: a slower store leaves less linger', () => {
    const p = new SealingPolicy({ economics });
    p.setStoreLatency({ putMs: 30, getMs: 10 });
    expect(p.lingerMs(50)).toBe(50 - 40 - SEALING_DEFAULTS.timerSlackMs);
  });

  it('tells a group’s current mode without deciding or creating one', () => {
    // Given a policy that has seen no batch of budget 50
    const p = new SealingPolicy({ economics });
    // Then it knows no mode for it, and asking creates no group
    expect(p.currentMode(50)).toBeUndefined();
    expect(p.stats(0)).toEqual([]);
    // When a batch of that budget arrives, the new group starts inline (never worse than stock)
    p.observe(50, 1_000, 0);
    expect(p.currentMode(50)).toBe('inline');
  });

  it('refuses thresholds without a band', () => {
    expect(
      () => new SealingPolicy({ economics, walAtBreakEvenMultiple: 1.05, inlineBelowBreakEvenMultiple: 1.1 }),
    ).toThrow(RangeError);
  });

  it('parses latency.budget.ms', () => {
    expect(parseLatencyBudgetMs('25')).toEqual({ value: 25 });
    expect(parseLatencyBudgetMs('0')).toEqual({
      error: "'0' is not a whole number of milliseconds from 1 to 60000",
    });
    expect(parseLatencyBudgetMs('2.5')).toHaveProperty('error');
  });

  it('steady state: the table the docs show', () => {
    const rows = [0.1, 1, 2, 5, 10, 30, 100].map((mbps) => {
      const at = (budgetMs: number) => steadyState(economics, budgetMs, mbps * MB);
      return { mbps, b25: at(25), b50: at(50), b100: at(100) };
    });
    const cell = (s: ReturnType<typeof steadyState>) =>
      s.mode === 'inline'
        ? `inline (${Math.round(s.objectBytes / 1000)} KB)`.padStart(18)
        : `${Math.round(s.objectBytes / 1000)} KB ${(100 * s.savedFraction).toFixed(1)} %`.padStart(18);
    console.log(
      `break-even ${Math.round(breakEven)} B; per broker and budget: object size, saved\n${rows
        .map((r) => `  ${String(r.mbps).padStart(5)} MB/s ${cell(r.b25)} ${cell(r.b50)} ${cell(r.b100)}`)
        .join('\n')}`,
    );
    // 10 MB/s at 50 ms: 30 ms of linger, 300 KB objects.
    expect(rows[4]!.b50).toMatchObject({ mode: 'wal', lingerMs: 30, objectBytes: 300_000 });
    // 10 MB/s at 25 ms: 5 ms of linger, 50 KB < 1.5 × break-even: inline.
    expect(rows[4]!.b25.mode).toBe('inline');
  });
});
