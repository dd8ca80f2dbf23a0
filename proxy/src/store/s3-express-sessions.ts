/**
 * S3 Express One Zone session credentials, one per directory bucket: created with CreateSession
 * (a control-plane call the caller makes through the SDK), cached, and replaced in the background
 * before they expire (S3 gives 5 minutes), so a data request waits for CreateSession only when
 * there is no usable session at all.
 *
 * The SDK has its own cache (S3ExpressIdentityProviderImpl) with the same 60 s refresh window, but
 * its background refresh has no rejection handler: a CreateSession that fails 60 s before expiry
 * (a store outage, throttling) is an unhandled rejection, which ends a Node process by default,
 * and marks the entry as refreshing for good. This cache catches it, tries again after
 * `retryDelayMs`, and keeps the old session until it expires. It is also given to the S3 client
 * as its `s3ExpressIdentityProvider`, so the SDK's own calls (list, delete) share its sessions.
 */

/** A session's credentials: sign with the key pair, send the token as `x-amz-s3session-token`. */
export interface S3ExpressSession {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  expiration: Date;
}

/** Calls CreateSession for the bucket; `signal` fires when the cache is closed. */
export type CreateS3ExpressSession = (bucket: string, signal: AbortSignal) => Promise<S3ExpressSession>;

export interface S3ExpressSessionsOptions {
  /** Replace a session this long before it expires (the SDK's REFRESH_WINDOW_MS). */
  refreshWindowMs?: number;
  /** After a failed background refresh, the next request tries again no sooner than this. */
  retryDelayMs?: number;
  /**
   * A session is not handed out in its last milliseconds: a request signed with it could reach S3
   * after it expired.
   */
  expiryMarginMs?: number;
  /** Clock, for tests. */
  now?: () => number;
}

export const S3_EXPRESS_SESSION_DEFAULTS = {
  refreshWindowMs: 60_000,
  retryDelayMs: 1_000,
  expiryMarginMs: 5_000,
} as const;

interface Entry {
  current: S3ExpressSession | undefined;
  /** A CreateSession in flight, shared by every caller that needs it. */
  pending: Promise<S3ExpressSession> | undefined;
  /** No background refresh before this time (set after one failed). */
  retryAtMs: number;
}

export class S3ExpressSessions {
  readonly #create: CreateS3ExpressSession;
  readonly #refreshWindowMs: number;
  readonly #retryDelayMs: number;
  readonly #expiryMarginMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #closing = new AbortController();
  #created = 0;

  constructor(create: CreateS3ExpressSession, options: S3ExpressSessionsOptions = {}) {
    this.#create = create;
    this.#refreshWindowMs = options.refreshWindowMs ?? S3_EXPRESS_SESSION_DEFAULTS.refreshWindowMs;
    this.#retryDelayMs = options.retryDelayMs ?? S3_EXPRESS_SESSION_DEFAULTS.retryDelayMs;
    this.#expiryMarginMs = options.expiryMarginMs ?? S3_EXPRESS_SESSION_DEFAULTS.expiryMarginMs;
    this.#now = options.now ?? Date.now;
  }

  /** CreateSession calls started so far, for tests and logs. */
  get created(): number {
    return this.#created;
  }

  /**
   * A usable session for the bucket. Starts a background refresh when the current one is inside
   * the refresh window; waits for CreateSession only when there is none left to use. `signal`
   * stops this caller's wait, not the CreateSession other callers may share.
   */
  async session(bucket: string, signal?: AbortSignal): Promise<S3ExpressSession> {
    if (this.#closing.signal.aborted) throw new Error('S3 Express sessions: closed');
    let entry = this.#entries.get(bucket);
    if (entry === undefined) {
      entry = { current: undefined, pending: undefined, retryAtMs: 0 };
      this.#entries.set(bucket, entry);
    }
    const now = this.#now();
    const current = entry.current;
    if (current !== undefined && current.expiration.getTime() - this.#expiryMarginMs > now) {
      if (
        current.expiration.getTime() - this.#refreshWindowMs <= now &&
        entry.pending === undefined &&
        entry.retryAtMs <= now
      ) {
        // A failure here is kept for later: the current session still serves until it expires.
        this.#start(bucket, entry).catch(() => {
          entry.retryAtMs = this.#now() + this.#retryDelayMs;
        });
      }
      return current;
    }
    return wait(entry.pending ?? this.#start(bucket, entry), signal);
  }

  /**
   * Forgets a session S3 refused (expired or revoked early), unless it was already replaced, so
   * the next request creates a new one.
   */
  invalidate(bucket: string, session: S3ExpressSession): void {
    const entry = this.#entries.get(bucket);
    if (entry?.current === session) entry.current = undefined;
  }

  /** The SDK's S3ExpressIdentityProvider interface, for the S3 client's own calls. */
  getS3ExpressIdentity(_identity: unknown, properties: { Bucket: string }): Promise<S3ExpressSession> {
    return this.session(properties.Bucket);
  }

  /** Aborts CreateSession calls in flight; no session is handed out afterwards. */
  close(): void {
    this.#closing.abort(new Error('S3 Express sessions: closed'));
    this.#entries.clear();
  }

  #start(bucket: string, entry: Entry): Promise<S3ExpressSession> {
    this.#created++;
    const pending = this.#create(bucket, this.#closing.signal).then(
      (session) => {
        entry.current = session;
        entry.pending = undefined;
        return session;
      },
      (err: unknown) => {
        entry.pending = undefined;
        throw err;
      },
    );
    entry.pending = pending;
    // Waiters may all have given up; the failure is theirs to see, never an unhandled rejection.
    pending.catch(() => undefined);
    return pending;
  }
}

function wait<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
