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
export { encodeKey, resolveS3Signing, type S3Signing } from './s3-data-path.js';
export { classifyS3Error, type S3ErrorContext } from './s3-errors.js';
export { isDirectoryBucket, S3ObjectStore, type S3StoreOptions } from './s3-store.js';
export {
  STORE_HEALTH_CHANNELS,
  STORE_HEALTH_DEFAULTS,
  StoreHealth,
  type StoreHealthChangeEvent,
  type StoreHealthOptions,
  type StoreHealthState,
  type StoreHealthStats,
} from './store-health.js';
