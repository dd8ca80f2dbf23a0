// The `--s3-*` flags and their parsing into store options. They live beside the store they
// configure, so that `config.ts` (the sidecar) and `tools/` (the operator commands) both take
// them from the store layer instead of from `cli/`.
import type { Argv } from 'yargs';
import type { ObjectStoreOptions } from './open-object-store.js';
import { isDirectoryBucket, S3_SERVER_SIDE_ENCRYPTIONS, type S3ServerSideEncryption } from './s3-names.js';

/** How flag parsers collect errors: one line per bad setting, named by flag. */
export interface FlagErrorSink {
  add(flag: string, message: string): void;
}

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
    .option('s3-force-path-style', {
      type: 'string',
      describe: 'path-style addressing for standard buckets (true/false)',
    })
    .option('s3-disable-express-session-auth', {
      type: 'string',
      describe:
        'sign directory-bucket requests with plain SigV4 instead of CreateSession (emulators only; true/false)',
    });
}

function present(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

function lastText(value: unknown): string {
  return Array.isArray(value) ? String(value.at(-1)) : String(value);
}

function bool(raw: Record<string, unknown>, flag: string, errors: FlagErrorSink): boolean | undefined {
  if (!present(raw[flag])) return undefined;
  const text = lastText(raw[flag]);
  if (text === 'true') return true;
  if (text === 'false') return false;
  errors.add(flag, `'${text}' is not true or false`);
  return undefined;
}

export function parseS3Flags(raw: Record<string, unknown>, errors: FlagErrorSink): ObjectStoreOptions {
  const options: ObjectStoreOptions = {};
  if (present(raw['s3-region'])) options.region = lastText(raw['s3-region']);
  if (present(raw['s3-endpoint'])) {
    const endpoint = lastText(raw['s3-endpoint']);
    try {
      new URL(endpoint);
      options.endpoint = endpoint;
    } catch {
      errors.add('s3-endpoint', `'${endpoint}' is not a URL (e.g. http://127.0.0.1:9000)`);
    }
  }
  const pathStyle = bool(raw, 's3-force-path-style', errors);
  if (pathStyle !== undefined) options.forcePathStyle = pathStyle;
  const noSession = bool(raw, 's3-disable-express-session-auth', errors);
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
  const sse = present(raw['s3-sse']) ? lastText(raw['s3-sse']) : 'none';
  const keyId = present(raw['s3-sse-kms-key-id']) ? lastText(raw['s3-sse-kms-key-id']) : undefined;
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
