/**
 * PutObject, ranged GetObject and HeadObject without the SDK's middleware stack: a WAL object is
 * ~7,600 PUTs and ≥ 30,000 GETs per produced GB, and the stack (endpoint rules, checksums,
 * retries, serde) costs 3.4–3.9 ms of CPU per request where a keep-alive request signed with the
 * SDK's own signer costs ~1.2 ms (issue #13). What the SDK stays in charge of:
 *
 * - the endpoint: its own rules (`getEndpointFromInstructions`), evaluated once per store, give
 *   the URL and the auth scheme (signing name `s3` or `s3express`, plain SigV4 or S3 Express
 *   session auth) exactly as for the client's own calls;
 * - credentials: the client's resolved provider (the default chain or static keys);
 * - signing: `SignatureV4SignWithCredentials` from `@aws-sdk/signature-v4-multi-region`, the signer
 *   the SDK uses for S3 and S3 Express (which signs the session token as `x-amz-s3session-token`
 *   and never sends `x-amz-security-token`), with S3's settings (no double path encoding);
 * - CreateSession, through the client (see s3-express-sessions.ts).
 *
 * Bodies are never concatenated: a put writes its buffers in order on a corked request, and a
 * range read lands in one Buffer of the expected length. Every call is bounded: attempts have a
 * timeout, retries a jittered backoff, the caller's AbortSignal ends the whole call at once, and
 * close() ends every call in flight and destroys the sockets.
 */
import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type RequestOptions,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { S3Client } from '@aws-sdk/client-s3';
import { ObjectStoreError } from './errors.js';
import { abortedError, type ByteRange, type ObjectStoreCallOptions } from './object-store.js';
import { classifyS3Error, type S3ErrorContext } from './s3-errors.js';
import type { S3ExpressSession, S3ExpressSessions } from './s3-express-sessions.js';
import { encodeKey, resolveS3Signing, type S3Signing } from './s3-signing.js';
import { crc32Base64, type Finish, readInto, statusName, timeoutError, xmlText } from './s3-wire.js';

export interface S3DataPathOptions {
  bucket: string;
  /** `''` or a prefix ending in `/`, prepended to every key. */
  keyPrefix: string;
  /** Where requests go, for error messages: the custom endpoint or the AWS region. */
  target: string;
  /** Headers every PutObject carries (If-None-Match, server-side encryption). */
  putHeaders?: Readonly<Record<string, string>>;
  /** Session cache for directory buckets with session auth; unused for other buckets. */
  sessions?: S3ExpressSessions;
  /** Bound on open connections to the store, kept alive and reused. */
  maxSockets?: number;
  /** Attempts per call, the first included. */
  maxAttempts?: number;
  /** One attempt, from sending to the last body byte; then it fails as unreachable and is retried. */
  requestTimeoutMs?: number;
  /** Establishing a connection (TCP, and TLS for https). */
  connectionTimeoutMs?: number;
}

export const S3_DATA_PATH_DEFAULTS = {
  maxSockets: 64,
  maxAttempts: 3,
  requestTimeoutMs: 10_000,
  connectionTimeoutMs: 3_000,
  /** Full-jitter exponential backoff, as the SDK's standard retry strategy. */
  retryBaseMs: 100,
  /** Throttling answers (503 SlowDown, 429) back off from a higher base, as the SDK's do. */
  throttlingRetryBaseMs: 500,
  retryCapMs: 20_000,
} as const;

/** SHA-256 of an empty payload, what GET and HEAD sign as `x-amz-content-sha256`. */
const EMPTY_PAYLOAD_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
/**
 * S3 accepts UNSIGNED-PAYLOAD for a single-chunk upload signed in the Authorization header, over
 * HTTP and HTTPS alike, and S3 Express (HTTPS only) too: the signature then covers the headers,
 * not the body. Hashing 400 KB would cost ~0.2 ms per PUT; the CRC32 header below is what lets S3
 * reject a body damaged on the way (400 BadDigest), at ~55 µs per 400 KB.
 */
