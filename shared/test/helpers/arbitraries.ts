// fast-check arbitraries of valid messages, per version: a field the version lacks is undefined, a
// field it has is always set (never left to a default), so decode(encode(m)) must equal m exactly.

import fc from 'fast-check';
import type {
  ApiVersionsRequest,
  ApiVersionsResponse,
  DescribeClusterRequest,
  DescribeClusterResponse,
  FetchRequest,
  FetchResponse,
  FindCoordinatorRequest,
  FindCoordinatorResponse,
  LeaderIdAndEpoch,
  MetadataRequest,
  MetadataResponse,
  NodeEndpoint,
  ProduceRequest,
  ProduceResponse,
  RawTaggedField,
} from '../../src/index.js';

type Arb<T> = fc.Arbitrary<T>;

export const int8 = fc.integer({ min: -0x80, max: 0x7f });
export const int16 = fc.integer({ min: -0x8000, max: 0x7fff });
export const int32 = fc.integer({ min: -0x80000000, max: 0x7fffffff });
export const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
export const uuid = fc
  .uint8Array({ minLength: 16, maxLength: 16 })
  .map((b) => Buffer.from(b).toString('hex'));
// Any code point but lone surrogates, which no UTF-8 encoder can write.
export const str = fc.string({ unit: 'binary', maxLength: 12 });
export const nullableStr = fc.option(str, { nil: null });
export const bytes = (maxLength = 48): Arb<Buffer> => fc.uint8Array({ maxLength }).map((b) => Buffer.from(b));
export const records: Arb<Buffer | null> = fc.option(bytes(80), { nil: null, freq: 8 });

const none = fc.constant(undefined);

/** `arb` when the version has the field, undefined otherwise. */
export function when<T>(present: boolean, arb: Arb<T>): Arb<T | undefined> {
  return present ? arb : none;
}

/** A tagged field that may be absent (undefined). */
function maybe<T>(present: boolean, arb: Arb<T>): Arb<T | undefined> {
  return present ? fc.option(arb, { nil: undefined }) : none;
}

/**
 * Raw tagged fields for a struct: undefined (no tags, as decoding gives) or 1-3 ascending tags,
 * avoiding the tags this version decodes into named fields.
 */
export function rawTags(flexible: boolean, known: readonly number[] = []): Arb<RawTaggedField[] | undefined> {
  if (!flexible) return none;
  const tag = fc.oneof(
    fc.integer({ min: 0, max: 8 }),
    fc.integer({ min: 9, max: 0x3fff }),
    fc.constant(10_000),
  );
  const field = fc.record({ tag: tag.filter((t) => !known.includes(t)), data: bytes(12) });
  const list = fc
    .uniqueArray(field, { minLength: 1, maxLength: 3, selector: (f) => f.tag })
    .map((fs) => fs.sort((a, b) => a.tag - b.tag));
  return fc.option(list, { nil: undefined, freq: 3 });
}

const leader: Arb<LeaderIdAndEpoch> = fc.record({
  leaderId: int32,
  leaderEpoch: int32,
  taggedFields: rawTags(true),
});

const nodeEndpoint: Arb<NodeEndpoint> = fc.record({
  nodeId: int32,
  host: str,
  port: int32,
  rack: nullableStr,
  taggedFields: rawTags(true),
});

// ---- Produce ----------------------------------------------------------------------------------

export function produceRequest(v: number): Arb<ProduceRequest> {
  const flex = v >= 9;
  const partition = fc.record({ index: int32, records, taggedFields: rawTags(flex) });
  const topic = fc.record({
    name: when(v <= 12, str),
    topicId: when(v >= 13, uuid),
    partitionData: fc.array(partition, { maxLength: 3 }),
    taggedFields: rawTags(flex),
  });
  return fc.record({
    transactionalId: nullableStr,
    acks: fc.constantFrom(-1, 0, 1),
    timeoutMs: int32,
    topicData: fc.array(topic, { maxLength: 3 }),
    taggedFields: rawTags(flex),
  });
}

export function produceResponse(v: number): Arb<ProduceResponse> {
  const flex = v >= 9;
  const recordError = fc.record({
    batchIndex: int32,
    batchIndexErrorMessage: nullableStr,
    taggedFields: rawTags(flex),
  });
  const partition = fc.record({
    index: int32,
    errorCode: int16,
    baseOffset: int64,
    logAppendTimeMs: int64,
    logStartOffset: when(v >= 5, int64),
    recordErrors: when(v >= 8, fc.array(recordError, { maxLength: 2 })),
    errorMessage: when(v >= 8, nullableStr),
    currentLeader: maybe(v >= 10, leader),
    taggedFields: rawTags(flex, v >= 10 ? [0] : []),
  });
  const topic = fc.record({
    name: when(v <= 12, str),
    topicId: when(v >= 13, uuid),
    partitionResponses: fc.array(partition, { maxLength: 3 }),
    taggedFields: rawTags(flex),
  });
  return fc.record({
    responses: fc.array(topic, { maxLength: 3 }),
    throttleTimeMs: int32,
    nodeEndpoints: maybe(v >= 10, fc.array(nodeEndpoint, { maxLength: 2 })),
    taggedFields: rawTags(flex, v >= 10 ? [0] : []),
  });
}

