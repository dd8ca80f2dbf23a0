import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { parseWalObject, WalFormatError } from '@walproxy/shared';
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { ObjectStoreError } from '../../src/store/index.js';
import {
  isWalWriteError,
  parseWalObjectKey,
  WAL_WRITER_CHANNELS,
  type WalAppendTicket,
  type WalLocation,
  type WalWriteError,
  WalWriter,
  type WalWriterOptions,
} from '../../src/wal/index.js';
import { type Gate, gate, MemoryObjectStore, unreachable } from './memory-store.js';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);

/** A valid magic v2 batch of exactly `bytes` bytes (61-byte header included). */
function batchOf(bytes: number, fill = 0x61): Buffer {
  return makeBatch({ records: Buffer.alloc(bytes - 61, fill) });
}

/**
 * Sealed object size for one topic named `t`: header 28 + footer counts 8 + topic row 18 + 1 +
 * trailer 22, and 42 bytes of index per batch.
 */
const OBJECT_OVERHEAD = 28 + 8 + 19 + 22;
const PER_BATCH = 42;

function newWriter(store: MemoryObjectStore, options: Partial<WalWriterOptions> = {}): WalWriter {
  const writer = new WalWriter({ store, brokerId: 7, lingerMs: 60_000, ...options });
  onTestFinished(() => writer.close());
  return writer;
}

function append(writer: WalWriter, batch: Buffer, opts?: { lingerMs?: number; targetBytes?: number }) {
  return writer.append({ topicName: 't', partition: 0, batch }, opts);
}

/** Watches a promise so a test can say it has not settled yet. */
function track<T>(promise: Promise<T>): { settled: boolean; value?: T; error?: unknown } {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: unknown) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

async function rejection(ticket: WalAppendTicket): Promise<WalWriteError> {
  const error = await ticket.durable.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!isWalWriteError(error)) throw new Error(`expected a WalWriteError, got ${String(error)}`);
  return error;
}

async function expectStored(store: MemoryObjectStore, location: WalLocation, batch: Buffer): Promise<void> {
  const object = store.objects.get(location.objectKey);
  expect(object?.length).toBe(location.objectSize);
  expect(await store.get(location.objectKey, { offset: location.position, length: location.length })).toEqual(
    batch,
  );
}

/** Records every event published on the writer's channels while the test runs. */
function recordEvents(): { name: string; event: Record<string, unknown> }[] {
  const events: { name: string; event: Record<string, unknown> }[] = [];
  for (const name of Object.values(WAL_WRITER_CHANNELS)) {
    const listener = (event: unknown) => events.push({ name, event: event as Record<string, unknown> });
    subscribe(name, listener);
    onTestFinished(() => {
      unsubscribe(name, listener);
    });
  }
  return events;
}

