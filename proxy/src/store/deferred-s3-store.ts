// An S3 store whose AWS SDK is loaded on first use. The SDK is the largest part of the sidecar's
// code (~1.4 MB of the bundle), and evaluating it took ~0.6 s of a start on the loaded test machine
// — time a restarting sidecar's clients wait before its listeners open (issue #12: ready within
// 2 s, store or no store). The sidecar builds its store before it opens its listeners; the first
// call, the store health probe right after they open, loads the SDK (a separate chunk of the
// bundle, never parsed before) and builds the real S3ObjectStore. Until then the store is not yet
// known usable, and WAL topics replicate inline, as for any store not yet probed.
import type { ByteRange, ObjectInfo, ObjectStore, ObjectStoreCallOptions } from './object-store.js';
import type { S3ObjectStore, S3StoreOptions } from './s3-store.js';

export class DeferredS3ObjectStore implements ObjectStore {
  #store: Promise<S3ObjectStore> | undefined;
  #closed = false;

  constructor(
    readonly url: string,
    readonly bucket: string,
    /** `''` or a prefix ending in `/`, prepended to every key. */
    readonly keyPrefix: string,
    private readonly options: S3StoreOptions = {},
  ) {}

  /** The real store, loading the SDK the first time. */
  loaded(): Promise<S3ObjectStore> {
    this.#store ??= import('./s3-store.js').then(
      ({ S3ObjectStore }) => new S3ObjectStore(this.url, this.bucket, this.keyPrefix, this.options),
    );
    return this.#store;
  }

  async put(key: string, body: Buffer | readonly Buffer[], options?: ObjectStoreCallOptions): Promise<void> {
    return (await this.#open()).put(key, body, options);
  }

  async get(key: string, range?: ByteRange, options?: ObjectStoreCallOptions): Promise<Buffer> {
    return (await this.#open()).get(key, range, options);
  }

  async head(key: string, options?: ObjectStoreCallOptions): Promise<{ size: number } | undefined> {
    return (await this.#open()).head(key, options);
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    yield* (await this.#open()).list(prefix);
  }

  async delete(keys: readonly string[]): Promise<void> {
    return (await this.#open()).delete(keys);
  }

  async validate(): Promise<void> {
    return (await this.#open()).validate();
  }

  /** Closes the real store if it was ever built; calls after this reject as the real one's do. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#store === undefined) return;
    await (await this.#store).close();
  }

  async #open(): Promise<S3ObjectStore> {
    const store = await this.loaded();
    // A store closed while the SDK loaded must still refuse the call (and release nothing twice).
    if (this.#closed) await store.close();
    return store;
  }
}