// ---- Fetch ------------------------------------------------------------------------------------

export function fetchRequest(v: number): Arb<FetchRequest> {
  const flex = v >= 12;
  const partition = fc.record({
    partition: int32,
    currentLeaderEpoch: when(v >= 9, int32),
    fetchOffset: int64,
    lastFetchedEpoch: when(v >= 12, int32),
    logStartOffset: when(v >= 5, int64),
    partitionMaxBytes: int32,
    replicaDirectoryId: maybe(v >= 17, uuid),
    highWatermark: maybe(v >= 18, int64),
    taggedFields: rawTags(flex, v >= 18 ? [0, 1] : v >= 17 ? [0] : []),
  });
  const topic = fc.record({
    topic: when(v <= 12, str),
    topicId: when(v >= 13, uuid),
    partitions: fc.array(partition, { maxLength: 3 }),
    taggedFields: rawTags(flex),
  });
  const forgotten = fc.record({
    topic: when(v <= 12, str),
    topicId: when(v >= 13, uuid),
    partitions: fc.array(int32, { maxLength: 3 }),
    taggedFields: rawTags(flex),
  });
  return fc.record({
    replicaId: when(v <= 14, int32),
    maxWaitMs: int32,
    minBytes: int32,
    maxBytes: int32,
    isolationLevel: int8,
    sessionId: when(v >= 7, int32),
    sessionEpoch: when(v >= 7, int32),
    topics: fc.array(topic, { maxLength: 3 }),
    forgottenTopicsData: when(v >= 7, fc.array(forgotten, { maxLength: 2 })),
    rackId: when(v >= 11, str),
    clusterId: maybe(v >= 12, nullableStr),
    replicaState: maybe(
      v >= 15,
      fc.record({ replicaId: int32, replicaEpoch: int64, taggedFields: rawTags(true) }),
    ),
    taggedFields: rawTags(flex, v >= 15 ? [0, 1] : v >= 12 ? [0] : []),
  });
}

export function fetchResponse(v: number): Arb<FetchResponse> {
  const flex = v >= 12;
  const aborted = fc.record({ producerId: int64, firstOffset: int64, taggedFields: rawTags(flex) });
  const partition = fc.record({
    partitionIndex: int32,
    errorCode: int16,
    highWatermark: int64,
    lastStableOffset: int64,
    logStartOffset: when(v >= 5, int64),
    abortedTransactions: fc.option(fc.array(aborted, { maxLength: 2 }), { nil: null }),
    preferredReadReplica: when(v >= 11, int32),
    records,
    divergingEpoch: maybe(flex, fc.record({ epoch: int32, endOffset: int64, taggedFields: rawTags(true) })),
    currentLeader: maybe(flex, leader),
    snapshotId: maybe(flex, fc.record({ endOffset: int64, epoch: int32, taggedFields: rawTags(true) })),
    taggedFields: rawTags(flex, [0, 1, 2]),
  });
  const topic = fc.record({
    topic: when(v <= 12, str),
    topicId: when(v >= 13, uuid),
    partitions: fc.array(partition, { maxLength: 3 }),
    taggedFields: rawTags(flex),
  });
  return fc.record({
    throttleTimeMs: int32,
    errorCode: when(v >= 7, int16),
    sessionId: when(v >= 7, int32),
    responses: fc.array(topic, { maxLength: 3 }),
    nodeEndpoints: maybe(v >= 16, fc.array(nodeEndpoint, { maxLength: 2 })),
    taggedFields: rawTags(flex, v >= 16 ? [0] : []),
  });
}

// ---- Metadata ---------------------------------------------------------------------------------

export function metadataRequest(v: number): Arb<MetadataRequest> {
  const flex = v >= 9;
  const topic = fc.record({
    topicId: when(v >= 10, uuid),
    name: v >= 10 ? nullableStr : str,
    taggedFields: rawTags(flex),
  });
  const topics = fc.array(topic, { maxLength: 3 });
  return fc.record({
    topics: v >= 1 ? fc.option(topics, { nil: null }) : topics,
    allowAutoTopicCreation: when(v >= 4, fc.boolean()),
    includeClusterAuthorizedOperations: when(v >= 8 && v <= 10, fc.boolean()),
    includeTopicAuthorizedOperations: when(v >= 8, fc.boolean()),
    taggedFields: rawTags(flex),
  });
}

