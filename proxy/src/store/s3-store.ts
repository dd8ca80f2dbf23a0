import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { isIP } from 'node:net';
import {
  CreateSessionCommand,
  DeleteObjectsCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import type { ObjectStoreError } from './errors.js';
import {
  abortedError,
  assertValidKey,
  assertValidPrefix,
  assertValidRange,
  type ByteRange,
  type ObjectInfo,
  type ObjectStore,
  type ObjectStoreCallOptions,
} from './object-store.js';
import { S3_DATA_PATH_DEFAULTS, S3DataPath } from './s3-data-path.js';
import { classifyS3Error, type S3ErrorContext } from './s3-errors.js';
import { type S3ExpressSession, S3ExpressSessions } from './s3-express-sessions.js';
import { isDirectoryBucket, type S3ServerSideEncryption } from './s3-names.js';

export interface S3StoreOptions {
  /** AWS region; defaults to the SDK's chain (AWS_REGION, profile). Directory buckets need their own. */
  region?: string;
  /** Custom endpoint for S3-compatible servers, e.g. `http://127.0.0.1:9000`. */
  endpoint?: string;
  /** Path-style addressing for standard buckets (the SDK ignores it for `--x-s3` buckets). */
  forcePathStyle?: boolean;
  /** Sign directory-bucket requests with plain SigV4 instead of a CreateSession token (emulators). */
  disableS3ExpressSessionAuth?: boolean;
  /** Static credentials; by default the SDK's provider chain (env, profile, IMDS, web identity). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /**
   * Send `If-None-Match: *` on puts so S3 refuses to overwrite a key (412). On by default; turn off
   * only for S3-compatible stores that reject the header, since keys are then unprotected.
   */
  conditionalPut?: boolean;
  /** Upper bound of open connections to the store; they are kept alive and reused. */
  maxSockets?: number;
  /** Attempts per operation, including the first (3, as the SDK's default). */
  maxAttempts?: number;
  /** Milliseconds one HTTP request may take before it fails (as WALPROXY_ERR_STORE_UNREACHABLE) and is retried. */
  requestTimeoutMs?: number;
  /** Milliseconds to establish a connection. */
  connectionTimeoutMs?: number;
  /**
   * Server-side encryption requested on every PutObject: `AES256` (SSE-S3) or `aws:kms` (SSE-KMS).
   * Unset: no header, the bucket's default encryption applies. Directory buckets accept only
   * headers that match their default encryption.
   */
  serverSideEncryption?: S3ServerSideEncryption;
  /** With `aws:kms`: the KMS key (id, ARN or alias ARN); unset, S3 uses the AWS managed key aws/s3. */
  sseKmsKeyId?: string;
}

export { isDirectoryBucket, S3_SERVER_SIDE_ENCRYPTIONS, type S3ServerSideEncryption } from './s3-names.js';

/** DeleteObjects takes at most 1,000 keys per call. */
const DELETE_BATCH = 1000;

/**
 * Objects in an S3 bucket (standard or S3 Express One Zone directory bucket) under a key prefix.
 * put, get and head (the data path, per WAL object) go through S3DataPath: plain keep-alive HTTP
 * signed with the SDK's signer. list, delete and HeadBucket (control plane, rare) stay on the SDK,
 * as does CreateSession. Bodies are Buffers, never streams: a stream body would make the SDK send
 * aws-chunked encoding with a trailing checksum, which several S3-compatible stores mishandle, and
 * WAL objects are in memory anyway; the data path writes a Buffer[] body as it is, with a
 * Content-Length, without concatenating it.
 */
export class S3ObjectStore implements ObjectStore {
  readonly url: string;
  readonly bucket: string;
  /** `''` or a prefix ending in `/`, prepended to every key. */
  readonly keyPrefix: string;
  readonly #client: S3Client;
  readonly #dataPath: S3DataPath;
  readonly #sessions: S3ExpressSessions;
  readonly #target: string;
  /** Fired by close(), so the SDK's calls in flight end too. */
  readonly #closing = new AbortController();

  constructor(url: string, bucket: string, keyPrefix: string, options: S3StoreOptions = {}) {
    this.url = url;
    this.bucket = bucket;
    this.keyPrefix = keyPrefix;
    this.#target =
      options.endpoint ?? `AWS${options.region === undefined ? '' : ` region ${options.region}`}`;
    setMaxListeners(0, this.#closing.signal);
    this.#sessions = new S3ExpressSessions((name, signal) => this.#createSession(name, signal));
    const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 64 };
    const config: S3ClientConfig = {
      requestHandler: {
        httpAgent: new HttpAgent(agentOptions),
        httpsAgent: new HttpsAgent(agentOptions),
        requestTimeout: options.requestTimeoutMs ?? 10_000,
        // Without this the SDK only logs a warning when requestTimeout passes.
        throwOnRequestTimeout: true,
        connectionTimeout: options.connectionTimeoutMs ?? 3_000,
      },
      // One session cache for the data path and the SDK's own calls, without the SDK's unhandled
      // rejection when a background refresh fails (s3-express-sessions.ts).
      s3ExpressIdentityProvider: this.#sessions,
    };
    if (options.region !== undefined) config.region = options.region;
    if (options.endpoint !== undefined) config.endpoint = options.endpoint;
    if (options.forcePathStyle !== undefined) config.forcePathStyle = options.forcePathStyle;
    if (options.disableS3ExpressSessionAuth !== undefined) {
      config.disableS3ExpressSessionAuth = options.disableS3ExpressSessionAuth;
    }
    if (options.credentials !== undefined) config.credentials = options.credentials;
    if (options.maxAttempts !== undefined) config.maxAttempts = options.maxAttempts;
    this.#client = new S3Client(config);
    if (options.endpoint !== undefined && isDirectoryBucket(bucket) && endpointIsIp(options.endpoint)) {
      this.#client.middlewareStack.add(
        (next) => async (args) => {
          const request = args.request as { path?: string };
          // The S3 Express endpoint rule builds `{endpoint}/{bucket}{path}` for an IP endpoint,
          // and the path already starts with `/`: `/bucket//key`, which is not the key on any server.
          if (typeof request.path === 'string') request.path = request.path.replace(/^(\/[^/]+)\/\//, '$1/');
          return next(args);
        },
        // Before signing, so the signature covers the corrected path.
        { step: 'build', name: 'walproxyS3ExpressDoubleSlashFix' },
      );
    }
    const putHeaders: Record<string, string> = {};
    if (options.conditionalPut ?? true) putHeaders['if-none-match'] = '*';
    if (options.serverSideEncryption !== undefined) {
      putHeaders['x-amz-server-side-encryption'] = options.serverSideEncryption;
      if (options.serverSideEncryption === 'aws:kms' && options.sseKmsKeyId) {
        putHeaders['x-amz-server-side-encryption-aws-kms-key-id'] = options.sseKmsKeyId;
      }
    }
    this.#dataPath = new S3DataPath(this.#client, {
      bucket,
      keyPrefix,
      target: this.#target,
      putHeaders,
      sessions: this.#sessions,
      maxSockets: options.maxSockets ?? S3_DATA_PATH_DEFAULTS.maxSockets,
      maxAttempts: options.maxAttempts ?? S3_DATA_PATH_DEFAULTS.maxAttempts,
      requestTimeoutMs: options.requestTimeoutMs ?? S3_DATA_PATH_DEFAULTS.requestTimeoutMs,
      connectionTimeoutMs: options.connectionTimeoutMs ?? S3_DATA_PATH_DEFAULTS.connectionTimeoutMs,
    });
  }

  async put(key: string, body: Buffer | readonly Buffer[], options?: ObjectStoreCallOptions): Promise<void> {
    assertValidKey(key);
    await this.#dataPath.put(key, body, options);
  }

  async get(key: string, range?: ByteRange, options?: ObjectStoreCallOptions): Promise<Buffer> {
    assertValidKey(key);
    if (range !== undefined) assertValidRange(key, range);
    return this.#dataPath.get(key, range, options);
  }

  async head(key: string, options?: ObjectStoreCallOptions): Promise<{ size: number } | undefined> {
    assertValidKey(key);
    return this.#dataPath.head(key, options);
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertValidPrefix(prefix);
    const full = this.keyPrefix + prefix;
    // Directory buckets only accept list prefixes that end in `/`: list the enclosing directory
    // and keep the matching keys.
    const listPrefix = isDirectoryBucket(this.bucket) ? full.slice(0, full.lastIndexOf('/') + 1) : full;
    let token: string | undefined;
    do {
      let page: ListObjectsV2CommandOutput;
      try {
        page = await this.#client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            ...(listPrefix === '' ? {} : { Prefix: listPrefix }),
            ...(token === undefined ? {} : { ContinuationToken: token }),
          }),
          { abortSignal: this.#closing.signal },
        );
      } catch (err) {
        throw this.#error(err, 'ListObjectsV2');
      }
      for (const object of page.Contents ?? []) {
        if (object.Key === undefined || !object.Key.startsWith(full)) continue;
        yield {
          key: object.Key.slice(this.keyPrefix.length),
          size: object.Size ?? 0,
          lastModified: object.LastModified ?? new Date(0),
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) assertValidKey(key);
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      const batch = keys.slice(i, i + DELETE_BATCH);
      let errors: { Key?: string; Code?: string; Message?: string }[] | undefined;
      try {
        const out = await this.#client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: batch.map((key) => ({ Key: this.keyPrefix + key })), Quiet: true },
          }),
          { abortSignal: this.#closing.signal },
        );
        errors = out.Errors;
      } catch (err) {
        throw this.#error(err, 'DeleteObjects');
      }
      const first = errors?.[0];
      if (first !== undefined) {
        const key = first.Key?.slice(this.keyPrefix.length);
        // DeleteObjects answers 200 and lists per-key failures; report the first like a failed call.
        const err = Object.assign(new Error(first.Message ?? 'delete failed'), {
          name: first.Code ?? 'Error',
        });
        throw classifyS3Error(err, this.#context('DeleteObjects', key));
      }
    }
  }

  async validate(): Promise<void> {
    try {
      await this.#client.send(new HeadBucketCommand({ Bucket: this.bucket }), {
        abortSignal: this.#closing.signal,
      });
    } catch (err) {
      throw this.#error(err, 'HeadBucket');
    }
    // HeadBucket does not use S3 Express session credentials and proves no write permission:
    // a put and a delete do both.
    const probe = `.walproxy-validate-${randomBytes(8).toString('hex')}`;
    await this.put(probe, Buffer.from('walproxy startup check\n'));
    await this.delete([probe]);
  }

  async close(): Promise<void> {
    this.#closing.abort(new Error('the store was closed'));
    this.#dataPath.close();
    this.#sessions.close();
    this.#client.destroy();
  }

  /** CreateSession through the SDK: signed with the IAM credentials, never with a session. */
  async #createSession(bucket: string, signal: AbortSignal): Promise<S3ExpressSession> {
    const out = await this.#client.send(new CreateSessionCommand({ Bucket: bucket }), {
      abortSignal: signal,
    });
    const credentials = out.Credentials;
    if (!credentials?.AccessKeyId || !credentials.SecretAccessKey || !credentials.SessionToken) {
      throw new Error(`CreateSession for ${bucket} answered without session credentials`);
    }
    return {
      accessKeyId: credentials.AccessKeyId,
      secretAccessKey: credentials.SecretAccessKey,
      sessionToken: credentials.SessionToken,
      expiration: new Date(credentials.Expiration ?? 0),
    };
  }

  #context(operation: S3ErrorContext['operation'], key?: string): S3ErrorContext {
    return { operation, bucket: this.bucket, keyPrefix: this.keyPrefix, key, target: this.#target };
  }

  #error(err: unknown, operation: S3ErrorContext['operation'], key?: string): ObjectStoreError {
    if (this.#closing.signal.aborted) {
      return abortedError(
        this.#closing.signal,
        `${operation} s3://${this.bucket}/${this.keyPrefix}${key ?? ''}`,
        key,
      );
    }
    return classifyS3Error(err, this.#context(operation, key));
  }
}

function endpointIsIp(endpoint: string): boolean {
  try {
    return isIP(new URL(endpoint).hostname.replace(/^\[|\]$/g, '')) !== 0;
  } catch {
    return false;
  }
}
