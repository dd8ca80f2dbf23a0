// Every problem with a WAL object's bytes, or with what a writer tried to put in one, is a
// WalFormatError with a stable code, so tools and the follower side can tell corruption (retry
// elsewhere, fall back to inline replication) from a writer bug.

/** Same fixed prefix as the wire layer's codes (PROTOCOL_ERROR_PREFIX), then the WAL's own. */
export const WAL_ERROR_PREFIX = 'WALPROXY_ERR_WAL_';

const KINDS = [
  // Reading: the bytes do not start (header) or end (trailer) with the WAL magic.
  'BAD_MAGIC',
  // A format version this reader does not know.
  'UNSUPPORTED_VERSION',
  // Fewer bytes than a header, trailer or footer field needs, or than the trailer says.
  'TRUNCATED',
  'HEADER_CRC_MISMATCH',
  'FOOTER_CRC_MISMATCH',
  // The footer's index contradicts itself or the object: an entry past the body's end, a gap or
  // overlap between batches, a topic index out of range, bytes left over.
  'BAD_INDEX',
  // A batch's bytes do not match the CRC-32C its index entry records.
  'BATCH_CRC_MISMATCH',
  // Writing: the bytes given as one batch are not exactly one magic v2 record batch.
  'INVALID_BATCH',
  // Writing: a topic id, topic name, partition or header field no reader could decode.
  'INVALID_ENTRY',
  // Writing: positions are 32-bit, so an object stops at 4 GiB.
  'OBJECT_TOO_LARGE',
  // Writing: append or seal on a builder that was already sealed.
  'BUILDER_SEALED',
  // Writing: sealing a builder with no batch; an empty object is never uploaded.
  'EMPTY_OBJECT',
] as const;

export type WalFormatErrorKind = (typeof KINDS)[number];
export type WalFormatErrorCode = `${typeof WAL_ERROR_PREFIX}${WalFormatErrorKind}`;

/** The stable codes, as data: `WAL_ERROR_CODES.BAD_MAGIC === 'WALPROXY_ERR_WAL_BAD_MAGIC'`. */
export const WAL_ERROR_CODES = Object.freeze(
  Object.fromEntries(KINDS.map((k) => [k, `${WAL_ERROR_PREFIX}${k}`])),
) as { readonly [K in WalFormatErrorKind]: `${typeof WAL_ERROR_PREFIX}${K}` };

export class WalFormatError extends Error {
  override readonly name = 'WalFormatError';
  readonly kind: WalFormatErrorKind;
  readonly code: WalFormatErrorCode;
  /** Byte offset in the object (or in the buffer being read) where the problem was found, if any. */
  readonly offset: number | undefined;

  constructor(kind: WalFormatErrorKind, message: string, offset?: number) {
    super(`${message}${offset === undefined ? '' : ` (at byte ${offset})`}`);
    this.kind = kind;
    this.code = WAL_ERROR_CODES[kind];
    this.offset = offset;
  }
}
