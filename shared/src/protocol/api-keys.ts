// Every API key of Apache Kafka 4.1 (clients/src/main/resources/common/message/*Request.json at
// tag 4.1.0), so that the header of any request or response can be parsed, including APIs walproxy
// never decodes. Keys 4-7 (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) were
// removed by KIP-896 in 4.0 and keep their 3.9 flexible versions.

type Row = readonly [
  apiKey: number,
  name: string,
  firstFlexibleVersion: number | null,
  decodes?: readonly [number, number],
];

/**
 * [API key, name, first flexible version (KIP-482) or null, versions walproxy decodes]. Flexible
 * versions use request header v2 and response header v1; a key with no decoded range is only ever
 * forwarded as opaque bytes.
 */
const TABLE = [
  [0, 'Produce', 9, [3, 13]],
  [1, 'Fetch', 12, [4, 18]],
  [2, 'ListOffsets', 6],
  [3, 'Metadata', 9, [0, 13]],
  [4, 'LeaderAndIsr', 4],
  [5, 'StopReplica', 2],
  [6, 'UpdateMetadata', 6],
  [7, 'ControlledShutdown', 3],
  [8, 'OffsetCommit', 8],
  [9, 'OffsetFetch', 6],
  [10, 'FindCoordinator', 3, [0, 6]],
  [11, 'JoinGroup', 6],
  [12, 'Heartbeat', 4],
  [13, 'LeaveGroup', 4],
  [14, 'SyncGroup', 4],
  [15, 'DescribeGroups', 5],
  [16, 'ListGroups', 3],
  [17, 'SaslHandshake', null],
  [18, 'ApiVersions', 3, [0, 5]],
  [19, 'CreateTopics', 5],
  [20, 'DeleteTopics', 4],
  [21, 'DeleteRecords', 2],
  [22, 'InitProducerId', 2],
  [23, 'OffsetForLeaderEpoch', 4],
  [24, 'AddPartitionsToTxn', 3],
  [25, 'AddOffsetsToTxn', 3],
  [26, 'EndTxn', 3],
  [27, 'WriteTxnMarkers', 1],
  [28, 'TxnOffsetCommit', 3],
  [29, 'DescribeAcls', 2],
  [30, 'CreateAcls', 2],
  [31, 'DeleteAcls', 2],
  [32, 'DescribeConfigs', 4],
  [33, 'AlterConfigs', 2],
  [34, 'AlterReplicaLogDirs', 2],
  [35, 'DescribeLogDirs', 2],
  [36, 'SaslAuthenticate', 2],
  [37, 'CreatePartitions', 2],
  [38, 'CreateDelegationToken', 2],
  [39, 'RenewDelegationToken', 2],
  [40, 'ExpireDelegationToken', 2],
  [41, 'DescribeDelegationToken', 2],
  [42, 'DeleteGroups', 2],
  [43, 'ElectLeaders', 2],
  [44, 'IncrementalAlterConfigs', 1],
  [45, 'AlterPartitionReassignments', 0],
  [46, 'ListPartitionReassignments', 0],
  [47, 'OffsetDelete', null],
  [48, 'DescribeClientQuotas', 1],
  [49, 'AlterClientQuotas', 1],
  [50, 'DescribeUserScramCredentials', 0],
  [51, 'AlterUserScramCredentials', 0],
  [52, 'Vote', 0],
  [53, 'BeginQuorumEpoch', 1],
  [54, 'EndQuorumEpoch', 1],
  [55, 'DescribeQuorum', 0],
  [56, 'AlterPartition', 0],
  [57, 'UpdateFeatures', 0],
  [58, 'Envelope', 0],
  [59, 'FetchSnapshot', 0],
  [60, 'DescribeCluster', 0, [0, 2]],
  [61, 'DescribeProducers', 0],
  [62, 'BrokerRegistration', 0],
  [63, 'BrokerHeartbeat', 0, [0, 2]],
  [64, 'UnregisterBroker', 0],
  [65, 'DescribeTransactions', 0],
  [66, 'ListTransactions', 0],
  [67, 'AllocateProducerIds', 0],
  [68, 'ConsumerGroupHeartbeat', 0],
  [69, 'ConsumerGroupDescribe', 0],
  [70, 'ControllerRegistration', 0],
  [71, 'GetTelemetrySubscriptions', 0],
  [72, 'PushTelemetry', 0],
  [73, 'AssignReplicasToDirs', 0],
  [74, 'ListConfigResources', 0],
  [75, 'DescribeTopicPartitions', 0],
  [76, 'ShareGroupHeartbeat', 0],
  [77, 'ShareGroupDescribe', 0],
  [78, 'ShareFetch', 0],
  [79, 'ShareAcknowledge', 0],
  [80, 'AddRaftVoter', 0],
  [81, 'RemoveRaftVoter', 0],
  [82, 'UpdateRaftVoter', 0],
  [83, 'InitializeShareGroupState', 0],
  [84, 'ReadShareGroupState', 0],
  [85, 'WriteShareGroupState', 0],
  [86, 'DeleteShareGroupState', 0],
  [87, 'ReadShareGroupStateSummary', 0],
  [88, 'StreamsGroupHeartbeat', 0],
  [89, 'StreamsGroupDescribe', 0],
  [90, 'DescribeShareGroupOffsets', 0],
  [91, 'AlterShareGroupOffsets', 0],
  [92, 'DeleteShareGroupOffsets', 0],
] as const satisfies readonly Row[];