describe('WalWriter sealing', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('seals before a batch would take the object past its target, so objects stay at or under it', async () => {
    // Given a 4096-byte target and batches of 1000 bytes: three fill an object to 3000 + 77 + 126
    const store = new MemoryObjectStore();
    const writer = newWriter(store, { targetBytes: 4096 });
    const batches = Array.from({ length: 7 }, (_, i) => batchOf(1000, 0x61 + i));

    // When seven are appended
    const tickets = batches.map((b) => append(writer, b));

    // Then two objects were sealed by size and handed to the store, the seventh batch is still open
    expect(writer.stats.sealedBySize).toBe(2);
    expect(store.putKeys).toHaveLength(2);

    // And, flushed, every object parses and holds exactly its batches: three, three, and one
    await writer.flush();
    for (const [i, ticket] of tickets.entries()) await expectStored(store, await ticket.durable, batches[i]!);
    const objects = store.putKeys.map((key) => store.objects.get(key)!);
    expect(objects.map((o) => parseWalObject(o).entries.map((e) => e.length))).toEqual([
      [1000, 1000, 1000],
      [1000, 1000, 1000],
      [1000],
    ]);
    expect(objects[0]!.length).toBe(OBJECT_OVERHEAD + 3 * (1000 + PER_BATCH));
    for (const object of objects) expect(object.length).toBeLessThanOrEqual(4096);
  });

  it('seals at once when an append makes the object reach its target exactly', async () => {
    // Given a 1024-byte target and a batch that makes a 1024-byte object on its own
    const store = new MemoryObjectStore();
    const writer = newWriter(store, { targetBytes: 1024 });
    const batch = batchOf(1024 - OBJECT_OVERHEAD - PER_BATCH);

    // When it is appended
    const ticket = append(writer, batch);

    // Then the object is sealed by size without waiting for the linger or another batch
    const location = await ticket.durable;
    expect(location.objectSize).toBe(1024);
    expect(writer.stats).toMatchObject({ sealedBySize: 1, sealedByLinger: 0, sealedByFlush: 0 });
    await expectStored(store, location, batch);
  });

  it('gives a batch bigger than the target an object of its own', async () => {
    // Given an open object with one small batch, and a batch bigger than the 4096-byte target
    const store = new MemoryObjectStore();
    const writer = newWriter(store, { targetBytes: 4096 });
    const small = batchOf(200);
    const big = batchOf(10_000, 0x62);
    const smallTicket = append(writer, small);

    // When the big batch is appended
    const bigTicket = append(writer, big);

    // Then the small batch's object is sealed first, and the big batch is sealed alone
    const [smallAt, bigAt] = await Promise.all([smallTicket.durable, bigTicket.durable]);
    expect(smallAt.objectKey).not.toBe(bigAt.objectKey);
    expect(parseWalObject(store.objects.get(bigAt.objectKey)!).entries).toHaveLength(1);
    expect(parseWalObject(store.objects.get(smallAt.objectKey)!).entries).toHaveLength(1);
    expect(writer.stats.sealedBySize).toBe(2);
    await expectStored(store, bigAt, big);
  });

  it('seals by the smallest target among the batches of the open object', async () => {
    // Given an object opened by a topic with a large target
    const store = new MemoryObjectStore();
    const writer = newWriter(store, { targetBytes: 100_000 });
    append(writer, batchOf(1500));

    // When a topic with a 2048-byte target appends a batch that does not fit under it
    const ticket = append(writer, batchOf(1500), { targetBytes: 2048 });

    // Then the open object is sealed first, and the new one seals at its 2048-byte target
    append(writer, batchOf(600));
    expect(writer.stats.sealedBySize).toBe(2);
    expect((await ticket.durable).objectSize).toBeLessThanOrEqual(2048);
  });

  it('seals when the linger of the first batch expires', async () => {
    // Given a writer with a 10 ms linger and one batch appended at T0
    const store = new MemoryObjectStore();
    const writer = newWriter(store, { lingerMs: 10 });
    const ticket = append(writer, batchOf(500));

    // When 9 ms pass, nothing is sealed; at 10 ms the object is sealed and handed to the store
    await vi.advanceTimersByTimeAsync(9);
    expect(writer.stats.sealedByLinger).toBe(0);
    expect(store.putKeys).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);

    // Then
    expect(writer.stats.sealedByLinger).toBe(1);
    expect(store.putKeys).toHaveLength(1);
    expect((await ticket.durable).uploadedAtMs).toBe(T0 + 10);
  });

  it('seals at the earliest append time + linger among batches with per-topic lingers', async () => {
    // Given a batch with a 50 ms linger at T0, then one with a 10 ms linger at T0+5 (deadline T0+15)
    const store = new MemoryObjectStore();
    const writer = newWriter(store, { lingerMs: 50 });
    append(writer, batchOf(300));
    await vi.advanceTimersByTimeAsync(5);
    append(writer, batchOf(300), { lingerMs: 10 });
    // And a later batch with a long linger, which must not push the deadline out
    append(writer, batchOf(300), { lingerMs: 1_000 });

    // When time reaches T0+14 the object is open; at T0+15 it is sealed by linger
    await vi.advanceTimersByTimeAsync(9);
    expect(writer.stats.sealedByLinger).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(writer.stats.sealedByLinger).toBe(1);

    // Then the next object opens at T0+15 with a 100 ms linger, and a 30 ms batch at T0+25 wins
    append(writer, batchOf(300), { lingerMs: 100 });
    await vi.advanceTimersByTimeAsync(10);
    append(writer, batchOf(300), { lingerMs: 30 });
    await vi.advanceTimersByTimeAsync(29);
    expect(writer.stats.sealedByLinger).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(writer.stats.sealedByLinger).toBe(2);
    await writer.flush();
    expect(store.putKeys.map((key) => parseWalObject(store.objects.get(key)!).entries.length)).toEqual([
      3, 2,
    ]);
  });

  it('seals on flush, and never uploads an empty object', async () => {
    // Given a writer with nothing appended
    const store = new MemoryObjectStore();
    const writer = newWriter(store);

    // When it is flushed, then no object is uploaded
    await writer.flush();
    expect(store.putKeys).toEqual([]);

    // When two batches are appended and it is flushed
    const batches = [batchOf(300), batchOf(400, 0x62)];
    const tickets = batches.map((b) => append(writer, b));
    await writer.flush();

    // Then both are in one object sealed by flush, and a second flush uploads nothing more
    expect(writer.stats).toMatchObject({ sealedByFlush: 1, sealedBySize: 0, sealedByLinger: 0 });
    await writer.flush();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(store.putKeys).toHaveLength(1);
    for (const [i, ticket] of tickets.entries()) await expectStored(store, await ticket.durable, batches[i]!);
  });

  it('throws for a batch that is not one record batch and appends nothing', async () => {
    // Given a writer with no open object
    const store = new MemoryObjectStore();
    const writer = newWriter(store);

    // When a truncated batch is appended, then append throws the format error
    expect(() => append(writer, batchOf(300).subarray(0, 200))).toThrow(WalFormatError);

    // And no object, empty or not, is ever uploaded or counted
    await writer.flush();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(store.putKeys).toEqual([]);
    expect(writer.stats.pendingBytes).toBe(0);
  });

  it('names objects in the documented layout, with the header creation time in the key', async () => {
    // Given a writer with a key prefix
    const store = new MemoryObjectStore();
    const writer = newWriter(store, { keyPrefix: 'cluster-a/wal/' });

    // When a batch is stored
    append(writer, batchOf(300));
    await writer.flush();

    // Then the key has the hour bucket of T0, the broker id and an id starting with T0
    const [key] = store.objects.keys();
    expect(key).toMatch(/^cluster-a\/wal\/2026\/01\/02\/03\/7\/\d{13}-[0-9a-f]{8}-[0-9a-f]{12}\.wal$/);
    const object = parseWalObject(store.objects.get(key!)!);
    expect(parseWalObjectKey(key!)).toMatchObject({ brokerId: 7, createdAtMs: T0 });
    expect(object.header).toMatchObject({ writerBrokerId: 7, createdAtMs: T0 });
  });
});