export function metadataResponse(v: number): Arb<MetadataResponse> {
  const flex = v >= 9;
  const nodes = fc.array(int32, { maxLength: 3 });
  const partition = fc.record({
    errorCode: int16,
    partitionIndex: int32,
    leaderId: int32,
    leaderEpoch: when(v >= 7, int32),
    replicaNodes: nodes,
    isrNodes: nodes,
    offlineReplicas: when(v >= 5, nodes),
    taggedFields: rawTags(flex),
  });
  const topic = fc.record({
    errorCode: int16,
    name: v >= 12 ? nullableStr : str,
    topicId: when(v >= 10, uuid),
    isInternal: when(v >= 1, fc.boolean()),
    partitions: fc.array(partition, { maxLength: 3 }),
    topicAuthorizedOperations: when(v >= 8, int32),
    taggedFields: rawTags(flex),
  });
  const broker = fc.record({
    nodeId: int32,
    host: str,
    port: int32,
    rack: when(v >= 1, nullableStr),
    taggedFields: rawTags(flex),
  });
  return fc.record({
    throttleTimeMs: when(v >= 3, int32),
    brokers: fc.array(broker, { maxLength: 3 }),
    clusterId: when(v >= 2, nullableStr),
    controllerId: when(v >= 1, int32),
    topics: fc.array(topic, { maxLength: 3 }),
    clusterAuthorizedOperations: when(v >= 8 && v <= 10, int32),
    errorCode: when(v >= 13, int16),
    taggedFields: rawTags(flex),
  });
}

// ---- ApiVersions ------------------------------------------------------------------------------

export function apiVersionsRequest(v: number): Arb<ApiVersionsRequest> {
  if (v < 3) return fc.constant({});
  if (v < 5)
    return fc.record({ clientSoftwareName: str, clientSoftwareVersion: str, taggedFields: rawTags(true) });
  return fc.record({
    clientSoftwareName: str,
    clientSoftwareVersion: str,
    clusterId: fc.option(str, { nil: null }),
    nodeId: int32,
    taggedFields: rawTags(true),
  });
}

export function apiVersionsResponse(v: number): Arb<ApiVersionsResponse> {
  const flex = v >= 3;
  const range = fc.record({
    apiKey: int16,
    minVersion: int16,
    maxVersion: int16,
    taggedFields: rawTags(flex),
  });
  const supported = fc.record({
    name: str,
    minVersion: int16,
    maxVersion: int16,
    taggedFields: rawTags(true),
  });
  const finalized = fc.record({
    name: str,
    maxVersionLevel: int16,
    minVersionLevel: int16,
    taggedFields: rawTags(true),
  });
  return fc.record({
    errorCode: int16,
    apiKeys: fc.array(range, { maxLength: 4 }),
    throttleTimeMs: when(v >= 1, int32),
    supportedFeatures: maybe(flex, fc.array(supported, { maxLength: 2 })),
    finalizedFeaturesEpoch: maybe(flex, int64),
    finalizedFeatures: maybe(flex, fc.array(finalized, { maxLength: 2 })),
    zkMigrationReady: maybe(flex, fc.boolean()),
    taggedFields: rawTags(flex, [0, 1, 2, 3]),
  });
}

// ---- FindCoordinator --------------------------------------------------------------------------

export function findCoordinatorRequest(v: number): Arb<FindCoordinatorRequest> {
  return fc.record({
    key: when(v <= 3, str),
    keyType: when(v >= 1, int8),
    coordinatorKeys: when(v >= 4, fc.array(str, { maxLength: 3 })),
    taggedFields: rawTags(v >= 3),
  });
}

export function findCoordinatorResponse(v: number): Arb<FindCoordinatorResponse> {
  const flex = v >= 3;
  const coordinator = fc.record({
    key: str,
    nodeId: int32,
    host: str,
    port: int32,
    errorCode: int16,
    errorMessage: nullableStr,
    taggedFields: rawTags(flex),
  });
  return fc.record({
    throttleTimeMs: when(v >= 1, int32),
    errorCode: when(v <= 3, int16),
    errorMessage: when(v >= 1 && v <= 3, nullableStr),
    nodeId: when(v <= 3, int32),
    host: when(v <= 3, str),
    port: when(v <= 3, int32),
    coordinators: when(v >= 4, fc.array(coordinator, { maxLength: 3 })),
    taggedFields: rawTags(flex),
  });
}

// ---- DescribeCluster --------------------------------------------------------------------------

export function describeClusterRequest(v: number): Arb<DescribeClusterRequest> {
  return fc.record({
    includeClusterAuthorizedOperations: fc.boolean(),
    endpointType: when(v >= 1, int8),
    includeFencedBrokers: when(v >= 2, fc.boolean()),
    taggedFields: rawTags(true),
  });
}

export function describeClusterResponse(v: number): Arb<DescribeClusterResponse> {
  const broker = fc.record({
    brokerId: int32,
    host: str,
    port: int32,
    rack: nullableStr,
    isFenced: when(v >= 2, fc.boolean()),
    taggedFields: rawTags(true),
  });
  return fc.record({
    throttleTimeMs: int32,
    errorCode: int16,
    errorMessage: nullableStr,
    endpointType: when(v >= 1, int8),
    clusterId: str,
    controllerId: int32,
    brokers: fc.array(broker, { maxLength: 3 }),
    clusterAuthorizedOperations: int32,
    taggedFields: rawTags(true),
  });
}
