import { describe, expect, it } from 'vitest';
import { globToRegExp, parseTopicConfig, TopicPolicy } from '../../src/topics/topic-policy.js';

describe('--topic-config', () => {
  it('parses every key into its setting', () => {
    expect(parseTopicConfig('orders:linger.ms=5')).toEqual({ pattern: 'orders', settings: { lingerMs: 5 } });
    expect(parseTopicConfig('o*:target.bytes=300000')).toEqual({
      pattern: 'o*',
      settings: { targetBytes: 300_000 },
    });
    expect(parseTopicConfig('o*:durable.ack=false')).toEqual({
      pattern: 'o*',
      settings: { durableAck: false },
    });
    expect(parseTopicConfig('o*:wal=true')).toEqual({ pattern: 'o*', settings: { wal: true } });
    expect(parseTopicConfig('wal-inline-*:mode=inline')).toEqual({
      pattern: 'wal-inline-*',
      settings: { mode: 'inline' },
    });
    expect(parseTopicConfig('x:mode=wal')).toEqual({ pattern: 'x', settings: { mode: 'wal' } });
    expect(parseTopicConfig('x:max.hold.ms=50')).toEqual({ pattern: 'x', settings: { maxHoldMs: 50 } });
    expect(parseTopicConfig('orders-*:zone.local=true')).toEqual({
      pattern: 'orders-*',
      settings: { zoneLocal: true },
    });
    expect(parseTopicConfig('x:mode=auto')).toEqual({ pattern: 'x', settings: { mode: 'auto' } });
    expect(parseTopicConfig('x:latency.budget.ms=25')).toEqual({
      pattern: 'x',
      settings: { latencyBudgetMs: 25 },
    });
  });

  it('names what is wrong', () => {
    expect(parseTopicConfig('orders')).toBe("'orders' is not <topic-or-glob>:<key>=<value>");
    expect(parseTopicConfig('o:color=red')).toMatch(
      /^'color' in 'o:color=red' is not one of linger.ms, target.bytes, durable.ack, max.hold.ms, wal, mode, zone.local, latency.budget.ms$/,
    );
    expect(parseTopicConfig('o:linger.ms=-1')).toBe(
      "linger.ms in 'o:linger.ms=-1': '-1' is not a whole number from 0 to 60000",
    );
    expect(parseTopicConfig('o:mode=fast')).toBe("mode in 'o:mode=fast': 'fast' is not auto, wal, inline");
  });
});

describe('TopicPolicy', () => {
  const defaults = {
    wal: false,
    lingerMs: 10,
    targetBytes: 400_000,
    durableAck: true,
    mode: 'wal' as const,
    maxHoldMs: 200,
    zoneLocal: false,
  };

  it('applies rules in order, later ones winning, and never WALs internal topics', () => {
    const policy = new TopicPolicy(defaults, [
      { pattern: '*', settings: { wal: true, lingerMs: 20 } },
      { pattern: 'orders', settings: { lingerMs: 5 } },
    ]);
    expect(policy.settingsFor('orders')).toMatchObject({ wal: true, lingerMs: 5 });
    expect(policy.settingsFor('payments')).toMatchObject({ wal: true, lingerMs: 20 });
    expect(policy.settingsFor('__consumer_offsets').wal).toBe(false);
  });

  it('never produces internal topics zone-locally, whatever a rule says', () => {
    const policy = new TopicPolicy(defaults, [{ pattern: '*', settings: { zoneLocal: true } }]);
    expect(policy.settingsFor('orders').zoneLocal).toBe(true);
    expect(policy.settingsFor('__transaction_state').zoneLocal).toBe(false);
  });

  it('matches globs literally apart from * and ?', () => {
    expect(globToRegExp('a.b*').test('a.bcd')).toBe(true);
    expect(globToRegExp('a.b*').test('axbcd')).toBe(false);
    expect(globToRegExp('t?').test('t1')).toBe(true);
    expect(globToRegExp('t?').test('t12')).toBe(false);
  });
});