describe('WalWriter uploads', () => {
  it('retries retriable store errors with backoff, then succeeds, and publishes each step', async () => {
    // Given a store that is unreachable twice, then works
    const store = new MemoryObjectStore();
    store.onPut = async (key, commit, call) => {
      if (call <= 2) throw unreachable(key);
      commit();
    };
    const writer = newWriter(store, { retryBaseMs: 1, retryMaxMs: 2 });
    const events = recordEvents();
    const batch = batchOf(500);

    // When a batch is appended and flushed
    const ticket = append(writer, batch);
    await writer.flush();

    // Then its ticket resolves, with the retries counted
    await expectStored(store, await ticket.durable, batch);
    expect(writer.stats).toMatchObject({
      objectsUploaded: 1,
      batchesUploaded: 1,
      uploadAttempts: 3,
      uploadRetries: 2,
      uploadFailures: 0,
      pendingBytes: 0,
      uploadsInFlight: 0,
    });
    // And the channels told the story: seal, start, two failed attempts with backoff, success, end
    expect(events.map((e) => e.name)).toEqual([
      WAL_WRITER_CHANNELS.seal,
      WAL_WRITER_CHANNELS.uploadStart,
      WAL_WRITER_CHANNELS.uploadAttempt,
      WAL_WRITER_CHANNELS.uploadAttempt,
      WAL_WRITER_CHANNELS.uploadAttempt,
      WAL_WRITER_CHANNELS.uploadEnd,
    ]);
    const [seal, , first, , last, end] = events.map((e) => e.event);
    expect(seal).toMatchObject({ reason: 'flush', batchCount: 1, size: batch.length + 77 + PER_BATCH });
    expect(first).toMatchObject({ attempt: 1, retriable: true, error: expect.any(ObjectStoreError) });
    expect(first?.backoffMs).toBeGreaterThanOrEqual(0);
    expect(last).toMatchObject({ attempt: 3, error: undefined, alreadyStored: false });
    expect(end).toMatchObject({ attempts: 3, error: undefined });
  });

  it('rejects every ticket of an object the store refuses for good, and no other', async () => {
    // Given a store that denies access to the first object only
    const store = new MemoryObjectStore();
    store.onPut = async (key, commit) => {
      if (key === store.putKeys[0]) {
        throw new ObjectStoreError('WALPROXY_ERR_STORE_ACCESS_DENIED', 'access denied', { key });
      }
      commit();
    };
    const writer = newWriter(store);

    // When two objects of two batches each are written
    const first = [append(writer, batchOf(300)), append(writer, batchOf(300))];
    await writer.flush();
    const second = [append(writer, batchOf(300)), append(writer, batchOf(300))];
    await writer.flush();

    // Then both tickets of the first reject with UPLOAD_FAILED after one attempt, carrying the cause
    for (const ticket of first) {
      const error = await rejection(ticket);
      expect(error).toMatchObject({
        code: 'WALPROXY_ERR_WAL_UPLOAD_FAILED',
        kind: 'UPLOAD_FAILED',
        objectKey: store.putKeys[0],
        attempts: 1,
        deadlineExceeded: false,
      });
      expect(error.cause).toMatchObject({ code: 'WALPROXY_ERR_STORE_ACCESS_DENIED' });
    }
    // And the second object is stored, with the bytes of both accounted for
    for (const ticket of second) expect((await ticket.durable).objectKey).toBe(store.putKeys[1]);
    expect(writer.stats).toMatchObject({
      objectsUploaded: 1,
      uploadFailures: 1,
      uploadRetries: 0,
      pendingBytes: 0,
    });
  });

  it('treats ALREADY_EXISTS after a lost response as success when the stored size matches', async () => {
    // Given a store that stores the first put but loses its response
    const store = new MemoryObjectStore();
    store.onPut = async (key, commit, call) => {
      commit();
      if (call === 1) throw unreachable(key);
    };
    const writer = newWriter(store, { retryBaseMs: 1, retryMaxMs: 1 });
    const events = recordEvents();
    const batch = batchOf(700);

    // When a batch is written
    const ticket = append(writer, batch);
    await writer.flush();

    // Then the retry meets ALREADY_EXISTS, the head finds the same size, and the ticket resolves
    await expectStored(store, await ticket.durable, batch);
    expect(writer.stats).toMatchObject({ objectsUploaded: 1, uploadRetries: 1, uploadFailures: 0 });
    const attempts = events.filter((e) => e.name === WAL_WRITER_CHANNELS.uploadAttempt).map((e) => e.event);
    expect(attempts[1]).toMatchObject({ attempt: 2, alreadyStored: true, error: undefined });
  });

  it('fails an object whose key holds a different object', async () => {
    // Given a store where another object of another size already sits under the key
    const store = new MemoryObjectStore();
    store.onPut = async (key, commit) => {
      store.objects.set(key, Buffer.from('someone else'));
      commit();
    };
    const writer = newWriter(store);

    // When a batch is written
    const ticket = append(writer, batchOf(300));
    await writer.flush();

    // Then it is not claimed as stored: UPLOAD_FAILED, caused by ALREADY_EXISTS
    const error = await rejection(ticket);
    expect(error.cause).toMatchObject({ code: 'WALPROXY_ERR_STORE_ALREADY_EXISTS' });
    expect(error.message).toMatch(/taken by an object of 12 bytes/);
    expect(store.objects.get(store.putKeys[0]!)?.toString()).toBe('someone else');
  });

  it('uploads at most maxUploadsInFlight objects at once, in seal order, settling each on its own', async () => {
    // Given a store that holds every put until the test opens its gate
    const store = new MemoryObjectStore();
    const gates = new Map<string, Gate>();
    store.onPut = async (key, commit) => {
      const g = gate();
      gates.set(key, g);
      await g.promise;
      commit();
    };
    const writer = newWriter(store, { targetBytes: 1024, maxUploadsInFlight: 2 });

    // When six objects are sealed (each batch is bigger than the target)
    const tickets = Array.from({ length: 6 }, () => track(append(writer, batchOf(2000)).durable));
    await Promise.resolve();

    // Then two puts run, four objects wait
    expect(store.running).toBe(2);
    expect(writer.stats).toMatchObject({ uploadsInFlight: 2, queuedObjects: 4, pendingBytes: 12_000 });

    // When the second upload completes before the first
    gates.get(store.putKeys[1]!)!.open();
    await vi.waitFor(() => expect(tickets[1]!.settled).toBe(true));

    // Then its ticket resolves while the first is still pending, and the third object starts
    expect(tickets[0]!.settled).toBe(false);
    expect(store.putKeys).toHaveLength(3);

    // When every gate opens as puts arrive
    store.onPut = async (_key, commit) => commit();
    for (const g of gates.values()) g.open();
    await writer.flush();

    // Then all six are stored, never more than two at once, started in seal order
    expect(tickets.every((t) => t.settled && t.value !== undefined)).toBe(true);
    expect(store.maxRunning).toBe(2);
    expect(store.putKeys).toEqual(tickets.map((t) => t.value!.objectKey));
    expect([...store.putKeys].sort()).toEqual(store.putKeys);
    expect(writer.stats).toMatchObject({ objectsUploaded: 6, pendingBytes: 0, uploadsInFlight: 0 });
  });

  it('refuses appends past maxPendingBytes with OVERLOADED and accepts again once uploads finish', async () => {
    // Given a writer allowed 4096 pending bytes and a store that holds puts
    const store = new MemoryObjectStore();
    const held = gate();
    store.onPut = async (_key, commit) => {
      await held.promise;
      commit();
    };
    const writer = newWriter(store, { targetBytes: 2048, maxPendingBytes: 4096 });
    const accepted = Array.from({ length: 4 }, () => append(writer, batchOf(1000)));
    expect(writer.stats.pendingBytes).toBe(4000);

    // When one more batch would pass the bound
    const refused = append(writer, batchOf(1000));

    // Then it is refused at once, without touching the open object
    const error = await rejection(refused);
    expect(error).toMatchObject({ code: 'WALPROXY_ERR_WAL_OVERLOADED', kind: 'OVERLOADED' });
    expect(writer.stats).toMatchObject({ refusedOverloaded: 1, pendingBytes: 4000 });

    // When the store lets the uploads finish
    held.open();
    await writer.flush();
    for (const ticket of accepted) await ticket.durable;
    expect(writer.stats.pendingBytes).toBe(0);

    // Then appends are accepted again
    const again = append(writer, batchOf(1000));
    await writer.flush();
    expect((await again.durable).length).toBe(1000);
  });

  it('refuses appends after close with CLOSED, after storing what was open', async () => {
    // Given a writer with one batch open
    const store = new MemoryObjectStore();
    const writer = newWriter(store);
    const before = append(writer, batchOf(300));

    // When it is closed and a batch arrives afterwards
    await writer.close();
    const after = append(writer, batchOf(300));

    // Then the open batch was stored and the late one is refused
    expect((await before.durable).objectKey).toBe(store.putKeys[0]);
    expect(await rejection(after)).toMatchObject({ code: 'WALPROXY_ERR_WAL_CLOSED' });
    expect(store.putKeys).toHaveLength(1);
  });

  it('never raises an unhandled rejection for a ticket nobody awaits', async () => {
    // Given a listener for unhandled rejections and a store that refuses every put
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    onTestFinished(() => {
      process.off('unhandledRejection', listener);
    });
    const store = new MemoryObjectStore();
    store.onPut = async (key) => {
      throw new ObjectStoreError('WALPROXY_ERR_STORE_ACCESS_DENIED', 'denied', { key });
    };
    const writer = newWriter(store, { targetBytes: 400_000, maxPendingBytes: 400_000 });

    // When tickets fail by upload, by overload and by close, and none is observed
    append(writer, batchOf(300));
    await writer.flush();
    append(writer, batchOf(300_000));
    append(writer, batchOf(300_000));
    await writer.close();
    append(writer, batchOf(300));
    await new Promise((resolve) => setTimeout(resolve, 10));

    // Then no unhandled rejection was raised
    expect(writer.stats).toMatchObject({ uploadFailures: 2, refusedOverloaded: 1 });
    expect(unhandled).toEqual([]);
  });

  it('checks its options', () => {
    // Given a store
    const store = new MemoryObjectStore();

    // When options are out of range, then the writer refuses them with a message naming them
    expect(() => new WalWriter({ store, brokerId: -1 })).toThrow(/broker id -1/);
    expect(() => new WalWriter({ store, brokerId: 1, targetBytes: 100 })).toThrow(/targetBytes/);
    expect(() => new WalWriter({ store, brokerId: 1, lingerMs: -1 })).toThrow(/lingerMs/);
    expect(() => new WalWriter({ store, brokerId: 1, maxUploadsInFlight: 0 })).toThrow(/maxUploadsInFlight/);
    expect(() => new WalWriter({ store, brokerId: 1, retryBaseMs: 10, retryMaxMs: 5 })).toThrow(/retryMaxMs/);
    expect(() => new WalWriter({ store, brokerId: 1, maxPendingBytes: 1000 })).toThrow(/maxPendingBytes/);
    expect(() => new WalWriter({ store, brokerId: 1, keyPrefix: 'wal' })).toThrow(/end with "\/"/);
    expect(() => new WalWriter({ store, brokerId: 1, keyPrefix: '../' })).toThrow(ObjectStoreError);
    // And per-append settings too
    const writer = newWriter(store);
    expect(() => append(writer, batchOf(300), { targetBytes: 10 })).toThrow(/targetBytes/);
    expect(() => append(writer, batchOf(300), { lingerMs: 1.5 })).toThrow(/lingerMs/);
    expect(writer.stats.pendingBytes).toBe(0);
  });
});