const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
/** Error bodies are small XML documents; more than this is not an S3 error document. */
const MAX_ERROR_BODY = 64 * 1024;
/** The SDK corrects its clock from the server's Date once they differ by this much. */
const CLOCK_SKEW_MS = 5 * 60_000;
/** S3 Express answers these for a session token it no longer takes; a new session fixes it. */
const SESSION_REFUSALS = new Set(['ExpiredToken', 'InvalidToken', 'TokenRefreshRequired']);
const THROTTLING = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'TooManyRequests']);
/**
 * Error answers that a new attempt fixes whatever their class: a session S3 refused (the next
 * attempt creates a new one), and a signature S3 refused while this data path learnt the server's
 * clock from it (the next attempt signs on that clock) — as the SDK retries `clockSkewCorrected`.
 */
const retryAnyway = new WeakSet<object>();

/** A resolved signing plus the connection pool its requests go through. */
interface Target extends S3Signing {
  request: typeof httpRequest;
  agent: HttpAgent;
}

/** What an S3 error answer said, shaped as the SDK's service errors so `classifyS3Error` reads it. */
interface ServiceErrorShape extends Error {
  $metadata: { httpStatusCode: number };
  $fault: 'client' | 'server';
}

export class S3DataPath {
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #keyPrefix: string;
  readonly #targetName: string;
  readonly #putHeaders: Readonly<Record<string, string>>;
  readonly #sessions: S3ExpressSessions | undefined;
  readonly #maxAttempts: number;
  readonly #requestTimeoutMs: number;
  readonly #connectionTimeoutMs: number;
  readonly #httpAgent: HttpAgent;
  readonly #httpsAgent: HttpsAgent;
  /** Fired by close(): no call starts or goes on afterwards. */
  readonly #closing = new AbortController();
  /** How to end each request and backoff in flight, for close(). */
  readonly #inFlight = new Set<() => void>();
  #target: Promise<Target> | undefined;
  /** The target once resolved, so calls after the first skip a promise. */
  #resolved: Target | undefined;
  /** Server time minus local time, learnt from error answers when the clocks disagree. */
  #clockOffsetMs = 0;