type TableRow = (typeof TABLE)[number];
export type ApiName = TableRow[1];

export interface ApiKeyInfo {
  readonly apiKey: number;
  readonly name: ApiName;
  readonly firstFlexibleVersion: number | null;
  /** Inclusive version range whose bodies walproxy decodes; undefined for opaque keys. */
  readonly decodes: { readonly min: number; readonly max: number } | undefined;
}

const BY_KEY: readonly (ApiKeyInfo | undefined)[] = (() => {
  const out: (ApiKeyInfo | undefined)[] = [];
  for (const row of TABLE as readonly Row[]) {
    const [apiKey, name, firstFlexibleVersion, decodes] = row;
    out[apiKey] = Object.freeze({
      apiKey,
      name: name as ApiName,
      firstFlexibleVersion,
      decodes: decodes === undefined ? undefined : Object.freeze({ min: decodes[0], max: decodes[1] }),
    });
  }
  return out;
})();

const BY_NAME = new Map<string, ApiKeyInfo>();
for (const info of BY_KEY) if (info !== undefined) BY_NAME.set(info.name, info);

/** API keys by name, e.g. `ApiKey.Fetch === 1`. */
export const ApiKey = Object.freeze(Object.fromEntries(TABLE.map((r) => [r[1], r[0]]))) as {
  readonly [R in TableRow as R[1]]: R[0];
};

/** Every known API key, in key order. */
export const API_KEYS: readonly ApiKeyInfo[] = BY_KEY.filter((i): i is ApiKeyInfo => i !== undefined);

export function apiKeyInfo(apiKey: number): ApiKeyInfo | undefined {
  return BY_KEY[apiKey];
}

export function apiKeyByName(name: string): ApiKeyInfo | undefined {
  return BY_NAME.get(name);
}

/** Whether `version` of `apiKey` is flexible; undefined for unknown keys. */
export function isFlexibleVersion(apiKey: number, version: number): boolean | undefined {
  const info = BY_KEY[apiKey];
  if (info === undefined) return undefined;
  return info.firstFlexibleVersion !== null && version >= info.firstFlexibleVersion;
}

/** Whether walproxy has a codec for this version of this API's bodies. */
export function canDecode(apiKey: number, version: number): boolean {
  const d = BY_KEY[apiKey]?.decodes;
  return d !== undefined && version >= d.min && version <= d.max;
}

/**
 * Request header version: 2 for flexible versions, 1 otherwise (ApiVersions v0-2 → 1, v3+ → 2).
 * Header v0 (no ClientId) was only ever used by ControlledShutdown v0, which KIP-896 removed in
 * 4.0, so it is not modelled. Undefined for unknown keys.
 */
export function requestHeaderVersion(apiKey: number, apiVersion: number): 1 | 2 | undefined {
  const flexible = isFlexibleVersion(apiKey, apiVersion);
  return flexible === undefined ? undefined : flexible ? 2 : 1;
}

/**
 * Response header version: 1 for flexible versions, 0 otherwise, and always 0 for ApiVersions
 * (KIP-511: a client must read the header before it knows which version the broker answered).
 * Undefined for unknown keys.
 */
export function responseHeaderVersion(apiKey: number, apiVersion: number): 0 | 1 | undefined {
  if (apiKey === ApiKey.ApiVersions) return 0;
  const flexible = isFlexibleVersion(apiKey, apiVersion);
  return flexible === undefined ? undefined : flexible ? 1 : 0;
}
