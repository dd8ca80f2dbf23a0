import { ObjectStoreError } from './errors.js';

/** What the SDK error was about, to name it in the message and to read an ambiguous 404. */
export interface S3ErrorContext {
  operation:
    | 'HeadBucket'
    | 'PutObject'
    | 'GetObject'
    | 'HeadObject'
    | 'ListObjectsV2'
    | 'DeleteObjects'
    | 'CreateSession';
  bucket: string;
  /** The store's prefix inside the bucket (`''` or ending in `/`). */
  keyPrefix: string;
  /** The key as the store's caller named it, without the prefix. */
  key?: string | undefined;
  /** Where requests went, for "cannot reach" messages: the custom endpoint or the AWS region. */
  target: string;
}

/** Service error names that mean the credentials or their permissions are the problem. */
const ACCESS_DENIED_NAMES = new Set([
  'AccessDenied',
  'Forbidden',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
  'AllAccessDisabled',
  'AccountProblem',
  'CredentialsProviderError',
]);

/** Socket-level failures: nothing answered, or the connection broke. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

/** Transient by S3's own documentation: retry with backoff. */
const RETRIABLE_NAMES = new Set([
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'RequestTimeout',
  'RequestTimeTooSkewed',
  'ConditionalRequestConflict',
  'OperationAborted',
]);

interface SdkErrorShape {
  name?: string;
  message?: string;
  code?: string;
  errors?: unknown[];
  $fault?: 'client' | 'server';
  $retryable?: unknown;
  $metadata?: { httpStatusCode?: number };
}

/**
 * Maps whatever @aws-sdk/client-s3 threw, or what the lean data path (s3-data-path.ts) read from
 * an error answer in the same shape, to the store's typed error, with a message that says why.
 */
export function classifyS3Error(err: unknown, context: S3ErrorContext): ObjectStoreError {
  if (err instanceof ObjectStoreError) return err;
  const e = (typeof err === 'object' && err !== null ? err : {}) as SdkErrorShape;
  const name = e.name ?? 'Error';
  const status = e.$metadata?.httpStatusCode;
  const key = context.key;
  const what = `${context.operation} s3://${context.bucket}/${context.keyPrefix}${key ?? ''}`;
  const detail = `${name}${status === undefined ? '' : ` (HTTP ${status})`}: ${e.message ?? String(err)}`;
  const options = { key, cause: err };

  if (/region is missing/i.test(e.message ?? '')) {
    return new ObjectStoreError(
      'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
      `${what}: no AWS region configured; pass a region option or set AWS_REGION`,
      options,
    );
  }
  const networkCode = socketErrorCode(e);
  if (networkCode !== undefined || name === 'TimeoutError') {
    return new ObjectStoreError(
      'WALPROXY_ERR_STORE_UNREACHABLE',
      `${what}: cannot reach ${context.target} (${networkCode ?? name}: ${e.message ?? ''})`,
      options,
    );
  }
  if (name === 'NoSuchBucket' || (context.operation === 'HeadBucket' && status === 404)) {
    return new ObjectStoreError(
      'WALPROXY_ERR_STORE_NO_SUCH_BUCKET',
      `bucket "${context.bucket}" does not exist at ${context.target} (${what}: ${detail})`,
      options,
    );
  }
  if (name === 'NoSuchKey' || name === 'NotFound' || status === 404) {
    return new ObjectStoreError('WALPROXY_ERR_STORE_NOT_FOUND', `${what}: no such key (${detail})`, options);
  }
  if (name === 'PreconditionFailed' || status === 412) {
    return new ObjectStoreError(
      'WALPROXY_ERR_STORE_ALREADY_EXISTS',
      `${what}: the key already exists (${detail})`,
      options,
    );
  }
  if (ACCESS_DENIED_NAMES.has(name) || status === 403) {
    return new ObjectStoreError(
      'WALPROXY_ERR_STORE_ACCESS_DENIED',
      `${what}: access denied, check the credentials and their permissions on bucket "${context.bucket}" (${detail})`,
      options,
    );
  }
  if (name === 'InvalidRange' || status === 416) {
    return new ObjectStoreError(
      'WALPROXY_ERR_STORE_INVALID_RANGE',
      `${what}: range outside the object (${detail})`,
      options,
    );
  }
  if (name === 'NotImplemented' || status === 501) {
    return new ObjectStoreError(
      'WALPROXY_ERR_STORE_OTHER',
      `${what}: the store does not implement this request; if it rejects If-None-Match, open it with conditionalPut: false (${detail})`,
      options,
    );
  }
  const retriable =
    RETRIABLE_NAMES.has(name) ||
    e.$fault === 'server' ||
    Boolean(e.$retryable) ||
    (status !== undefined && (status >= 500 || status === 429));
  return new ObjectStoreError('WALPROXY_ERR_STORE_OTHER', `${what}: ${detail}`, { ...options, retriable });
}

/** Node puts the errno code on the error; happy-eyeballs connects wrap several in an AggregateError. */
function socketErrorCode(e: SdkErrorShape): string | undefined {
  if (e.code !== undefined && UNREACHABLE_CODES.has(e.code)) return e.code;
  for (const inner of e.errors ?? []) {
    const code = (inner as SdkErrorShape | undefined)?.code;
    if (code !== undefined && UNREACHABLE_CODES.has(code)) return code;
  }
  return undefined;
}
