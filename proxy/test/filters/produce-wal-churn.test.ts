import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import {
  ApiKey,
  encodeProduceRequest,
  encodeProduceResponse,
  encodeRequestHeader,
  encodeResponseHeader,
} from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { makeBatch } from '../../../shared/test/wal/batches.js';
import { ProduceWalFilter } from '../../src/filters/produce-wal.js';
import { createLogger } from '../../src/log.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import { ConnectionPipe } from '../../src/net/connection-pipe.js';
import { newListenerCounters } from '../../src/net/counters.js';
import { FilterChain } from '../../src/net/filter-chain.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { TopicPolicy } from '../../src/topics/topic-policy.js';
import { ProducerWaits, WalWriter } from '../../src/wal/index.js';
import { SealingPolicy } from '../../src/wal/sealing-policy.js';

// Issue #24, item 4: ProducerWaits kept every producer connection ever seen (~280 B each) and,
// through the requests a closed connection left unanswered, their request frames. Here 100,000
// short-lived producer connections go through the real ConnectionPipe, ProduceWalFilter,
// ProducerWaits and WalWriter of a `mode=auto` topic whose budget group runs through the WAL; one
// in ten closes with its acks=all Produce unanswered. Sockets are stand-ins (EventEmitters the test
// feeds), not real ones: 100,000 real connections take minutes on a loaded two-core machine, and
// what is measured is what the filters keep, not the kernel's.

const CONNECTIONS = 100_000;
const WARM_UP = 5_000;
/** Every this many connections the test yields to the timers. */
const PER_TICK = 500;
/** The writer's confirm timeout, shorter than the default (5 s) so that the test waits less. */
const CONFIRM_TIMEOUT_MS = 500;
const MiB = 1024 * 1024;
const RECORDS = Buffer.alloc(1_000, 0x61);

