import { fileURLToPath } from 'node:url';
import { DeferredS3ObjectStore } from './deferred-s3-store.js';
import { ObjectStoreError } from './errors.js';
import { FileObjectStore, type FileStoreOptions } from './file-store.js';
import type { ObjectStore } from './object-store.js';
import type { S3StoreOptions } from './s3-store.js';

/** Options for every backend; each backend reads the ones that concern it. */
export type ObjectStoreOptions = FileStoreOptions & S3StoreOptions;

/** S3 bucket naming rules (general purpose and directory buckets): 3–63 of [a-z0-9.-], alnum at both ends. */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/**
 * Opens the store a URL names: `file:///absolute/dir` or `s3://bucket[/prefix]`. Does no I/O; call
 * `validate()` to check at startup that the location exists, answers, and takes a write.
 */
export function openObjectStore(url: string, options: ObjectStoreOptions = {}): ObjectStore {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalidUrl(url, 'not a URL; expected file:///dir or s3://bucket/prefix');
  }
  if (parsed.search !== '' || parsed.hash !== '')
    throw invalidUrl(url, 'query strings and fragments are not used');
  switch (parsed.protocol) {
    case 'file:': {
      if (parsed.host !== '')
        throw invalidUrl(url, `file URLs name a local path; remove the host "${parsed.host}"`);
      const root = fileURLToPath(parsed).replace(/\/+$/, '');
      if (root === '') throw invalidUrl(url, 'the filesystem root cannot be a store');
      return new FileObjectStore(url, root, options);
    }
    case 's3:': {
      const bucket = parsed.hostname;
      if (!BUCKET_NAME.test(bucket)) {
        throw invalidUrl(
          url,
          `"${bucket}" is not a valid bucket name (3-63 lowercase letters, digits, "." or "-")`,
        );
      }
      if (parsed.port !== '' || parsed.username !== '' || parsed.password !== '') {
        throw invalidUrl(url, 'give the endpoint and credentials as options, not in the s3:// URL');
      }
      const prefix = decodeURIComponent(parsed.pathname).replace(/^\/+/, '');
      // The SDK loads on the store's first call (deferred-s3-store.ts: start is not kept waiting).
      return new DeferredS3ObjectStore(
        url,
        bucket,
        prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`,
        options,
      );
    }
    default:
      throw invalidUrl(url, `unsupported scheme "${parsed.protocol}"; expected file: or s3:`);
  }
}

function invalidUrl(url: string, why: string): ObjectStoreError {
  return new ObjectStoreError(
    'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
    `invalid object store URL ${JSON.stringify(url)}: ${why}`,
  );
}
