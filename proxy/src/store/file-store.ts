import { randomBytes } from 'node:crypto';
import { type FileHandle, link, mkdir, open, opendir, rmdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { ObjectStoreError } from './errors.js';
import {
  assertValidKey,
  assertValidPrefix,
  assertValidRange,
  type ByteRange,
  type ObjectInfo,
  type ObjectStore,
  type ObjectStoreCallOptions,
  throwIfAborted,
} from './object-store.js';

export interface FileStoreOptions {
  /**
   * fsync each object and its directory before put resolves, so an acknowledged object survives a
   * machine crash, not only a process crash. Off by default: it costs a disk flush per object.
   */
  fsync?: boolean;
}

/** Names that start with this are in-progress writes: never listed, and refused as key segments. */
const TEMP_PREFIX = '.walproxy-tmp-';

/**
 * Objects as files under one directory (local disk, NFS, EBS multi-attach); `/` in keys makes
 * subdirectories. A put writes a temporary file beside the target and publishes it with link(2),
 * which, unlike rename(2), fails with EEXIST instead of replacing an existing file: publishing is
 * atomic and never overwrites.
 */
export class FileObjectStore implements ObjectStore {
  readonly url: string;
  readonly #root: string;
  readonly #fsync: boolean;
  /** Fired by close(): calls in flight stop at their next step. */
  readonly #closing = new AbortController();

  constructor(url: string, root: string, options: FileStoreOptions = {}) {
    this.url = url;
    this.#root = resolve(root);
    this.#fsync = options.fsync ?? false;
  }

  async put(
    key: string,
    body: Buffer | readonly Buffer[],
    options: ObjectStoreCallOptions = {},
  ): Promise<void> {
    this.#assertKey(key);
    this.#checkAborted(options.signal, 'put', key);
    const path = this.#path(key);
    const dir = dirname(path);
    const temp = join(dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
    try {
      await this.#writeTemp(dir, temp, Buffer.isBuffer(body) ? [body] : body);
      // The last point where an aborted put can still leave nothing behind.
      this.#checkAborted(options.signal, 'put', key);
      try {
        await link(temp, path);
      } catch (err) {
        if (errnoCode(err) === 'EEXIST') {
          throw new ObjectStoreError(
            'WALPROXY_ERR_STORE_ALREADY_EXISTS',
            `${this.#describe(key)} already exists`,
            {
              key,
            },
          );
        }
        throw err;
      }
      if (this.#fsync) await syncDirectory(dir);
    } catch (err) {
      throw this.#wrap(err, 'put', key);
    } finally {
      await unlink(temp).catch(() => undefined);
    }
  }

  async get(key: string, range?: ByteRange, options: ObjectStoreCallOptions = {}): Promise<Buffer> {
    this.#assertKey(key);
    if (range !== undefined) assertValidRange(key, range);
    this.#checkAborted(options.signal, 'get', key);
    let file: FileHandle | undefined;
    try {
      file = await open(this.#path(key), 'r');
      const { size } = await file.stat();
      const offset = range?.offset ?? 0;
      const length = range?.length ?? size;
      if (offset + length > size) {
        throw new ObjectStoreError(
          'WALPROXY_ERR_STORE_INVALID_RANGE',
          `${this.#describe(key)} has ${size} bytes; cannot read ${length} at offset ${offset}`,
          { key },
        );
      }
      const out = Buffer.allocUnsafe(length);
      let done = 0;
      while (done < length) {
        this.#checkAborted(options.signal, 'get', key);
        const { bytesRead } = await file.read(out, done, length - done, offset + done);
        if (bytesRead === 0) {
          throw new ObjectStoreError(
            'WALPROXY_ERR_STORE_OTHER',
            `${this.#describe(key)} shrank while being read`,
            {
              key,
            },
          );
        }
        done += bytesRead;
      }
      return out;
    } catch (err) {
      throw this.#wrap(err, 'get', key);
    } finally {
      await file?.close();
    }
  }

  async head(key: string, options: ObjectStoreCallOptions = {}): Promise<{ size: number } | undefined> {
    this.#assertKey(key);
    this.#checkAborted(options.signal, 'head', key);
    try {
      const info = await stat(this.#path(key));
      return info.isFile() ? { size: info.size } : undefined;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return undefined;
      throw this.#wrap(err, 'head', key);
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    assertValidPrefix(prefix);
    // Walk only the deepest directory the prefix names completely; the rest of it filters names.
    const slash = prefix.lastIndexOf('/');
    const base = prefix.slice(0, slash + 1);
    const start = base === '' ? this.#root : this.#path(base.slice(0, -1));
    yield* this.#walk(start, base, prefix);
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.#assertKey(key);
    for (const key of keys) {
      try {
        await unlink(this.#path(key));
      } catch (err) {
        if (errnoCode(err) === 'ENOENT') continue;
        throw this.#wrap(err, 'delete', key);
      }
      await this.#removeEmptyParents(dirname(this.#path(key)));
    }
  }

  async validate(): Promise<void> {
    try {
      const info = await stat(this.#root);
      if (!info.isDirectory()) {
        throw new ObjectStoreError(
          'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
          `${this.url}: ${this.#root} is not a directory`,
        );
      }
    } catch (err) {
      throw this.#wrap(err, 'validate');
    }
    const probe = `.walproxy-validate-${randomBytes(8).toString('hex')}`;
    await this.put(probe, Buffer.from('walproxy startup check\n'));
    await this.delete([probe]);
  }

  async close(): Promise<void> {
    // Every operation opens and closes its own files; there is nothing else to release.
    this.#closing.abort(new Error('the store was closed'));
  }

  /** A single filesystem call cannot be interrupted, so a signal is honoured between them. */
  #checkAborted(signal: AbortSignal | undefined, op: string, key: string): void {
    throwIfAborted(this.#closing.signal, `${op} ${this.#describe(key)}`, key);
    throwIfAborted(signal, `${op} ${this.#describe(key)}`, key);
  }

  async #writeTemp(dir: string, temp: string, chunks: readonly Buffer[]): Promise<void> {
    let file: FileHandle;
    try {
      file = await open(temp, 'wx');
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
      // The key's directory is new, or a concurrent delete just removed it as empty: make it again,
      // but never the root itself, so a mistyped store path fails instead of growing a new tree.
      await stat(this.#root);
      await mkdir(dir, { recursive: true });
      file = await open(temp, 'wx');
    }
    try {
      await writeAll(file, chunks);
      if (this.#fsync) await file.sync();
    } finally {
      await file.close();
    }
  }

  async *#walk(dir: string, dirKey: string, prefix: string): AsyncIterable<ObjectInfo> {
    let entries: Awaited<ReturnType<typeof opendir>>;
    try {
      entries = await opendir(dir);
    } catch (err) {
      // A prefix naming no directory lists nothing; a missing root is an error, as a missing bucket is.
      if ((errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') && dir !== this.#root) return;
      throw this.#wrap(err, 'list');
    }
    for await (const entry of entries) {
      if (entry.name.startsWith(TEMP_PREFIX)) continue;
      const key = dirKey + entry.name;
      if (entry.isDirectory()) {
        // The walk starts in the prefix's last complete directory, so only its final, partial
        // segment is left to match.
        if (`${key}/`.startsWith(prefix)) {
          yield* this.#walk(join(dir, entry.name), `${key}/`, prefix);
        }
      } else if (entry.isFile() && key.startsWith(prefix)) {
        try {
          const info = await stat(join(dir, entry.name));
          yield { key, size: info.size, lastModified: info.mtime };
        } catch (err) {
          // Deleted between readdir and stat: it is simply no longer there.
          if (errnoCode(err) !== 'ENOENT') throw this.#wrap(err, 'list', key);
        }
      }
    }
  }

  /** S3 Express drops empty "directories" with their last object; do the same so gc leaves no husks. */
  async #removeEmptyParents(dir: string): Promise<void> {
    while (dir.length > this.#root.length && dir.startsWith(this.#root + sep)) {
      try {
        await rmdir(dir);
      } catch {
        // Not empty (or already gone, or in use): stop climbing.
        return;
      }
      dir = dirname(dir);
    }
  }

  #assertKey(key: string): void {
    assertValidKey(key);
    if (key.split('/').some((segment) => segment.startsWith(TEMP_PREFIX))) {
      throw new ObjectStoreError(
        'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
        `invalid object key ${JSON.stringify(key)}: segments starting with "${TEMP_PREFIX}" are reserved`,
        { key },
      );
    }
  }

  #path(key: string): string {
    return join(this.#root, ...key.split('/'));
  }

  #describe(key: string): string {
    return `${this.url} key ${JSON.stringify(key)}`;
  }

  #wrap(err: unknown, op: string, key?: string): ObjectStoreError {
    if (err instanceof ObjectStoreError) return err;
    const code = errnoCode(err);
    const where = key === undefined ? this.url : this.#describe(key);
    const what = `${op} ${where} failed: ${err instanceof Error ? err.message : String(err)}`;
    const options = { key, cause: err };
    switch (code) {
      case 'ENOENT':
        return op === 'get'
          ? new ObjectStoreError('WALPROXY_ERR_STORE_NOT_FOUND', `${where} does not exist`, options)
          : new ObjectStoreError(
              'WALPROXY_ERR_STORE_NO_SUCH_BUCKET',
              `${op} failed: directory ${this.#root} does not exist`,
              options,
            );
      case 'ENOTDIR':
        return new ObjectStoreError(
          op === 'get' ? 'WALPROXY_ERR_STORE_NOT_FOUND' : 'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
          what,
          options,
        );
      case 'EACCES':
      case 'EPERM':
      case 'EROFS':
        return new ObjectStoreError('WALPROXY_ERR_STORE_ACCESS_DENIED', what, options);
      case 'ESTALE':
      case 'ETIMEDOUT':
      case 'EHOSTDOWN':
      case 'EHOSTUNREACH':
        // NFS server gone or restarted.
        return new ObjectStoreError('WALPROXY_ERR_STORE_UNREACHABLE', what, options);
      case 'ENOSPC':
      case 'EDQUOT':
      case 'EIO':
      case 'EAGAIN':
      case 'EBUSY':
      case 'EMFILE':
      case 'ENFILE':
        return new ObjectStoreError('WALPROXY_ERR_STORE_OTHER', what, { ...options, retriable: true });
      default:
        return new ObjectStoreError('WALPROXY_ERR_STORE_OTHER', what, options);
    }
  }
}

/** writev may write fewer bytes than asked (and at most IOV_MAX buffers at once): go on until done. */
async function writeAll(file: FileHandle, chunks: readonly Buffer[]): Promise<void> {
  let pending = chunks.filter((chunk) => chunk.length > 0);
  while (pending.length > 0) {
    let { bytesWritten } = await file.writev(pending);
    let i = 0;
    while (i < pending.length && bytesWritten >= pending[i]!.length) {
      bytesWritten -= pending[i]!.length;
      i++;
    }
    pending = pending.slice(i);
    if (bytesWritten > 0 && pending.length > 0) pending[0] = pending[0]!.subarray(bytesWritten);
  }
}

/** The new directory entry is only durable once the directory itself is flushed. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}
