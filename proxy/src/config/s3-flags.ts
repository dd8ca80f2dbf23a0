// The `--s3-*` flags and the operator commands' `--store-url`/`--prefix`, and their parsing into
// store options: `walproxy sidecar` (sidecar-config.ts) and the `walproxy wal` tools point at a
// store the same way.
import type { Argv } from 'yargs';
import type { ObjectStoreOptions } from '../store/open-object-store.js';
import {
  isDirectoryBucket,
  S3_SERVER_SIDE_ENCRYPTIONS,
  type S3ServerSideEncryption,
} from '../store/s3-names.js';
import { boolFlag, boolOption, type FlagErrorSink, flagText } from './flag-values.js';

/**
 * The S3 client flags, shared by `walproxy sidecar` and the `walproxy wal` tools so an operator
 * points both at a store the same way. Credentials are never flags: the AWS SDK's default chain.
 */
export function s3FlagOptions<T>(yargs: Argv<T>): Argv<T> {
  return yargs
    .option('s3-region', {
      type: 'string',
      describe: 'AWS region of the bucket (default: the SDK chain, AWS_REGION)',
    })
    .option('s3-endpoint', {
      type: 'string',
      describe: 'custom endpoint for S3-compatible servers, e.g. http://127.0.0.1:9000',
    })
    .option('s3-force-path-style', boolOption('path-style addressing for standard buckets (true/false)'))
    .option(
      's3-disable-express-session-auth',
      boolOption(
        'sign directory-bucket requests with plain SigV4 instead of CreateSession (emulators only; true/false)',
      ),
    );
}

export function parseS3Flags(raw: Record<string, unknown>, errors: FlagErrorSink): ObjectStoreOptions {
  const options: ObjectStoreOptions = {};
  const region = flagText(raw, 's3-region');
  if (region !== undefined) options.region = region;
  const endpoint = flagText(raw, 's3-endpoint');
  if (endpoint !== undefined) {
    try {
      new URL(endpoint);
      options.endpoint = endpoint;
    } catch {
      errors.add('s3-endpoint', `'${endpoint}' is not a URL (e.g. http://127.0.0.1:9000)`);
    }
  }
  const pathStyle = boolFlag(raw, 's3-force-path-style', errors);
  if (pathStyle !== undefined) options.forcePathStyle = pathStyle;
  const noSession = boolFlag(raw, 's3-disable-express-session-auth', errors);
  if (noSession !== undefined) options.disableS3ExpressSessionAuth = noSession;
  return options;
}

/**
 * Server-side encryption of the objects the sidecar writes. Only `walproxy sidecar` writes WAL
 * objects, so only it has these flags; reads need no header (S3 decrypts with the object's key,
 * given kms:Decrypt for SSE-KMS).
 */
export function s3EncryptionFlagOptions<T>(yargs: Argv<T>): Argv<T> {
  return yargs
    .option('s3-sse', {
      type: 'string',
      describe:
        "server-side encryption of WAL objects: none (the bucket's default encryption), AES256 (SSE-S3) or aws:kms (SSE-KMS)",
      default: 'none',
    })
    .option('s3-sse-kms-key-id', {
      type: 'string',
      describe:
        'with --s3-sse=aws:kms: KMS key id, key ARN or alias ARN (default: the AWS managed key aws/s3; required for directory buckets)',
    });
}

export function parseS3EncryptionFlags(
  raw: Record<string, unknown>,
  errors: FlagErrorSink,
  storeUrl: string,
): Pick<ObjectStoreOptions, 'serverSideEncryption' | 'sseKmsKeyId'> {
  const sse = flagText(raw, 's3-sse') ?? 'none';
  const keyId = flagText(raw, 's3-sse-kms-key-id');
  if (sse !== 'none' && !(S3_SERVER_SIDE_ENCRYPTIONS as readonly string[]).includes(sse)) {
    errors.add('s3-sse', `'${sse}' is not none, AES256 or aws:kms`);
    return {};
  }
  if (keyId !== undefined && sse !== 'aws:kms') {
    errors.add('s3-sse-kms-key-id', 'is used only with --s3-sse=aws:kms');
    return {};
  }
  if (sse === 'none') return {};
  const bucket = /^s3:\/\/([^/]+)/.exec(storeUrl)?.[1];
  if (sse === 'aws:kms' && keyId === undefined && bucket !== undefined) {
    if (isDirectoryBucket(bucket)) {
      errors.add(
        's3-sse-kms-key-id',
        `is required with --s3-sse=aws:kms on directory bucket ${bucket}: S3 Express One Zone takes only the key of the bucket's default encryption, named explicitly`,
      );
      return {};
    }
  }
  return {
    serverSideEncryption: sse as S3ServerSideEncryption,
    ...(keyId !== undefined ? { sseKmsKeyId: keyId } : {}),
  };
}

/** The object store flags, named as the sidecar names them (`--wal-store-url` is `--store-url` here). */
export function storeOptions<T>(yargs: Argv<T>, withPrefix = true): Argv<T> {
  const withStore = s3FlagOptions(yargs).option('store-url', {
    type: 'string',
    describe: 'where the WAL objects are, as the sidecars were given it: s3://bucket/prefix or file:///dir',
  });
  if (!withPrefix) return withStore;
  return withStore.option('prefix', {
    type: 'string',
    describe: "only keys starting with this (relative to the store URL), e.g. '2026/01/02/'",
    default: '',
  });
}

export interface StoreFlags {
  url: string;
  options: ObjectStoreOptions;
  prefix: string;
}

/** Credentials come from the AWS SDK's default chain; they are never flags. */
export function parseStoreFlags(raw: Record<string, unknown>, errors: FlagErrorSink): StoreFlags | undefined {
  const url = flagText(raw, 'store-url');
  if (url === undefined) errors.add('store-url', 'is required (s3://bucket/prefix or file:///dir)');
  else if (!/^(s3|file):\/\//.test(url))
    errors.add('store-url', `'${url}' is not s3://bucket/prefix or file:///dir`);
  const options = parseS3Flags(raw, errors);
  const prefix = flagText(raw, 'prefix') ?? '';
  if (prefix.startsWith('/') || prefix.includes('//'))
    errors.add('prefix', `'${prefix}' must not start with "/" or contain "//"`);
  return url === undefined ? undefined : { url, options, prefix };
}
