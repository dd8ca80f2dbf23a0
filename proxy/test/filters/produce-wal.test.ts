import {
  ApiKey,
  decodeProduceResponse,
  ErrorCode,
  encodeProduceRequest,
  encodeRequestHeader,
  parseWalObject,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { createLogger } from '../../src/log.js';
import { TopicNames } from '../../src/metadata/topic-names.js';
import { StoreHealth } from '../../src/store/store-health.js';
import { ProducerWaits } from '../../src/wal/index.js';
import {
  frame,
  info,
  produceRequest,
  produceRequestOf,
  produceResponse,
  produceResponseOf,
  sealingIn,
  setup,
  TOPIC_ID,
} from './produce-wal-support.js';

describe('ProduceWalFilter', () => {
  it('tells ProducerWaits which connections wait for the WAL: acks=all until answered; acks=1 and mode=inline never', async () => {
    const connection = (name: string) => ({ log: createLogger('silent'), remoteAddress: name });
    const batch = () => makeBatch({ records: Buffer.from('x'), lastOffsetDelta: 0, recordCount: 1 });

    // Given an acks=all producer whose batch the broker has not confirmed yet
    const waits = new ProducerWaits();
    const { filter } = setup({ durableAck: false, producerWaits: waits });
    const all = info(9);
    filter.onRequest(all, produceRequest(9, -1, { name: 'wal-orders' }, batch()), connection('a'));
    // Then its batch is still coming; once the broker answers, it no longer waits for the WAL
    const now = Date.now();
    expect(waits.mayStillAdd(50, now, 1_000)).toBe(true);
    await filter.onResponse(all, produceResponse(9, { name: 'wal-orders' }, 1n));
    expect(waits.stats.connections).toBe(1);
    // (answered just now: it may send again within the window, and not after it)
    expect(waits.mayStillAdd(50, now + 10_000, 1_000)).toBe(false);

    // Given an acks=1 producer without durable ack: answered after the broker's append, it never waits
    const acksOne = new ProducerWaits();
    const one = setup({ durableAck: false, producerWaits: acksOne });
    const i1 = info(9);
    one.filter.onRequest(i1, produceRequest(9, 1, { name: 'wal-orders' }, batch()), connection('b'));
    expect(acksOne.mayStillAdd(50, Date.now() + 10_000, 1_000)).toBe(true);

    // Given mode=inline: followers get the bytes from the broker, so acks=all does not wait for an object
    const inline = new ProducerWaits();
    const off = setup({ durableAck: false, mode: 'inline', producerWaits: inline });
    off.filter.onRequest(info(9), produceRequest(9, -1, { name: 'wal-orders' }, batch()), connection('c'));
    expect(inline.mayStillAdd(50, Date.now() + 10_000, 1_000)).toBe(true);
  });

  it('copies a WAL topic batch, forwards the request bytes untouched, and releases the response once stored', async () => {
    const { filter, store, published } = setup();
    const batch = makeBatch({ records: Buffer.from('hello wal'), lastOffsetDelta: 0, recordCount: 1 });
    const request = produceRequest(9, -1, { name: 'wal-orders' }, batch);
    const i = info(9);
    // When the request passes, it is forwarded as the very same bytes
    const decision = filter.onRequest(i, request);
    expect(decision).toEqual({ action: 'forward', frame: request, expectResponse: true });
    // Then the response is released unchanged, only after the object holding the batch is stored
    const response = produceResponse(9, { name: 'wal-orders' }, 42n);
    const released = await filter.onResponse(i, response);
    expect(released).toBe(response);
    const [object] = [...store.objects.values()];
    const [entry] = parseWalObject(object!).entries;
    expect(object!.subarray(entry!.position, entry!.position + entry!.length).equals(batch)).toBe(true);
    // And a metadata piece carries the offsets the leader assigned
    expect(published).toMatchObject([
      { topic: 'wal-orders', partition: 0, baseOffset: 42n, lastOffset: 42n },
    ]);
  });

  it('leaves other topics alone', () => {
    const { filter, writer } = setup();
    const request = produceRequest(9, -1, { name: 'payments' }, makeBatch());
    filter.onRequest(info(9), request);
    expect(writer.stats.pendingBytes).toBe(0);
    expect(filter.stats.batchesCopied).toBe(0);
  });

  it('holds the response of a topic id it does not know yet until the name is resolved and the batch stored', async () => {
    // Given a Produce v13 (topic ids) for a topic created a moment ago
    let resolve!: () => void;
    const later = new Promise<void>((r) => {
      resolve = r;
    });
    const { filter, store, names } = setup({ resolveLater: later });
    const i = info(13);
    filter.onRequest(i, produceRequest(13, -1, { topicId: TOPIC_ID }, makeBatch()));
    const released = filter.onResponse(i, produceResponse(13, { topicId: TOPIC_ID }, 0n));
    expect(released).toBeInstanceOf(Promise);
    // When the broker's metadata names the topic
    names.set(TOPIC_ID, 'wal-new');
    resolve();
    await released;
    // Then the batch is in the WAL before the producer hears back
    expect(filter.stats.batchesCopied).toBe(1);
    expect(store.objects.size).toBe(1);
  });

  it('answers REQUEST_TIMED_OUT, never success, when the batch could not be stored', async () => {
    const { filter, store } = setup();
    store.onPut = async () => {
      throw new Error('bucket is gone');
    };
    const i = info(9);
    filter.onRequest(i, produceRequest(9, -1, { name: 'wal-orders' }, makeBatch()));
    const released = await filter.onResponse(i, produceResponse(9, { name: 'wal-orders' }, 7n));
    const body = decodeProduceResponse(released.subarray(4 + 5), 9);
    expect(body.responses[0]!.partitionResponses[0]).toMatchObject({
      errorCode: ErrorCode.REQUEST_TIMED_OUT,
      baseOffset: -1n,
    });
    expect(filter.stats.durableAckFailures).toBe(1);
    // And it is counted as what it is: an error answered for a batch the broker had appended
    expect(filter.stats.durableAckFailuresAfterAppend).toBe(1);
  });

  it('does not wait for an acks=0 request, which has no response', () => {
    const { filter, writer } = setup();
    const decision = filter.onRequest(info(9), produceRequest(9, 0, { name: 'wal-orders' }, makeBatch()));
    expect(decision).toMatchObject({ action: 'forward', expectResponse: false });
    expect(writer.stats.pendingBytes).toBeGreaterThan(0);
  });

  it.each([
    ['magic 1', (b: Buffer) => b.writeInt8(1, 16)],
    ['magic 0', (b: Buffer) => b.writeInt8(0, 16)],
    ['a Length below the v2 header', (b: Buffer) => b.writeInt32BE(20, 8)],
    ['a batch cut short', (b: Buffer) => b.writeInt32BE(b.length, 8)],
  ])(
    'forwards a partition with %s for the broker to judge, and copies the other partitions',
    async (_, spoil) => {
      // Given a Produce with a batch the WAL cannot read in partition 0 and a good one in partition 1
      const { filter, store } = setup();
      const bad = makeBatch({ records: Buffer.from('bad') });
      spoil(bad);
      const good = makeBatch({ records: Buffer.from('good') });
      const request = produceRequestOf(9, -1, { name: 'wal-orders' }, [
        { index: 0, records: bad },
        { index: 1, records: good },
      ]);
      const i = info(9);
      // When it passes, then it is forwarded as it came, without throwing (the connection stays open)
      expect(filter.onRequest(i, request)).toEqual({
        action: 'forward',
        frame: request,
        expectResponse: true,
      });
      // And only partition 1's batch goes to the WAL
      expect(filter.stats).toMatchObject({ batchesCopied: 1, partitionsNotCopied: 1 });
      // (the broker refuses partition 0 and appends partition 1)
      await filter.onResponse(
        i,
        produceResponseOf(9, { name: 'wal-orders' }, [
          { index: 0, errorCode: ErrorCode.CORRUPT_MESSAGE, baseOffset: -1n },
          { index: 1, errorCode: 0, baseOffset: 0n },
        ]),
      );
      const [object] = [...store.objects.values()];
      const entries = parseWalObject(object!).entries;
      expect(entries.map((e) => e.partition)).toEqual([1]);
    },
  );

  it.each([
    [
      'twice in one topic entry',
      (a: Buffer, b: Buffer, c: Buffer) => [
        {
          name: 'wal-orders',
          partitionData: [
            { index: 0, records: a },
            { index: 0, records: b },
            { index: 1, records: c },
          ],
        },
      ],
    ],
    [
      'in two entries of the topic',
      (a: Buffer, b: Buffer, c: Buffer) => [
        {
          name: 'wal-orders',
          partitionData: [
            { index: 0, records: a },
            { index: 1, records: c },
          ],
        },
        { name: 'wal-orders', partitionData: [{ index: 0, records: b }] },
      ],
    ],
  ])(
    'copies nothing of a partition a request names %s, and the other partitions as usual',
    async (_, topicData) => {
      // Given a Produce naming partition 0 with two different batches (found by fuzzing: Kafka
      // appends one of them and answers the partition once, which copy is not said)
      const { filter, store, published } = setup({ durableAck: false });
      const [a, b, c] = ['first', 'second', 'other'].map((v) => makeBatch({ records: Buffer.from(v) }));
      const request = frame([
        encodeRequestHeader({ apiKey: ApiKey.Produce, apiVersion: 9, correlationId: 5, clientId: 'test' }),
        encodeProduceRequest(
          { transactionalId: null, acks: -1, timeoutMs: 30_000, topicData: topicData(a!, b!, c!) },
          9,
        ),
      ]);
      const i = info(9);
      // When it passes and the broker answers both partitions with success
      expect(filter.onRequest(i, request)).toEqual({
        action: 'forward',
        frame: request,
        expectResponse: true,
      });
      await filter.onResponse(
        i,
        produceResponseOf(9, { name: 'wal-orders' }, [
          { index: 0, errorCode: 0, baseOffset: 40n },
          { index: 1, errorCode: 0, baseOffset: 7n },
        ]),
      );
      await new Promise((r) => setTimeout(r, 50));
      // Then the WAL holds partition 1's batch only, and only its offsets are published
      const stored = [...store.objects.values()].flatMap((o) =>
        parseWalObject(o).entries.map((e) => o.subarray(e.position, e.position + e.length)),
      );
      expect(stored).toEqual([c]);
      expect(published).toMatchObject([{ partition: 1, baseOffset: 7n }]);
      expect(filter.stats).toMatchObject({ batchesCopied: 1, partitionsNamedTwice: 2 });
    },
  );

  it.each([
    // Kafka reads strings as UTF-8 with replacement characters, never failing on them
    ['a client id that is not UTF-8', 9, (f: Buffer) => f.writeUInt8(0xff, 4 + 10)],
    ['a topic name that is not UTF-8', 9, (f: Buffer) => f.writeUInt8(0xc3, f.indexOf('wal-orders') + 3)],
    // Kafka reads any negative length of a nullable string as null
    ['a transactional id of length -2', 8, (f: Buffer) => f.writeInt16BE(-2, 4 + 10 + 'test'.length)],
  ])(
    'forwards, as sent and copying nothing, a Produce with %s: the codec refuses it, Kafka reads it',
    (_, version, spoil) => {
      // Given a request the broker reads but the codec does not (found by fuzzing: the filter
      // threw, and the pipe closed a connection the broker would have answered)
      const { filter, writer } = setup();
      const request = produceRequest(version, -1, { name: 'wal-orders' }, makeBatch());
      spoil(request);
      // When it passes, then it goes up as it came, and an answer is expected
      expect(filter.onRequest(info(version), request)).toEqual({
        action: 'forward',
        frame: request,
        expectResponse: true,
      });
      // And nothing of it is copied
      expect(writer.stats.pendingBytes).toBe(0);
      expect(filter.stats.requestsNotDecoded).toBe(1);
    },
  );

  it('forwards a Produce with bytes after its body, as sent, copying nothing', () => {
    const { filter, writer } = setup();
    const request = produceRequest(9, 0, { name: 'wal-orders' }, makeBatch());
    const extended = Buffer.concat([request, Buffer.from([1, 2, 3])]);
    extended.writeInt32BE(extended.length - 4, 0);
    expect(filter.onRequest(info(9), extended)).toEqual({
      action: 'forward',
      frame: extended,
      expectResponse: false,
    });
    expect(writer.stats.pendingBytes).toBe(0);
  });

  describe('while the store is degraded', () => {
    const degraded = () => {
      const health = new StoreHealth({
        store: 'memory://',
        probe: async () => {},
        log: createLogger('silent'),
      });
      health.markDegraded('test');
      return health;
    };

    it('copies nothing of a topic without durable ack and does not hold its response', () => {
      // Given a degraded store and a topic without durable ack
      const { filter, writer } = setup({ durableAck: false, health: degraded() });
      const i = info(9);
      const batch = makeBatch();
      // When a Produce passes
      filter.onRequest(i, produceRequest(9, -1, { name: 'wal-orders' }, batch));
      // Then nothing is copied (it replicates inline), and the response goes at once
      expect(writer.stats.pendingBytes).toBe(0);
      expect(filter.stats).toMatchObject({
        batchesCopied: 0,
        batchesNotCopiedStoreDegraded: 1,
        bytesNotCopiedStoreDegraded: batch.length,
      });
      const response = produceResponse(9, { name: 'wal-orders' }, 3n);
      expect(filter.onResponse(i, response)).toBe(response);
    });

    it('still copies a durable-ack topic, whose producer asked to wait for the store', () => {
      const { filter, writer } = setup({ durableAck: true, health: degraded() });
      filter.onRequest(info(9), produceRequest(9, -1, { name: 'wal-orders' }, makeBatch()));
      expect(writer.stats.pendingBytes).toBeGreaterThan(0);
      expect(filter.stats.batchesCopied).toBe(1);
    });
  });

  describe('with the sealing policy (mode=auto)', () => {
    it('copies nothing while the topic’s budget group replicates inline, and still shows the policy every batch', () => {
      // Given a mode=auto topic without durable ack whose budget group is inline
      const { policy, observed } = sealingIn('inline');
      const { filter, writer } = setup({ sealing: policy, mode: 'auto', durableAck: false });
      const batch = makeBatch({ records: Buffer.alloc(500) });
      const i = info(9);
      // When a Produce passes
      filter.onRequest(i, produceRequest(9, -1, { name: 'wal-orders' }, batch));
      // Then the batch is not copied, and counted as inline
      expect(writer.stats.pendingBytes).toBe(0);
      expect(filter.stats).toMatchObject({
        batchesCopied: 0,
        batchesNotCopiedInlineMode: 1,
        bytesNotCopiedInlineMode: batch.length,
      });
      // And the policy saw it (the group's rate decides when it goes back to the WAL)
      expect(observed).toEqual([{ budgetMs: 50, bytes: batch.length }]);
      const response = produceResponse(9, { name: 'wal-orders' }, 3n);
      expect(filter.onResponse(i, response)).toBe(response);
    });

    it('copies the batches while the group goes through the WAL', () => {
      const { policy, observed } = sealingIn('wal');
      const { filter, writer } = setup({ sealing: policy, mode: 'auto', durableAck: false });
      filter.onRequest(info(9), produceRequest(9, -1, { name: 'wal-orders' }, makeBatch()));
      expect(filter.stats).toMatchObject({ batchesCopied: 1, batchesNotCopiedInlineMode: 0 });
      expect(writer.stats.tentativeBatches).toBe(1);
      expect(observed).toHaveLength(1);
    });

    it.each([
      ['a durable-ack topic', { mode: 'auto' as const, durableAck: true }],
      ['a mode=wal topic', { mode: 'wal' as const, durableAck: false }],
    ])('copies %s in an inline group and stores its small object whatever it costs', async (_, topic) => {
      // Given an inline group and a batch far below break-even
      const { policy } = sealingIn('inline');
      const { filter, store } = setup({ sealing: policy, ...topic });
      const i = info(9);
      filter.onRequest(i, produceRequest(9, -1, { name: 'wal-orders' }, makeBatch()));
      expect(filter.stats.batchesCopied).toBe(1);
      // When the broker appended it and the budget's deadline passed (50 − 20 = 30 ms)
      await filter.onResponse(i, produceResponse(9, { name: 'wal-orders' }, 0n));
      await new Promise((r) => setTimeout(r, 40));
      // Then it was uploaded
      expect(store.objects.size).toBe(1);
    });

    it('lets a mode=auto batch’s small object go un-uploaded: its ticket says why, nothing is stored', async () => {
      // Given a group in the WAL and one small batch of a mode=auto topic
      const { policy } = sealingIn('wal');
      const { filter, store, writer } = setup({ sealing: policy, mode: 'auto', durableAck: false });
      const i = info(9);
      filter.onRequest(i, produceRequest(9, -1, { name: 'wal-orders' }, makeBatch()));
      // When the broker appended it, the response goes at once (no durable ack)
      const response = produceResponse(9, { name: 'wal-orders' }, 0n);
      expect(filter.onResponse(i, response)).toBe(response);
      // Then at the deadline the object is abandoned, not uploaded
      await new Promise((r) => setTimeout(r, 40));
      expect(store.objects.size).toBe(0);
      expect(writer.stats.objectsAbandoned).toBe(1);
    });
  });

  describe('Produce v13 naming ids the local broker does not name', () => {
    it('costs at most one Metadata refresh a second and holds no response once the id is known unknown', async () => {
      // Given a sidecar whose broker names no topic (Describe granted on other topics only)
      let fetches = 0;
      const topicNames = new TopicNames({ host: '127.0.0.1', port: 1 }, createLogger('silent'), {
        fetchNames: async () => {
          fetches++;
          return new Map();
        },
      });
      const { filter } = setup();
      Object.assign(filter, { deps: { ...(filter as unknown as { deps: object }).deps, topicNames } });
      const send = () => {
        const i = info(13);
        filter.onRequest(i, produceRequest(13, -1, { topicId: TOPIC_ID }, makeBatch()));
        return filter.onResponse(i, produceResponse(13, { topicId: TOPIC_ID }, 0n));
      };
      // When the first Produce for the id arrives, its response waits for one refresh
      await send();
      expect(fetches).toBe(1);
      // And 200 more follow at once
      const held: unknown[] = [];
      for (let n = 0; n < 200; n++) {
        const released = send();
        if (released instanceof Promise) held.push(released);
      }
      // Then none of them is held and none asks the broker again
      expect(held).toEqual([]);
      expect(fetches).toBe(1);
      expect(filter.stats.unknownTopicIds).toBe(201);
    });
  });

  describe('a Produce the broker refuses', () => {
    it.each([true, false])(
      'never lands in the bucket (durable ack %s); the accepted partition does',
      async (durableAck) => {
        // Given a Produce with batches for partitions 0 and 1
        const { filter, store, writer } = setup({ durableAck });
        const refused = makeBatch({ records: Buffer.from('refused') });
        const accepted = makeBatch({ records: Buffer.from('accepted') });
        const i = info(9);
        filter.onRequest(
          i,
          produceRequestOf(9, -1, { name: 'wal-orders' }, [
            { index: 0, records: refused },
            { index: 1, records: accepted },
          ]),
        );
        // When the broker refuses partition 0 (e.g. no Write ACL, UNKNOWN_TOPIC_OR_PARTITION) and appends 1
        await filter.onResponse(
          i,
          produceResponseOf(9, { name: 'wal-orders' }, [
            { index: 0, errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED, baseOffset: -1n },
            { index: 1, errorCode: 0, baseOffset: 7n },
          ]),
        );
        await writer.flush();
        // Then only the accepted batch is in an object
        const stored = [...store.objects.values()].flatMap((o) =>
          parseWalObject(o).entries.map((e) => o.subarray(e.position, e.position + e.length)),
        );
        expect(stored).toEqual([accepted]);
        expect(writer.stats.batchesRejected).toBe(1);
      },
    );

    it('keeps acks=0 batches tentative until a follower fetch confirms them', () => {
      const { filter, writer } = setup();
      filter.onRequest(info(9), produceRequest(9, 0, { name: 'wal-orders' }, makeBatch()));
      expect(writer.stats.tentativeBatches).toBe(1);
    });
  });
});
