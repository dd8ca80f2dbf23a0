export {
  WAL_READER_CHANNELS,
  WAL_WRITER_CHANNELS,
  type WalAppendRefusedEvent,
  type WalReaderGetEvent,
  type WalSealEvent,
  type WalSealReason,
  type WalUploadAttemptEvent,
  type WalUploadEndEvent,
  type WalUploadStartEvent,
} from './channels.js';
export {
  isWalWriteError,
  WAL_WRITE_ERROR_CODES,
  WalWriteError,
  type WalWriteErrorCode,
  type WalWriteErrorKind,
  type WalWriteErrorOptions,
} from './errors.js';
export {
  assertValidKeyPrefix,
  parseWalObjectKey,
  type WalObjectKeyParts,
  walHourPrefix,
} from './object-key.js';
export { ProducerWaits, type ProducerWaitsStats, type WaitingBatch } from './producer-waits.js';
export {
  WAL_WRITER_DEFAULTS,
  WAL_WRITER_LIMITS,
  type WalAppendOptions,
  type WalAppendTicket,
  type WalLocation,
  WalWriter,
  type WalWriterOptions,
  type WalWriterStats,
} from './wal-writer.js';
