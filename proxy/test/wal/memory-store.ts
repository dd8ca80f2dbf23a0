// An in-memory ObjectStore for the WalWriter's unit tests, with a hook that decides what each put
// does: store the object (`commit`), fail before or after storing it, or hold until the test
// releases it. It also records how many puts ran at once. A call's AbortSignal is honoured as the
// real stores honour it: a put or get whose signal fires rejects with WALPROXY_ERR_STORE_ABORTED,
// a put held by its hook included, and an aborted put stores nothing.
import {
  abortedError,
  type ByteRange,
  type ObjectInfo,
  type ObjectStore,
  type ObjectStoreCallOptions,
  ObjectStoreError,
  throwIfAborted,
} from '../../src/store/index.js';

/** Called for every put; `commit` stores the body and throws ALREADY_EXISTS when the key is taken. */
export type PutHook = (key: string, commit: () => void, call: number) => Promise<void>;

export class MemoryObjectStore implements ObjectStore {
  readonly url = 'memory://wal-writer-test';
  readonly objects = new Map<string, Buffer>();
  /** Keys in the order their puts started, one entry per call. */
  readonly putKeys: string[] = [];
  onPut: PutHook = async (_key, commit) => commit();
  running = 0;
  maxRunning = 0;

  async put(
    key: string,
    body: Buffer | readonly Buffer[],
    options: ObjectStoreCallOptions = {},
  ): Promise<void> {
    const { signal } = options;
    throwIfAborted(signal, `put ${key}`, key);
    const call = this.putKeys.push(key);
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    try {
      const hook = this.onPut(
        key,
        () => {
          throwIfAborted(signal, `put ${key}`, key);
          if (this.objects.has(key)) {
            throw new ObjectStoreError('WALPROXY_ERR_STORE_ALREADY_EXISTS', `${key} already exists`, { key });
          }
          this.objects.set(key, Buffer.isBuffer(body) ? Buffer.from(body) : Buffer.concat(body));
        },
        call,
      );
      await (signal === undefined ? hook : abortable(hook, signal, key));
    } finally {
      this.running--;
    }
  }

  async get(key: string, range?: ByteRange, options: ObjectStoreCallOptions = {}): Promise<Buffer> {
    throwIfAborted(options.signal, `get ${key}`, key);
    const object = this.objects.get(key);
    if (object === undefined) throw new ObjectStoreError('WALPROXY_ERR_STORE_NOT_FOUND', key, { key });
    return range === undefined ? object : object.subarray(range.offset, range.offset + range.length);
  }

  async head(key: string, options: ObjectStoreCallOptions = {}): Promise<{ size: number } | undefined> {
    throwIfAborted(options.signal, `head ${key}`, key);
    const object = this.objects.get(key);
    return object === undefined ? undefined : { size: object.length };
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    for (const [key, object] of this.objects) {
      if (key.startsWith(prefix)) yield { key, size: object.length, lastModified: new Date(0) };
    }
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.objects.delete(key);
  }

  async validate(): Promise<void> {}

  async close(): Promise<void> {}
}

/** Settles with `work`, or rejects as aborted when the signal fires first (`work` keeps running). */
function abortable(work: Promise<void>, signal: AbortSignal, key: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(abortedError(signal, `put ${key}`, key));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** A promise the test settles by hand, to hold a put open. */
export interface Gate {
  promise: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

export function unreachable(key: string): ObjectStoreError {
  return new ObjectStoreError('WALPROXY_ERR_STORE_UNREACHABLE', `cannot reach the store for ${key}`, { key });
}