describe('WalWriter upload deadline', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('rejects the tickets when retries run out of time, with the last store error', async () => {
    // Given a store that is always unreachable and a 1000 ms deadline
    const store = new MemoryObjectStore();
    store.onPut = async (key) => {
      throw unreachable(key);
    };
    const writer = newWriter(store, { uploadDeadlineMs: 1000, retryBaseMs: 10, retryMaxMs: 100 });
    const ticket = append(writer, batchOf(300));
    const flushed = track(writer.flush());

    // When the deadline passes
    await vi.advanceTimersByTimeAsync(1000);

    // Then the ticket is rejected, having retried, and the bytes are released
    const error = await rejection(ticket);
    expect(error).toMatchObject({ code: 'WALPROXY_ERR_WAL_UPLOAD_FAILED', deadlineExceeded: true });
    expect(error.cause).toMatchObject({ code: 'WALPROXY_ERR_STORE_UNREACHABLE' });
    expect(error.attempts).toBeGreaterThan(1);
    await vi.waitFor(() => expect(flushed.settled).toBe(true));
    expect(writer.stats).toMatchObject({ uploadFailures: 1, pendingBytes: 0, uploadsInFlight: 0 });
  });

  it('abandons a put that outlives the deadline but keeps its slot and bytes until it ends', async () => {
    // Given a store whose put hangs until released, one upload slot and a 1000 ms deadline
    const store = new MemoryObjectStore();
    const held = gate();
    store.onPut = async (_key, commit) => {
      await held.promise;
      commit();
    };
    const writer = newWriter(store, { uploadDeadlineMs: 1000, maxUploadsInFlight: 1 });
    const first = append(writer, batchOf(300));
    const firstState = track(first.durable);
    void writer.flush();
    await vi.advanceTimersByTimeAsync(500);
    const second = append(writer, batchOf(400));
    const secondState = track(second.durable);
    void writer.flush();

    // When 999 ms pass, the first is still pending; at 1000 ms it fails
    await vi.advanceTimersByTimeAsync(499);
    expect(firstState.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await rejection(first)).toMatchObject({
      kind: 'UPLOAD_FAILED',
      deadlineExceeded: true,
      attempts: 1,
    });
    // And the hung put still holds the only slot and its bytes, while the second object waits
    expect(writer.stats).toMatchObject({ uploadsInFlight: 1, queuedObjects: 1, pendingBytes: 700 });

    // When the second object's deadline passes while it waits for the slot
    await vi.advanceTimersByTimeAsync(499);
    expect(secondState.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);

    // Then it fails without an attempt
    expect(await rejection(second)).toMatchObject({
      kind: 'UPLOAD_FAILED',
      deadlineExceeded: true,
      attempts: 0,
    });
    expect(writer.stats).toMatchObject({ uploadsInFlight: 1, queuedObjects: 0, pendingBytes: 300 });
    // And the hung put, once it ends, frees the slot and the bytes; close waits for it
    held.open();
    await writer.close();
    expect(writer.stats).toMatchObject({
      uploadsInFlight: 0,
      pendingBytes: 0,
      uploadFailures: 2,
      uploadAttempts: 1,
    });
  });
});
