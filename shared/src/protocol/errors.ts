// Every failure of the wire layer is a ProtocolError with a stable code, so the proxy can close the
// connection with a precise reason (invariant 6: bad input gets a clear error, never a crash).

const KINDS = [
  // Fewer bytes left than the field needs, or a length/count larger than what is left.
  'TRUNCATED',
  // A length or count that no encoder produces (e.g. -2, or -1 where null is not allowed).
  'INVALID_LENGTH',
  // A varint longer than its type allows, or with redundant trailing zero groups.
  'INVALID_VARINT',
  'INVALID_UTF8',
  'INVALID_BOOLEAN',
  // Tagged fields must be written in strictly ascending tag order (KIP-482).
  'TAG_ORDER',
  // A known tagged field whose declared size does not match its content.
  'TAG_SIZE',
  // Bytes left after the message: a decoder consumes its input exactly, which is what makes
  // re-encoding byte-exact.
  'TRAILING_BYTES',
  'UNSUPPORTED_VERSION',
  'UNKNOWN_API_KEY',
  // A record batch that is not magic v2 or whose length is impossible.
  'CORRUPT_RECORD_BATCH',
  // Encoding: a message object that cannot be written at this version.
  'INVALID_VALUE',
] as const;

export type ProtocolErrorKind = (typeof KINDS)[number];

export const PROTOCOL_ERROR_PREFIX = 'WALPROXY_ERR_';

export type ProtocolErrorCode = `${typeof PROTOCOL_ERROR_PREFIX}${ProtocolErrorKind}`;

/** The stable codes, as data: `PROTOCOL_ERROR_CODES.TRUNCATED === 'WALPROXY_ERR_TRUNCATED'`. */
export const PROTOCOL_ERROR_CODES = Object.freeze(
  Object.fromEntries(KINDS.map((k) => [k, `${PROTOCOL_ERROR_PREFIX}${k}`])),
) as { readonly [K in ProtocolErrorKind]: `${typeof PROTOCOL_ERROR_PREFIX}${K}` };

/** Where a decode or encode failed. */
export interface ProtocolErrorSite {
  /** Kafka message name, e.g. `FetchResponse`, `RequestHeader`, `RecordBatch`. */
  readonly api: string;
  /** Message version, or -1 where versions do not apply. */
  readonly version: number;
  /** Kafka field name, e.g. `Records`, `TopicId`. */
  readonly field: string;
  /** Byte offset within the buffer being decoded (or written) when the error happened. */
  readonly offset: number;
}

export class ProtocolError extends Error implements ProtocolErrorSite {
  override readonly name = 'ProtocolError';
  readonly code: ProtocolErrorCode;
  readonly api: string;
  readonly version: number;
  readonly field: string;
  readonly offset: number;

  constructor(kind: ProtocolErrorKind, site: ProtocolErrorSite, detail: string) {
    const code = PROTOCOL_ERROR_CODES[kind];
    const where = site.version >= 0 ? `${site.api} v${site.version}` : site.api;
    super(`${code}: ${where} field ${site.field} at byte ${site.offset}: ${detail}`);
    this.code = code;
    this.api = site.api;
    this.version = site.version;
    this.field = site.field;
    this.offset = site.offset;
  }
}
