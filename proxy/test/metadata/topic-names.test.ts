import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { TopicNames } from '../../src/metadata/topic-names.js';

const ID = 'ab'.repeat(16);

function topicNames(
  names: () => Map<string, string>,
  options: { now?: () => number; delayMs?: number } = {},
) {
  let fetches = 0;
  const map = new TopicNames({ host: '127.0.0.1', port: 1 }, createLogger('silent'), {
    fetchNames: async () => {
      fetches++;
      // The broker answers with what it knew when the request arrived.
      const answer = names();
      if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
      return answer;
    },
    minRefreshGapMs: 1_000,
    unknownTtlMs: 30_000,
    ...(options.now ? { now: options.now } : {}),
  });
  return { map, fetches: () => fetches };
}

describe('TopicNames', () => {
  it('asks the broker at most once a second for ids it does not name, however often they are asked for', async () => {
    let now = 0;
    const { map, fetches } = topicNames(() => new Map(), { now: () => now });
    // When an unnamed id is asked for 1,000 times within a second
    for (let n = 0; n < 1_000; n++) {
      map.nameOf(`${n}`.padStart(32, '0'));
      await Promise.resolve();
      now += 1;
    }
    // Then the broker was asked once
    expect(fetches()).toBe(1);
  });

  it('remembers an id a refresh did not name as unknown for the TTL, then asks again', async () => {
    let now = 0;
    const { map, fetches } = topicNames(() => new Map(), { now: () => now });
    expect(await map.resolve(ID)).toBeUndefined();
    expect(map.isUnknown(ID)).toBe(true);
    now = 10_000;
    expect(await map.resolve(ID)).toBeUndefined();
    expect(fetches()).toBe(1);
    now = 31_000;
    expect(map.isUnknown(ID)).toBe(false);
    await map.resolve(ID);
    expect(fetches()).toBe(2);
  });

  it('resolves a topic created after a refresh already under way started (the deferred copy of a new topic)', async () => {
    // Given a refresh under way that started before the topic existed
    const names = new Map<string, string>();
    const { map, fetches } = topicNames(() => new Map(names), { delayMs: 20 });
    const early = map.refresh();
    names.set(ID, 'wal-new');
    // When a Produce names its id, then a second refresh after the gap names it
    const name = map.resolve(ID);
    await early;
    expect(map.isUnknown(ID)).toBe(false);
    expect(await name).toBe('wal-new');
    expect(fetches()).toBe(2);
  });
});