function frame(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

/** An acks=all Produce v9 of one 1 kB batch to `wal-churn`, as a producer sends it. */
function produceRequest(correlationId: number): Buffer {
  return frame([
    encodeRequestHeader({ apiKey: ApiKey.Produce, apiVersion: 9, correlationId, clientId: 'churn' }),
    encodeProduceRequest(
      {
        transactionalId: null,
        acks: -1,
        timeoutMs: 30_000,
        topicData: [
          { name: 'wal-churn', partitionData: [{ index: 0, records: makeBatch({ records: RECORDS }) }] },
        ],
      },
      9,
    ),
  ]);
}

function produceResponse(correlationId: number, baseOffset: bigint): Buffer {
  return frame([
    encodeResponseHeader({ correlationId }, 1),
    encodeProduceResponse(
      {
        responses: [
          {
            name: 'wal-churn',
            partitionResponses: [
              {
                index: 0,
                errorCode: 0,
                baseOffset,
                logAppendTimeMs: -1n,
                logStartOffset: 0n,
                recordErrors: [],
                errorMessage: null,
              },
            ],
          },
        ],
        throttleTimeMs: 0,
      },
      9,
    ),
  ]);
}

const CORRELATION_ID = 7;
const REQUEST = produceRequest(CORRELATION_ID);
const RESPONSE = produceResponse(CORRELATION_ID, 0x0102030405060708n);
/** Where the response template's base offset is, to give each answer its own. */
const BASE_OFFSET_AT = RESPONSE.indexOf(Buffer.from('0102030405060708', 'hex'));

/** The socket calls ConnectionPipe makes; the test emits `data` and `close` itself. */
class FakeSocket extends EventEmitter {
  readonly remoteAddress = '10.0.0.7';
  readonly writable = true;
  readonly writableLength = 0;
  pause(): void {}
  resume(): void {}
  cork(): void {}
  uncork(): void {}
  write(): boolean {
    return true;
  }
  end(): void {}
  destroy(): void {}
}

/** A store that accepts every object and keeps none: only what the filters keep is measured. */
const discardingStore = {
  url: 'memory://discard',
  put: async () => undefined,
} as unknown as ObjectStore;

function collectGarbage(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

describe('ProduceWalFilter and ProducerWaits under connection churn', () => {
  it('100,000 short-lived producer connections, one in ten closed mid-request, leave the heap where it was', async () => {
    const gc = collectGarbage();
    const log = createLogger('silent');
    const producerWaits = new ProducerWaits();
    const sealing = new SealingPolicy({
      economics: {
        breakEvenObjectBytes: 10_000,
        savingUsd: (bytes) => bytes - 10_000,
        savingPerByte: (bytes) => (bytes - 10_000) / bytes,
        stockUsdPerByte: 1,
      },
    });
    // The group's objects pay: mode=auto batches go to the WAL, and ProducerWaits follows them.
    sealing.mode = () => 'wal';
    const writer = new WalWriter({
      store: discardingStore,
      brokerId: 1,
      policy: sealing,
      producerWaits,
      confirmTimeoutMs: CONFIRM_TIMEOUT_MS,
    });
    const filter = new ProduceWalFilter({
      writer,
      policy: new TopicPolicy(
        {
          wal: false,
          latencyBudgetMs: 100,
          lingerMs: undefined,
          targetBytes: 400_000,
          durableAck: false,
          mode: 'auto',
          maxHoldMs: 200,
        },
        [{ pattern: 'wal-*', settings: { wal: true } }],
      ),
      topicNames: { nameOf: () => undefined, isUnknown: () => false } as unknown as TopicNames,
      publisher: undefined,
      sealing,
      producerWaits,
      log,
    });
    const counters = newListenerCounters();
    const options = {
      maxFrameBytes: 1 << 20,
      maxBufferedBytes: 1 << 20,
      chain: new FilterChain([filter]),
      counters,
      log,
    };

    let offset = 0n;
    const connect = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const downstream = new FakeSocket();
        const upstream = new FakeSocket();
        new ConnectionPipe(downstream as unknown as net.Socket, upstream as unknown as net.Socket, options);
        // A frame of its own, as a socket read gives it (the filter's batches are views of it).
        const request = Buffer.from(REQUEST);
        downstream.emit('data', request);
        // Nine in ten are answered (the broker appended the batch) before the producer leaves;
        // the tenth leaves with its acks=all request unanswered.
        if (i % 10 !== 0) {
          const response = Buffer.from(RESPONSE);
          response.writeBigInt64BE(offset++, BASE_OFFSET_AT);
          upstream.emit('data', response);
        }
        downstream.emit('close');
        // Timers run meanwhile: objects seal (or are abandoned), unconfirmed batches expire.
        if (i % PER_TICK === PER_TICK - 1) await sleep(1);
      }
      // Past every linger and the writer's confirm timeout: the batches no broker confirmed are
      // dropped from the WAL, as they would be in production.
      await sleep(CONFIRM_TIMEOUT_MS + 500);
    };
    const settled = () => {
      for (let i = 0; i < 3; i++) gc();
      return process.memoryUsage();
    };

    await connect(WARM_UP);
    const before = settled();
    await connect(CONNECTIONS);
    const after = settled();

    // The connections went through the WAL (the test measures the path it means to)
    expect(filter.stats.batchesCopied).toBe(WARM_UP + CONNECTIONS);
    expect(writer.stats.batchesUnconfirmed).toBe((WARM_UP + CONNECTIONS) / 10);
    // Neither the heap nor the Buffers' memory kept what the connections left behind
    const grew = {
      heapMiB: (after.heapUsed - before.heapUsed) / MiB,
      arrayBuffersMiB: (after.arrayBuffers - before.arrayBuffers) / MiB,
    };
    expect(grew.heapMiB, JSON.stringify(grew)).toBeLessThan(5);
    expect(grew.arrayBuffersMiB, JSON.stringify(grew)).toBeLessThan(5);
    // Nothing of a closed connection is followed any more
    expect(producerWaits.stats.connections).toBe(0);
    await writer.close();
  });
});