  constructor(client: S3Client, options: S3DataPathOptions) {
    this.#client = client;
    this.#bucket = options.bucket;
    this.#keyPrefix = options.keyPrefix;
    this.#targetName = options.target;
    this.#putHeaders = options.putHeaders ?? {};
    this.#sessions = options.sessions;
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? S3_DATA_PATH_DEFAULTS.maxAttempts);
    this.#requestTimeoutMs = options.requestTimeoutMs ?? S3_DATA_PATH_DEFAULTS.requestTimeoutMs;
    this.#connectionTimeoutMs = options.connectionTimeoutMs ?? S3_DATA_PATH_DEFAULTS.connectionTimeoutMs;
    const agentOptions = {
      keepAlive: true,
      maxSockets: options.maxSockets ?? S3_DATA_PATH_DEFAULTS.maxSockets,
      scheduling: 'lifo' as const,
    };
    this.#httpAgent = new HttpAgent(agentOptions);
    this.#httpsAgent = new HttpsAgent(agentOptions);
  }

  /** PutObject of the buffers in order, Content-Length their sum, never concatenated. */
  put(key: string, body: Buffer | readonly Buffer[], options: ObjectStoreCallOptions = {}): Promise<void> {
    const chunks = Buffer.isBuffer(body) ? [body] : body.filter((chunk) => chunk.length > 0);
    let length = 0;
    for (const chunk of chunks) length += chunk.length;
    let checksum: string | undefined;
    return this.#call('PutObject', key, options.signal, async (target, signal) => {
      const headers: Record<string, string> = {
        ...this.#putHeaders,
        'content-length': String(length),
        'x-amz-content-sha256': UNSIGNED_PAYLOAD,
      };
      if (target.checksum) {
        checksum ??= crc32Base64(chunks);
        headers['x-amz-checksum-crc32'] = checksum;
      }
      return this.#exchange<void>(target, 'PUT', key, headers, chunks, signal, (res, finish) => {
        if (res.statusCode !== 200) return this.#readError(res, finish);
        res.on('end', () => finish(undefined));
        res.resume();
      });
    });
  }

  /**
   * GetObject of the whole object, or of exactly `range.length` bytes at `range.offset`, read into
   * one Buffer of that length. A range past the end fails as WALPROXY_ERR_STORE_INVALID_RANGE.
   */
  get(key: string, range: ByteRange | undefined, options: ObjectStoreCallOptions = {}): Promise<Buffer> {
    return this.#call('GetObject', key, options.signal, (target, signal) => {
      const headers: Record<string, string> = { 'x-amz-content-sha256': EMPTY_PAYLOAD_SHA256 };
      if (range !== undefined) headers.range = `bytes=${range.offset}-${range.offset + range.length - 1}`;
      return this.#exchange<Buffer>(target, 'GET', key, headers, undefined, signal, (res, finish) => {
        const status = res.statusCode ?? 0;
        if (status !== 200 && status !== 206) return this.#readError(res, finish);
        const expected = this.#expectedLength(key, range, res);
        if (typeof expected !== 'number') {
          // The answer is fine but not what was asked: read it off so the connection is reused.
          res.on('end', () => finish(expected));
          res.resume();
          return;
        }
        readInto(res, expected, finish);
      });
    });
  }

  /** HeadObject: the size, or undefined when there is no such key. */
  async head(key: string, options: ObjectStoreCallOptions = {}): Promise<{ size: number } | undefined> {
    try {
      return await this.#call('HeadObject', key, options.signal, (target, signal) => {
        const headers = { 'x-amz-content-sha256': EMPTY_PAYLOAD_SHA256 };
        return this.#exchange<{ size: number }>(
          target,
          'HEAD',
          key,
          headers,
          undefined,
          signal,
          (res, finish) => {
            if (res.statusCode !== 200) return this.#readError(res, finish);
            const size = Number(res.headers['content-length']);
            res.on('end', () =>
              Number.isSafeInteger(size)
                ? finish(undefined, { size })
                : finish(new Error('HeadObject answered without a Content-Length')),
            );
            res.resume();
          },
        );
      });
    } catch (err) {
      if ((err as ObjectStoreError).code === 'WALPROXY_ERR_STORE_NOT_FOUND') return undefined;
      throw err;
    }
  }

  /** Aborts every call in flight and destroys the connections. */
  close(): void {
    this.#closing.abort(new Error('the store was closed'));
    for (const end of this.#inFlight) end();
    this.#httpAgent.destroy();
    this.#httpsAgent.destroy();
  }

  /** One call: attempts with backoff between them, all within the caller's signal and close(). */
  async #call<T>(
    operation: 'PutObject' | 'GetObject' | 'HeadObject',
    key: string,
    signal: AbortSignal | undefined,
    attempt: (target: Target, signal: AbortSignal | undefined) => Promise<T>,
  ): Promise<T> {
    const context: S3ErrorContext = {
      operation,
      bucket: this.#bucket,
      keyPrefix: this.#keyPrefix,
      key,
      target: this.#targetName,
    };
    const what = `${operation} s3://${this.#bucket}/${this.#keyPrefix}${key}`;
    for (let n = 1; ; n++) {
      const aborted = this.#aborted(signal, what, key);
      if (aborted !== undefined) throw aborted;
      let error: ObjectStoreError;
      try {
        return await attempt(this.#resolved ?? (await this.#resolveTarget(context)), signal);
      } catch (err) {
        error = this.#aborted(signal, what, key) ?? classifyS3Error(err, context);
        if (typeof err === 'object' && err !== null && retryAnyway.has(err)) {
          error = new ObjectStoreError(error.code, error.message, { key, cause: err, retriable: true });
        }
      }
      if (!error.retriable || n >= this.#maxAttempts) throw error;
      const cause = error.cause as { name?: string; $metadata?: { httpStatusCode?: number } } | undefined;
      const throttled = THROTTLING.has(cause?.name ?? '') || cause?.$metadata?.httpStatusCode === 429;
      const base = throttled
        ? S3_DATA_PATH_DEFAULTS.throttlingRetryBaseMs
        : S3_DATA_PATH_DEFAULTS.retryBaseMs;
      const delay = Math.random() * Math.min(S3_DATA_PATH_DEFAULTS.retryCapMs, base * 2 ** (n - 1));
      try {
        await this.#sleep(delay, signal);
      } catch {
        throw this.#aborted(signal, what, key) ?? error;
      }
    }
  }

  /** The endpoint, auth scheme and checksum setting from the client's config, once per store. */
  #resolveTarget(context: S3ErrorContext): Promise<Target> {
    if (this.#target === undefined) {
      const resolving = this.#computeTarget();
      this.#target = resolving;
      resolving.then(
        (target) => {
          this.#resolved = target;
        },
        // A failure (no region, say) is not kept: the next call tries again.
        () => {
          if (this.#target === resolving) this.#target = undefined;
        },
      );
    }
    return this.#target.catch((err: unknown) => {
      throw classifyS3Error(err, context);
    });
  }

  async #computeTarget(): Promise<Target> {
    const signing = await resolveS3Signing(this.#client, this.#bucket);
    if (signing.session && this.#sessions === undefined) {
      throw new Error(
        `the endpoint of ${this.#bucket} asks for S3 Express session auth and no session cache was given`,
      );
    }
    const https = signing.protocol === 'https:';
    return {
      ...signing,
      request: https ? httpsRequest : httpRequest,
      agent: https ? this.#httpsAgent : this.#httpAgent,
    };
  }

  /** One signed HTTP request; `read` turns the response into the result or an error. */
  async #exchange<T>(
    target: Target,
    method: 'PUT' | 'GET' | 'HEAD',
    key: string,
    headers: Record<string, string>,
    body: readonly Buffer[] | undefined,
    signal: AbortSignal | undefined,
    read: (res: IncomingMessage, finish: Finish<T>) => void,
  ): Promise<T> {
    const path = `${target.basePath}/${encodeKey(this.#keyPrefix + key)}`;
    headers.host = target.host;
    const signingDate = new Date(Date.now() + this.#clockOffsetMs);
    const session = target.session ? await this.#session(signal) : undefined;
    const signed = await target.sign({ method, path, headers }, signingDate, session);
    try {
      return await this.#send(target, method, path, signed, body, signal, read);
    } catch (err) {
      const name = (err as { name?: unknown }).name;
      if (session !== undefined && typeof name === 'string' && SESSION_REFUSALS.has(name)) {
        // S3 ended the session early: forget it, and let the next attempt create one.
        this.#sessions!.invalidate(this.#bucket, session);
        retryAnyway.add(err as object);
      }
      throw err;
    }
  }

  async #session(signal: AbortSignal | undefined): Promise<S3ExpressSession> {
    try {
      return await this.#sessions!.session(this.#bucket, signal);
    } catch (err) {
      throw classifyS3Error(err, {
        operation: 'CreateSession',
        bucket: this.#bucket,
        keyPrefix: this.#keyPrefix,
        target: this.#targetName,
      });
    }
  }

  #send<T>(
    target: Target,
    method: string,
    path: string,
    headers: Record<string, string>,
    body: readonly Buffer[] | undefined,
    signal: AbortSignal | undefined,
    read: (res: IncomingMessage, finish: Finish<T>) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      let connectTimer: NodeJS.Timeout | undefined;
      const finish: Finish<T> = (err, value) => {
        if (settled) return;
        settled = true;
        clearTimeout(requestTimer);
        clearTimeout(connectTimer);
        signal?.removeEventListener('abort', onAbort);
        this.#inFlight.delete(onAbort);
        if (err === undefined) {
          resolve(value as T);
        } else {
          // Whatever is left of this exchange is not worth the socket: it is not reused.
          req.destroy();
          reject(err);
        }
      };
      const onAbort = () => finish(new Error('aborted'));
      const options: RequestOptions = {
        method,
        hostname: target.hostname,
        port: target.port,
        path,
        headers,
        agent: target.agent,
      };
      const req = target.request(options);
      const requestTimer = setTimeout(
        () => finish(timeoutError(`no complete answer within ${this.#requestTimeoutMs} ms`)),
        this.#requestTimeoutMs,
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#inFlight.add(onAbort);
      req.on('socket', (socket) => {
        if (!socket.connecting) return;
        connectTimer = setTimeout(
          () =>
            finish(
              Object.assign(new Error(`connect timed out after ${this.#connectionTimeoutMs} ms`), {
                code: 'ETIMEDOUT',
              }),
            ),
          this.#connectionTimeoutMs,
        );
        socket.once('connect', () => clearTimeout(connectTimer));
      });
      req.on('error', (err) => finish(err));
      req.on('response', (res) => {
        res.on('error', (err) => finish(err));
        // A connection that breaks mid-body ends the response without 'end'.
        res.on('close', () => {
          if (!res.complete)
            finish(Object.assign(new Error('connection closed mid-response'), { code: 'ECONNRESET' }));
        });
        read(res, finish);
      });
      if (signal?.aborted || this.#closing.signal.aborted) return onAbort();
      if (body === undefined || body.length === 0) {
        req.end();
      } else {
        // One writev for the headers and every buffer, instead of one write per buffer.
        req.cork();
        for (const chunk of body) req.write(chunk);
        req.end();
      }
    });
  }

  /** The byte count the answer must carry, or the error that says why it is not the one asked for. */
  #expectedLength(
    key: string,
    range: ByteRange | undefined,
    res: IncomingMessage,
  ): number | ObjectStoreError {
    const contentLength = Number(res.headers['content-length']);
    const what = `GetObject s3://${this.#bucket}/${this.#keyPrefix}${key}`;
    if (range === undefined) {
      return Number.isSafeInteger(contentLength) && res.statusCode === 200
        ? contentLength
        : new ObjectStoreError(
            'WALPROXY_ERR_STORE_OTHER',
            `${what}: answered ${res.statusCode} without a usable Content-Length`,
            {
              key,
            },
          );
    }
    const contentRange = res.headers['content-range'];
    const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(contentRange ?? '');
    if (res.statusCode !== 206 || match === null || Number(match[1]) !== range.offset) {
      return new ObjectStoreError(
        'WALPROXY_ERR_STORE_OTHER',
        `${what}: asked for bytes ${range.offset}-${range.offset + range.length - 1}, answered ${res.statusCode} with ${contentRange ?? 'no Content-Range'}`,
        { key },
      );
    }
    const served = Number(match[2]) - Number(match[1]) + 1;
    // S3 answers a range that runs past the end with the bytes it has; callers asked for exact bytes.
    if (served !== range.length || contentLength !== range.length) {
      return new ObjectStoreError(
        'WALPROXY_ERR_STORE_INVALID_RANGE',
        `${what}: asked for ${range.length} bytes at offset ${range.offset}, the object has ${served} there (${contentRange})`,
        { key },
      );
    }
    return range.length;
  }

  /** Reads an error answer's XML (Code, Message) into the SDK's error shape. */
  #readError<T>(res: IncomingMessage, finish: Finish<T>): void {
    const status = res.statusCode ?? 0;
    const serverDate = Date.parse(res.headers.date ?? '');
    const skewed =
      Number.isFinite(serverDate) &&
      Math.abs(serverDate - (Date.now() + this.#clockOffsetMs)) >= CLOCK_SKEW_MS;
    // The next attempt signs with the server's clock, as the SDK does.
    if (skewed) this.#clockOffsetMs = serverDate - Date.now();
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_ERROR_BODY) chunks.push(chunk);
    });
    res.on('end', () => {
      const xml = Buffer.concat(chunks).toString('utf8');
      const code = xmlText(xml, 'Code') ?? statusName(status);
      const message = xmlText(xml, 'Message') ?? `HTTP ${status}`;
      const err = Object.assign(new Error(message), {
        name: code,
        $metadata: { httpStatusCode: status },
        $fault: status >= 500 ? 'server' : 'client',
      }) as ServiceErrorShape;
      if (skewed) retryAnyway.add(err);
      finish(err);
    });
  }

  #aborted(signal: AbortSignal | undefined, what: string, key: string): ObjectStoreError | undefined {
    if (signal?.aborted) return abortedError(signal, what, key);
    if (this.#closing.signal.aborted) return abortedError(this.#closing.signal, what, key);
    return undefined;
  }

  #sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (err?: unknown) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#inFlight.delete(onAbort);
        if (err === undefined) resolve();
        else reject(err);
      };
      const onAbort = () => done(new Error('aborted'));
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#inFlight.add(onAbort);
    });
  }
}
