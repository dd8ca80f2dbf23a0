import { ApiKey, encodeProduceRequest } from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { FilterChain } from '../../src/net/filter-chain.js';
import type { FrameFilter, RequestInfo } from '../../src/net/frame-filter.js';
import { requestFrame } from '../zone/frames.js';

const connection = { log: createLogger('silent') };

/** A filter that appends its name to every frame it sees, both ways; optionally holds responses. */
function tagging(name: string, keys: number[], seen: string[], hold = false): FrameFilter {
  const tag = (f: Buffer) => Buffer.concat([f, Buffer.from(name)]);
  return {
    apiKeys: new Set(keys),
    onRequest: (info, f) => {
      seen.push(`${name}:request:${info.apiKey}`);
      return { action: 'forward', frame: tag(f), expectResponse: true };
    },
    onResponse: (info, f) => {
      seen.push(`${name}:response:${info.apiKey}`);
      return hold ? Promise.resolve(tag(f)) : tag(f);
    },
  };
}

describe('FilterChain', () => {
  it('passes a request through the claiming filters in order and the response back in reverse', async () => {
    // Given two filters that both claim Metadata, one of them also Fetch, the inner one holding responses
    const seen: string[] = [];
    const chain = new FilterChain([tagging('outer', [3, 1], seen), tagging('inner', [3], seen, true)]);
    expect([...chain.apiKeys].sort()).toEqual([1, 3]);
    const info: RequestInfo = { apiKey: 3, apiVersion: 12, correlationId: 1 };
    // When a Metadata request and its response pass
    const decision = chain.onRequest(info, Buffer.from('req:'), connection);
    const response = await chain.onResponse(info, Buffer.from('resp:'));
    // Then each filter saw the previous one's output
    expect(decision).toMatchObject({ action: 'forward', frame: Buffer.from('req:outerinner') });
    expect(response.toString()).toBe('resp:innerouter');
    expect(seen).toEqual(['outer:request:3', 'inner:request:3', 'inner:response:3', 'outer:response:3']);
    // And a key only one filter claims goes through that one only
    seen.length = 0;
    const fetch: RequestInfo = { apiKey: 1, apiVersion: 17, correlationId: 2 };
    chain.onRequest(fetch, Buffer.from('f'), connection);
    expect(seen).toEqual(['outer:request:1']);
  });

  it('ends the chain at a filter that answers locally', () => {
    const seen: string[] = [];
    const answering: FrameFilter = {
      apiKeys: new Set([3]),
      onRequest: () => ({ action: 'respond', response: Buffer.from('local') }),
    };
    const chain = new FilterChain([answering, tagging('inner', [3], seen)]);
    const decision = chain.onRequest(
      { apiKey: 3, apiVersion: 1, correlationId: 1 },
      Buffer.from('x'),
      connection,
    );
    expect(decision).toEqual({ action: 'respond', response: Buffer.from('local') });
    expect(seen).toEqual([]);
  });

  it('holds the later filters until a filter that decides later has decided, and sees its frame', async () => {
    const seen: string[] = [];
    let decide!: () => void;
    const later: FrameFilter = {
      apiKeys: new Set([3]),
      onRequest: (_info, f) =>
        new Promise((resolve) => {
          decide = () =>
            resolve({
              action: 'forward',
              frame: Buffer.concat([f, Buffer.from('later')]),
              expectResponse: true,
            });
        }),
    };
    const chain = new FilterChain([tagging('outer', [3], seen), later, tagging('inner', [3], seen)]);
    const decision = chain.onRequest(
      { apiKey: 3, apiVersion: 1, correlationId: 1 },
      Buffer.from('x'),
      connection,
    );
    // Then the filter after the one deciding later has not seen the request yet
    expect(decision).toBeInstanceOf(Promise);
    expect(seen).toEqual(['outer:request:3']);
    // And once it decides, the rest of the chain runs on its frame
    decide();
    expect(await decision).toMatchObject({ action: 'forward', frame: Buffer.from('xouterlaterinner') });
    expect(seen).toEqual(['outer:request:3', 'inner:request:3']);
  });

  it('ends the chain at a filter that decides later to answer locally', async () => {
    const seen: string[] = [];
    const answering: FrameFilter = {
      apiKeys: new Set([3]),
      onRequest: async () => ({ action: 'respond', response: Buffer.from('local') }),
    };
    const chain = new FilterChain([answering, tagging('inner', [3], seen)]);
    const decision = await chain.onRequest(
      { apiKey: 3, apiVersion: 1, correlationId: 1 },
      Buffer.from('x'),
      connection,
    );
    expect(decision).toEqual({ action: 'respond', response: Buffer.from('local') });
    expect(seen).toEqual([]);
  });

  it('expects no response to acks=0 Produce when no filter decides', () => {
    const chain = new FilterChain([{ apiKeys: new Set([ApiKey.Produce]) }]);
    const info: RequestInfo = { apiKey: ApiKey.Produce, apiVersion: 9, correlationId: 1 };
    const produce = (acks: number) =>
      requestFrame(
        info,
        'p',
        encodeProduceRequest({ transactionalId: null, acks, timeoutMs: 1, topicData: [] }, 9),
      );
    expect(chain.onRequest(info, produce(0), connection)).toMatchObject({ expectResponse: false });
    expect(chain.onRequest(info, produce(1), connection)).toMatchObject({ expectResponse: true });
  });

  it('tells every chained filter once that a connection closed, whatever keys they claim', () => {
    // Given a filter chained with a ProduceWalFilter-like one (per-connection state) and one without a hook
    const closed: string[] = [];
    const keeping = (name: string, keys: number[]): FrameFilter => ({
      apiKeys: new Set(keys),
      onClose: (c) => closed.push(`${name}:${c === connection}`),
    });
    const chain = new FilterChain([
      keeping('zone', [0, 1, 3]),
      tagging('plain', [0], []),
      keeping('wal', [0]),
    ]);
    // When the connection closes
    chain.onClose(connection);
    // Then both filters that keep something for it hear of it, about that connection
    expect(closed).toEqual(['zone:true', 'wal:true']);
  });

  it('tells the later filters that a connection closed when an earlier one fails to release it', () => {
    // Given a filter whose onClose throws, listed before one that keeps per-connection state
    const closed: string[] = [];
    const chain = new FilterChain([
      {
        apiKeys: new Set([0]),
        onClose: () => {
          throw new Error('bug');
        },
      },
      { apiKeys: new Set([0]), onClose: () => closed.push('wal') },
    ]);
    // When the connection closes, Then the failure stays in the chain and the second still hears of it
    expect(() => chain.onClose(connection)).not.toThrow();
    expect(closed).toEqual(['wal']);
  });
});
