// What the WalWriter publishes on node:diagnostics_channel. A telemetry layer subscribes and maps
// these to OpenTelemetry spans and metrics (as undici does for HTTP), so the writer depends on no
// SDK and costs nothing when nobody listens: payloads are built only when a channel has subscribers.
import type { WalWriteError, WalWriteErrorKind } from './errors.js';

export const WAL_WRITER_CHANNELS = {
  /** An object was sealed and queued for upload: WalSealEvent. */
  seal: 'walproxy:wal:seal',
  /** An upload got a slot and makes its first attempt: WalUploadStartEvent. */
  uploadStart: 'walproxy:wal:upload:start',
  /** One attempt (a put, plus a head after ALREADY_EXISTS) ended: WalUploadAttemptEvent. */
  uploadAttempt: 'walproxy:wal:upload:attempt',
  /** The object's tickets were settled, stored or failed: WalUploadEndEvent. */
  uploadEnd: 'walproxy:wal:upload:end',
  /** append() refused a batch (OVERLOADED or CLOSED): WalAppendRefusedEvent. */
  appendRefused: 'walproxy:wal:append:refused',
} as const;

/** What the WalRangeReader (the follower side's GETs) publishes. */
export const WAL_READER_CHANNELS = {
  /** One GET to the store ended, with its bytes or its error: WalReaderGetEvent. */
  get: 'walproxy:wal:reader:get',
} as const;

export interface WalReaderGetEvent {
  /** The store read (its URL), for GETs of a peer zone's store. */
  store: string;
  objectKey: string;
  /** Whole object (no Range header) or a byte range. */
  whole: boolean;
  bytes: number;
  /** From the request to the last body byte; queueing for a GET slot excluded. */
  durationMs: number;
  outcome: 'ok' | 'error';
}

/** `producers_waiting`: before its linger ended, every producer that could add to it waiting for it. */
export type WalSealReason = 'size' | 'linger' | 'producers_waiting' | 'flush';

export interface WalSealEvent {
  objectKey: string;
  size: number;
  batchCount: number;
  reason: WalSealReason;
  /** Milliseconds from the object's first batch to its seal. */
  ageMs: number;
}

export interface WalUploadStartEvent {
  objectKey: string;
  size: number;
  batchCount: number;
  /** Milliseconds the sealed object waited for an upload slot. */
  queuedMs: number;
}

export interface WalUploadAttemptEvent {
  objectKey: string;
  /** 1 for the first attempt. */
  attempt: number;
  durationMs: number;
  /** Undefined when the attempt stored the object. */
  error: unknown;
  /** Whether the error allows another attempt (false also when the deadline ended the attempt). */
  retriable: boolean;
  /** The wait before the next attempt, when there is one. */
  backoffMs: number | undefined;
  /** The put met ALREADY_EXISTS and a head found an object of this size: an earlier attempt had stored it. */
  alreadyStored: boolean;
}

export interface WalUploadEndEvent {
  objectKey: string;
  size: number;
  batchCount: number;
  attempts: number;
  /** Milliseconds from seal to settlement, queueing included: what a durable ack waited after the seal. */
  durationMs: number;
  /** Undefined when the object was stored. */
  error: WalWriteError | undefined;
}

export interface WalAppendRefusedEvent {
  kind: Exclude<WalWriteErrorKind, 'UPLOAD_FAILED'>;
  batchBytes: number;
  pendingBytes: number;
}
