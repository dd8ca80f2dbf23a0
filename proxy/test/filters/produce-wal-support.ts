// Requests, responses and a ProduceWalFilter on an in-memory store, for the leader side's
// Produce tests (produce-wal.test.ts, produce-wal-store-ahead.test.ts).
import {
  ApiKey,
  encodeProduceRequest,
  encodeProduceResponse,
  encodeRequestHeader,
  encodeResponseHeader,
} from '@walproxy/shared';
import { ProduceWalFilter } from '../../src/filters/produce-wal.js';
import { createLogger } from '../../src/log.js';
import type { TopicNames } from '../../src/metadata/topic-names.js';
import type { WalMetadataPublisher, WalPiece } from '../../src/metadata/wal-metadata-publisher.js';
import type { RequestInfo } from '../../src/net/frame-filter.js';
import type { StoreHealth } from '../../src/store/store-health.js';
import { type TopicMode, TopicPolicy } from '../../src/topics/topic-policy.js';
import { type ProducerWaits, WalWriter } from '../../src/wal/index.js';
import { type ReplicationMode, SealingPolicy } from '../../src/wal/sealing-policy.js';
import { MemoryObjectStore } from '../wal/memory-store.js';

export const TOPIC_ID = '0123456789abcdef0123456789abcdef';

export function frame(parts: Buffer[]): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(
    parts.reduce((n, p) => n + p.length, 0),
    0,
  );
  return Buffer.concat([size, ...parts]);
}

export function produceRequest(
  version: number,
  acks: number,
  topic: { name?: string; topicId?: string },
  batch: Buffer,
): Buffer {
  return produceRequestOf(version, acks, topic, [{ index: 0, records: batch }]);
}

export function produceRequestOf(
  version: number,
  acks: number,
  topic: { name?: string; topicId?: string },
  partitionData: Array<{ index: number; records: Buffer }>,
): Buffer {
  return frame([
    encodeRequestHeader({ apiKey: ApiKey.Produce, apiVersion: version, correlationId: 5, clientId: 'test' }),
    encodeProduceRequest(
      { transactionalId: null, acks, timeoutMs: 30_000, topicData: [{ ...topic, partitionData }] },
      version,
    ),
  ]);
}

export function produceResponse(
  version: number,
  topic: { name?: string; topicId?: string },
  baseOffset: bigint,
): Buffer {
  return produceResponseOf(version, topic, [{ index: 0, errorCode: 0, baseOffset }]);
}

export function produceResponseOf(
  version: number,
  topic: { name?: string; topicId?: string },
  partitions: Array<{ index: number; errorCode: number; baseOffset: bigint }>,
): Buffer {
  return frame([
    encodeResponseHeader({ correlationId: 5 }, version >= 9 ? 1 : 0),
    encodeProduceResponse(
      {
        responses: [
          {
            ...topic,
            partitionResponses: partitions.map((p) => ({
              ...p,
              baseOffset: p.errorCode === 0 ? p.baseOffset : -1n,
              logAppendTimeMs: -1n,
              logStartOffset: 0n,
              recordErrors: [],
              errorMessage: null,
            })),
          },
        ],
        throttleTimeMs: 0,
      },
      version,
    ),
  ]);
}

export function setup(
  options: {
    names?: Map<string, string>;
    resolveLater?: Promise<void>;
    durableAck?: boolean;
    health?: StoreHealth;
    sealing?: SealingPolicy;
    mode?: TopicMode;
    producerWaits?: ProducerWaits;
  } = {},
) {
  const store = new MemoryObjectStore();
  const writer = new WalWriter({
    store,
    brokerId: 1,
    lingerMs: 5,
    ...(options.sealing ? { policy: options.sealing } : {}),
  });
  const names = options.names ?? new Map<string, string>();
  const topicNames = {
    nameOf: (id: string) => names.get(id),
    isUnknown: () => false,
    resolve: async (id: string) => {
      await options.resolveLater;
      return names.get(id);
    },
  } as unknown as TopicNames;
  const published: WalPiece[] = [];
  const publisher = { publish: (p: WalPiece) => published.push(p) } as unknown as WalMetadataPublisher;
  const policy = new TopicPolicy(
    {
      wal: false,
      latencyBudgetMs: 50,
      lingerMs: 5,
      targetBytes: 400_000,
      durableAck: options.durableAck ?? true,
      mode: options.mode ?? 'wal',
      maxHoldMs: 200,
    },
    [{ pattern: 'wal-*', settings: { wal: true } }],
  );
  const filter = new ProduceWalFilter({
    writer,
    policy,
    topicNames,
    publisher,
    ...(options.health ? { health: options.health } : {}),
    ...(options.sealing ? { sealing: options.sealing } : {}),
    ...(options.producerWaits ? { producerWaits: options.producerWaits } : {}),
    log: createLogger('silent'),
  });
  return { store, writer, filter, published, names };
}

/** A sealing policy whose groups are in `mode`, recording what it was shown. */
export function sealingIn(mode: ReplicationMode) {
  const observed: Array<{ budgetMs: number; bytes: number }> = [];
  // Objects under 10,000 bytes cost more than they save.
  const policy = new SealingPolicy({
    economics: {
      breakEvenObjectBytes: 10_000,
      savingUsd: (bytes) => bytes - 10_000,
      savingPerByte: (bytes) => (bytes - 10_000) / bytes,
      stockUsdPerByte: 1,
    },
  });
  const realObserve = policy.observe.bind(policy);
  policy.observe = (budgetMs, bytes, nowMs) => {
    observed.push({ budgetMs, bytes });
    realObserve(budgetMs, bytes, nowMs);
  };
  policy.mode = () => mode;
  return { policy, observed };
}

export const info = (version: number): RequestInfo => ({
  apiKey: ApiKey.Produce,
  apiVersion: version,
  correlationId: 5,
});
