export {
  type WalAppendEntry,
  type WalAppendResult,
  WalObjectBuilder,
  type WalObjectBuilderOptions,
} from './builder.js';
export {
  WAL_ERROR_CODES,
  WAL_ERROR_PREFIX,
  WalFormatError,
  type WalFormatErrorCode,
  type WalFormatErrorKind,
} from './errors.js';
export {
  WAL_FORMAT_VERSION,
  WAL_HEADER_SIZE,
  WAL_INDEX_ENTRY_SIZE,
  WAL_MAGIC,
  WAL_TRAILER_SIZE,
  type WalHeader,
  type WalIndexEntry,
  type WalObject,
  type WalTrailer,
  ZERO_TOPIC_ID,
} from './format.js';
export {
  batchBodyRange,
  type ParseWalObjectOptions,
  parseFooter,
  parseWalObject,
  readHeader,
  readTrailer,
} from './reader.js';
