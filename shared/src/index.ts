// @walproxy/shared: the wire layer. No sockets, no timers, no AWS.

export * from './messages/api-versions.js';
export * from './messages/broker-heartbeat.js';
export type { LeaderIdAndEpoch, NodeEndpoint, Tagged } from './messages/common.js';
export * from './messages/describe-cluster.js';
export * from './messages/fetch.js';
export * from './messages/find-coordinator.js';
export * from './messages/metadata.js';
export * from './messages/produce.js';
export * from './protocol/api-keys.js';
export * from './protocol/error-codes.js';
export * from './protocol/errors.js';
export * from './protocol/frame.js';
export * from './protocol/headers.js';
export * from './protocol/reader.js';
export * from './protocol/writer.js';
export * from './records/crc32c.js';
export * from './records/record-batch.js';
export * from './replication/prefetch-hints.js';
export * from './replication/wal-references.js';
export * from './replication/wal-trace.js';
export * from './wal/index.js';
export * from './zone/produce-references.js';
