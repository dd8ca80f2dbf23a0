import { ErrorCode, parseWalObject } from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import type { ProduceWalFilter } from '../../src/filters/produce-wal.js';
import { createLogger } from '../../src/log.js';
import type { FilterConnection } from '../../src/net/frame-filter.js';
import { info, produceRequest, produceResponse, produceResponseOf, setup } from './produce-wal-support.js';

// Issue #26: a connection whose Produce to a topic the broker appended gets its next batches of
// that topic stored ahead (placed in the open object as the request arrives, not once the broker
// answers), so that a request queued behind the one the broker works on finds its object stored.
// Nothing of a connection the broker has not accepted for the topic is stored before its answer.

const connection = (name: string): FilterConnection =>
  ({ log: createLogger('silent'), remoteAddress: name }) as unknown as FilterConnection;
const batch = (fill: string) => makeBatch({ records: Buffer.from(fill), lastOffsetDelta: 0, recordCount: 1 });
const topic = { name: 'wal-orders' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every batch stored in the store's objects, as bytes. */
function storedBatches(store: { objects: Map<string, Buffer> }): Buffer[] {
  return [...store.objects.values()].flatMap((o) => {
    const parsed = parseWalObject(o);
    return parsed.entries.map((e) => o.subarray(e.position, e.position + e.length));
  });
}

/** `producer`'s Produce of `fill` to wal-orders, answered appended: the broker accepted it for the topic. */
function accepted(filter: ProduceWalFilter, producer: FilterConnection, fill: string): void {
  const request = info(9);
  filter.onRequest(request, produceRequest(9, -1, topic, batch(fill)), producer);
  filter.onResponse(request, produceResponse(9, topic, 0n));
}

describe('ProduceWalFilter stores ahead for connections the broker accepted', () => {
  it('keeps a connection’s first Produce out of the store until the broker appends it, and stores its next ones as they arrive', async () => {
    // Given a connection whose first acks=all Produce to a WAL topic was not answered yet
    const { filter, writer, store } = setup({ durableAck: false });
    const producer = connection('a');
    const first = info(9);
    filter.onRequest(first, produceRequest(9, -1, topic, batch('first')), producer);
    // Then nothing of it is placed in an object, however long it waits (the writer's linger is 5 ms)
    await sleep(20);
    expect(writer.stats.tentativeBatches).toBe(1);
    expect(store.objects.size).toBe(0);
    expect(filter.stats.batchesStoredAhead).toBe(0);

    // When the broker appended it
    filter.onResponse(first, produceResponse(9, topic, 0n));
    await sleep(20);
    expect(storedBatches(store)).toEqual([batch('first')]);

    // And the connection sends its next Produce, not answered yet
    const second = info(9);
    filter.onRequest(second, produceRequest(9, -1, topic, batch('second')), producer);
    // Then its batch is stored without waiting for the broker's answer
    expect(writer.stats.tentativeBatches).toBe(0);
    await sleep(20);
    expect(storedBatches(store)).toEqual([batch('first'), batch('second')]);
    expect(filter.stats.batchesStoredAhead).toBe(1);
    // And its answer needs nothing more of the store
    const response = produceResponse(9, topic, 1n);
    expect(filter.onResponse(second, response)).toBe(response);
    expect(filter.stats.batchesStoredAheadRefused).toBe(0);
  });

  it('stores ahead for that connection and that topic only', async () => {
    // Given connection a's Produce to wal-orders appended
    const { filter, writer } = setup({ durableAck: false });
    const a = connection('a');
    accepted(filter, a, 'a1');
    // When another connection produces to the same topic, and a to another topic
    filter.onRequest(info(9), produceRequest(9, -1, topic, batch('b1')), connection('b'));
    filter.onRequest(info(9), produceRequest(9, -1, { name: 'wal-payments' }, batch('a2')), a);
    // Then both wait for the broker's answer (tentative), as a first Produce does
    expect(writer.stats.tentativeBatches).toBe(2);
    expect(filter.stats.batchesStoredAhead).toBe(0);
  });

  it('stores nothing ahead for a connection whose Produce the broker refused, and withdraws a topic as soon as one answer refuses it', async () => {
    // Given a connection the broker refused (TOPIC_AUTHORIZATION_FAILED)
    const { filter, writer, store } = setup({ durableAck: false });
    const producer = connection('a');
    const denied = info(9);
    filter.onRequest(denied, produceRequest(9, -1, topic, batch('denied')), producer);
    filter.onResponse(
      denied,
      produceResponseOf(9, topic, [
        { index: 0, errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, baseOffset: -1n },
      ]),
    );
    // When it sends again: its batch waits for the answer, and the refused one never reached the store
    filter.onRequest(info(9), produceRequest(9, -1, topic, batch('again')), producer);
    expect(writer.stats.tentativeBatches).toBe(1);
    await sleep(20);
    expect(store.objects.size).toBe(0);

    // Given another connection accepted for the topic (one appended Produce)
    const other = connection('b');
    accepted(filter, other, 'ok');
    // When its next Produce, stored ahead, is refused (the ACL was revoked meanwhile)
    const revoked = info(9);
    filter.onRequest(revoked, produceRequest(9, -1, topic, batch('revoked')), other);
    expect(filter.stats.batchesStoredAhead).toBe(1);
    filter.onResponse(
      revoked,
      produceResponseOf(9, topic, [
        { index: 0, errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, baseOffset: -1n },
      ]),
    );
    // Then it is counted as stored but refused, and the connection's next batch waits for the answer again
    expect(filter.stats).toMatchObject({
      batchesStoredAheadRefused: 1,
      bytesStoredAheadRefused: batch('revoked').length,
    });
    const tentativeBefore = writer.stats.tentativeBatches;
    filter.onRequest(info(9), produceRequest(9, -1, topic, batch('after')), other);
    expect(writer.stats.tentativeBatches).toBe(tentativeBefore + 1);
    expect(filter.stats.batchesStoredAhead).toBe(1);
  });

  it('publishes no metadata piece for a batch stored ahead that the broker refused', async () => {
    // Given a connection accepted for the topic
    const { filter, published } = setup({ durableAck: false });
    const producer = connection('a');
    accepted(filter, producer, 'first');
    // When its next batch, stored ahead, is refused (the leader moved)
    const moved = info(9);
    filter.onRequest(moved, produceRequest(9, -1, topic, batch('moved')), producer);
    filter.onResponse(
      moved,
      produceResponseOf(9, topic, [
        { index: 0, errorCode: ErrorCode.NOT_LEADER_OR_FOLLOWER, baseOffset: -1n },
      ]),
    );
    await sleep(20);
    // Then only the appended batch is in the metadata topic
    expect(published.map((p) => p.baseOffset)).toEqual([0n]);
  });
});
