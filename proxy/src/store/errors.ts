/**
 * One error type for every object store backend, so the WAL uploader and the startup check decide
 * what to do (retry, fail the produce, exit with a clear message) without knowing whether the bytes
 * live on S3 or on a shared filesystem.
 */

/**
 * Stable codes (the project-wide `WALPROXY_ERR_` prefix, as in the wire layer) and whether an
 * operation that failed with them may succeed when tried again.
 */
export const OBJECT_STORE_ERROR_CODES = {
  /** The key does not exist. */
  WALPROXY_ERR_STORE_NOT_FOUND: { retriable: false },
  /** A put found the key already there: keys are never overwritten. */
  WALPROXY_ERR_STORE_ALREADY_EXISTS: { retriable: false },
  /** Bad, expired or missing credentials, or a policy that forbids the operation. */
  WALPROXY_ERR_STORE_ACCESS_DENIED: { retriable: false },
  /** The bucket (s3://) or the root directory (file://) does not exist. */
  WALPROXY_ERR_STORE_NO_SUCH_BUCKET: { retriable: false },
  /** No connection could be made or it broke: the store may come back. */
  WALPROXY_ERR_STORE_UNREACHABLE: { retriable: true },
  /** A range read asked for bytes the object does not have. */
  WALPROXY_ERR_STORE_INVALID_RANGE: { retriable: false },
  /** A store URL, option, key or prefix this store refuses before any I/O. */
  WALPROXY_ERR_STORE_INVALID_ARGUMENT: { retriable: false },
  /**
   * The caller's AbortSignal fired (its deadline passed, or it gave up) or the store was closed
   * while the call was in flight: the outcome of a put is then unknown. Not retriable as such;
   * the `cause` is the signal's reason (a `TimeoutError` DOMException for `AbortSignal.timeout`).
   */
  WALPROXY_ERR_STORE_ABORTED: { retriable: false },
  /** Anything else; retriable when the store said so (5xx, throttling, a full disk). */
  WALPROXY_ERR_STORE_OTHER: { retriable: false },
} as const satisfies Record<string, { retriable: boolean }>;

export type ObjectStoreErrorCode = keyof typeof OBJECT_STORE_ERROR_CODES;

export interface ObjectStoreErrorOptions {
  /** Overrides the code's default, for WALPROXY_ERR_STORE_OTHER errors the store marked as transient. */
  retriable?: boolean;
  key?: string;
  cause?: unknown;
}

export class ObjectStoreError extends Error {
  override readonly name = 'ObjectStoreError';
  readonly code: ObjectStoreErrorCode;
  readonly retriable: boolean;
  /** The object key the failed operation was about, when there was one. */
  readonly key: string | undefined;

  constructor(code: ObjectStoreErrorCode, message: string, options: ObjectStoreErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retriable = options.retriable ?? OBJECT_STORE_ERROR_CODES[code].retriable;
    this.key = options.key;
  }
}

export function isObjectStoreError(err: unknown, code?: ObjectStoreErrorCode): err is ObjectStoreError {
  return err instanceof ObjectStoreError && (code === undefined || err.code === code);
}
