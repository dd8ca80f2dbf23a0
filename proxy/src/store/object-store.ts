import { ObjectStoreError } from './errors.js';

/** A byte range of one object: `length` bytes starting at `offset`. */
export interface ByteRange {
  offset: number;
  length: number;
}

export interface ObjectInfo {
  /** Relative to the store's root (the `s3://bucket/prefix/` or `file:///dir/` of its URL). */
  key: string;
  size: number;
  lastModified: Date;
}

/**
 * Per-call options of the data-path operations. `signal` bounds the call as a whole, retries and
 * backoff included: when it fires the call rejects at once with WALPROXY_ERR_STORE_ABORTED and its
 * connection is dropped. A deadline is `AbortSignal.timeout(ms)`.
 */
export interface ObjectStoreCallOptions {
  signal?: AbortSignal | undefined;
}

/**
 * Where WAL objects live. Keys are relative to the store's URL, `/`-separated, and written once:
 * a put never replaces an existing object, so a reader that saw an object always sees the same
 * bytes (the WAL's references point at byte ranges, which must never move).
 */
export interface ObjectStore {
  /** The URL the store was opened with, for logs and error messages. */
  readonly url: string;
  /**
   * Stores `body` (the buffers in order) under `key`, all or nothing: no reader ever sees a partial
   * object. Fails with WALPROXY_ERR_STORE_ALREADY_EXISTS when the key is taken. A put that was
   * aborted may or may not have stored the object.
   */
  put(key: string, body: Buffer | readonly Buffer[], options?: ObjectStoreCallOptions): Promise<void>;
  /**
   * The whole object, or exactly `range.length` bytes at `range.offset`; a range that runs past the
   * end fails with WALPROXY_ERR_STORE_INVALID_RANGE rather than returning fewer bytes. WALPROXY_ERR_STORE_NOT_FOUND if absent.
   */
  get(key: string, range?: ByteRange, options?: ObjectStoreCallOptions): Promise<Buffer>;
  /** The object's size, or undefined when there is no such key. */
  head(key: string, options?: ObjectStoreCallOptions): Promise<{ size: number } | undefined>;
  /** Every object whose key starts with `prefix`, in no particular order (S3 Express lists unordered). */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** Deletes the keys; keys that do not exist are not an error (as in S3). */
  delete(keys: readonly string[]): Promise<void>;
  /**
   * Startup check: one call that fails with a single clear ObjectStoreError when the location does
   * not exist, cannot be reached, or refuses these credentials a write.
   */
  validate(): Promise<void>;
  /**
   * Aborts every call in flight (they reject with WALPROXY_ERR_STORE_ABORTED) and releases
   * connections; the store is unusable afterwards.
   */
  close(): Promise<void>;
}

/** S3 caps keys at 1,024 bytes of UTF-8; the same cap keeps keys portable between backends. */
const MAX_KEY_BYTES = 1024;

/**
 * Keys must mean the same object on every backend, so forms that a filesystem would resolve
 * differently from S3 (`a//b`, `./a`, `../a`, `/a`, `a/`) are refused everywhere.
 */
export function assertValidKey(key: string): void {
  if (key.length === 0) throw invalidKey(key, 'is empty');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw invalidKey(key, `is longer than ${MAX_KEY_BYTES} bytes`);
  if (key.includes('\0')) throw invalidKey(key, 'contains a NUL character');
  if (key.includes('\\')) throw invalidKey(key, 'contains a backslash');
  for (const segment of key.split('/')) {
    if (segment === '') throw invalidKey(key, 'has an empty path segment (leading, trailing or double "/")');
    if (segment === '.' || segment === '..') throw invalidKey(key, `has a "${segment}" path segment`);
  }
}

/** A list prefix is a key's beginning: it may end inside a segment or with `/`, and may be empty. */
export function assertValidPrefix(prefix: string): void {
  if (prefix === '') return;
  const complete = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  try {
    assertValidKey(complete);
  } catch (err) {
    throw new ObjectStoreError(
      'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
      `invalid list prefix ${JSON.stringify(prefix)}`,
      {
        cause: err,
      },
    );
  }
}

export function assertValidRange(key: string, range: ByteRange): void {
  const { offset, length } = range;
  if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(length) || length < 1) {
    throw new ObjectStoreError(
      'WALPROXY_ERR_STORE_INVALID_RANGE',
      `invalid range offset=${offset} length=${length} for ${JSON.stringify(key)}: need offset >= 0 and length >= 1`,
      { key },
    );
  }
}

/** The error of a call whose signal fired; `what` names the call, e.g. `GetObject s3://b/k`. */
export function abortedError(signal: AbortSignal, what: string, key?: string): ObjectStoreError {
  const reason: unknown = signal.reason;
  const timedOut = reason instanceof Error && reason.name === 'TimeoutError';
  return new ObjectStoreError(
    'WALPROXY_ERR_STORE_ABORTED',
    `${what}: ${timedOut ? 'the deadline passed' : `aborted (${reason instanceof Error ? reason.message : String(reason)})`}`,
    { key, cause: reason },
  );
}

/** Throws `abortedError` when the signal has already fired. */
export function throwIfAborted(signal: AbortSignal | undefined, what: string, key?: string): void {
  if (signal?.aborted) throw abortedError(signal, what, key);
}

function invalidKey(key: string, why: string): ObjectStoreError {
  return new ObjectStoreError(
    'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
    `invalid object key ${JSON.stringify(key)}: ${why}`,
    {
      key,
    },
  );
}
