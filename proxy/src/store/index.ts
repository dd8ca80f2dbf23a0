// Not s3-store.js or s3-data-path.js: they import the AWS SDK, which the sidecar's bundle loads
// only when a store is first used (deferred-s3-store.ts); proxy/src/index.ts exports them.
export { DeferredS3ObjectStore } from './deferred-s3-store.js';
export {
  isObjectStoreError,
  OBJECT_STORE_ERROR_CODES,
  ObjectStoreError,
  type ObjectStoreErrorCode,
  type ObjectStoreErrorOptions,
} from './errors.js';
export { FileObjectStore, type FileStoreOptions } from './file-store.js';
export {
  abortedError,
  assertValidKey,
  assertValidPrefix,
  type ByteRange,
  type ObjectInfo,
  type ObjectStore,
  type ObjectStoreCallOptions,
  throwIfAborted,
} from './object-store.js';
export { type ObjectStoreOptions, openObjectStore } from './open-object-store.js';
export { classifyS3Error, type S3ErrorContext } from './s3-errors.js';
export { isDirectoryBucket, S3_SERVER_SIDE_ENCRYPTIONS, type S3ServerSideEncryption } from './s3-names.js';
export type { S3StoreOptions } from './s3-store.js';
export {
  STORE_HEALTH_CHANNELS,
  STORE_HEALTH_DEFAULTS,
  StoreHealth,
  type StoreHealthChangeEvent,
  type StoreHealthOptions,
  type StoreHealthState,
  type StoreHealthStats,
} from './store-health.js';
