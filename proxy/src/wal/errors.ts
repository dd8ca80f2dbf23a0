// Why a batch handed to the WalWriter did not become durable. The Produce path turns every one of
// these into a retriable Kafka error for the partition (durable ack), never into a success.
import { WAL_ERROR_PREFIX } from '@walproxy/shared';

const KINDS = [
  // The object holding the batch could not be stored: a non-retriable store error, or the upload
  // deadline passed. The object may still appear in the store later (an attempt that was abandoned
  // at the deadline can finish), but it was never acknowledged, so nothing refers to it.
  'UPLOAD_FAILED',
  // Refused at append: the writer already holds maxPendingBytes of batches that are not yet stored.
  'OVERLOADED',
  // Refused at append: close() was called (also: a tentative batch still waiting at close).
  'CLOSED',
  // A tentative batch the broker refused (its partition's Produce answer was an error): never stored.
  'NOT_APPENDED',
  // A tentative batch neither confirmed nor refused within confirmTimeoutMs (acks=0 to a topic no
  // follower fetches through the WAL, a connection the broker closed): never stored.
  'UNCONFIRMED',
  // The sealing policy did not upload the object holding the batch: at its deadline it held too
  // few bytes to save more than its requests cost (docs/cost.md). Followers get the batch inline.
  'BELOW_BREAK_EVEN',
] as const;

export type WalWriteErrorKind = (typeof KINDS)[number];
export type WalWriteErrorCode = `${typeof WAL_ERROR_PREFIX}${WalWriteErrorKind}`;

/** The stable codes, as data: `WAL_WRITE_ERROR_CODES.OVERLOADED === 'WALPROXY_ERR_WAL_OVERLOADED'`. */
export const WAL_WRITE_ERROR_CODES = Object.freeze(
  Object.fromEntries(KINDS.map((k) => [k, `${WAL_ERROR_PREFIX}${k}`])),
) as { readonly [K in WalWriteErrorKind]: `${typeof WAL_ERROR_PREFIX}${K}` };

export interface WalWriteErrorOptions {
  /** The object the batch was in (UPLOAD_FAILED). */
  objectKey?: string;
  /** Store calls made for that object (UPLOAD_FAILED). */
  attempts?: number;
  /** True when the upload deadline ended the upload rather than a non-retriable error. */
  deadlineExceeded?: boolean;
  /** The last store error, when there was one. */
  cause?: unknown;
}

export class WalWriteError extends Error {
  override readonly name = 'WalWriteError';
  readonly kind: WalWriteErrorKind;
  readonly code: WalWriteErrorCode;
  readonly objectKey: string | undefined;
  readonly attempts: number;
  readonly deadlineExceeded: boolean;

  constructor(kind: WalWriteErrorKind, message: string, options: WalWriteErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.code = WAL_WRITE_ERROR_CODES[kind];
    this.objectKey = options.objectKey;
    this.attempts = options.attempts ?? 0;
    this.deadlineExceeded = options.deadlineExceeded ?? false;
  }
}

export function isWalWriteError(err: unknown, kind?: WalWriteErrorKind): err is WalWriteError {
  return err instanceof WalWriteError && (kind === undefined || err.kind === kind);
}
