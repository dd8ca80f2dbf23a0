// WAL object format v1 (docs/wal-format.md has the byte tables). All integers big-endian, as in
// the Kafka protocol.
//
//   [header 28 B][batch][batch]...[batch][footer][trailer 22 B]
//
//   header   magic "WALPROXY" | version u16 | header length u16 | writer broker id i32 |
//            created at ms i64 | CRC-32C u32 of the 24 bytes before it
//   body     record batches of any partitions, each exactly as produced (the whole magic v2
//            batch, its 61-byte header included), back to back in index order
//   footer   topic count u32 | topics (id 16 B, name length u16, name UTF-8) |
//            entry count u32 | entries (42 B each, fixed size)
//   trailer  footer position u32 | footer length u32 | footer CRC-32C u32 | version u16 |
//            magic "WALPROXY"
//
// A batch, or a batch's records (position + 61 .. position + length), is one range read: only
// finding batches needs the footer, and the fixed-size trailer at the very end finds the footer.

/** Opens the header and closes the trailer, so both ends of an object identify it. */
export const WAL_MAGIC: Buffer = Buffer.from('WALPROXY', 'latin1');
export const WAL_FORMAT_VERSION = 1;

export const WAL_HEADER_SIZE = 28;
export const WAL_TRAILER_SIZE = 22;
export const WAL_INDEX_ENTRY_SIZE = 42;
/** Fixed part of a topic table row: the 16-byte id and the name's u16 length. */
export const WAL_TOPIC_FIXED_SIZE = 18;
/** A footer with no topic and no entry: the two counts. */
export const WAL_EMPTY_FOOTER_SIZE = 8;
/** Positions and lengths are u32. */
export const WAL_MAX_OBJECT_SIZE = 0xffff_ffff;

/** Kafka's Uuid.ZERO_UUID, written when a batch's topic is known only by name (Produce v3–v12). */
export const ZERO_TOPIC_ID = '0'.repeat(32);

// Header field offsets.
export const HEADER_VERSION = 8;
export const HEADER_LENGTH = 10;
export const HEADER_BROKER_ID = 12;
export const HEADER_CREATED_AT = 16;
export const HEADER_CRC = 24;

// Trailer field offsets, from the trailer's start.
export const TRAILER_FOOTER_POSITION = 0;
export const TRAILER_FOOTER_LENGTH = 4;
export const TRAILER_FOOTER_CRC = 8;
export const TRAILER_VERSION = 12;
export const TRAILER_MAGIC = 14;

// Index entry field offsets, from the entry's start.
export const ENTRY_TOPIC_INDEX = 0;
export const ENTRY_PARTITION = 4;
export const ENTRY_POSITION = 8;
export const ENTRY_LENGTH = 12;
export const ENTRY_CRC = 16;
export const ENTRY_PRODUCER_ID = 20;
export const ENTRY_PRODUCER_EPOCH = 28;
export const ENTRY_BASE_SEQUENCE = 30;
export const ENTRY_RECORD_COUNT = 34;
export const ENTRY_LAST_OFFSET_DELTA = 38;

// The magic v2 record batch fields the index copies (DefaultRecordBatch.java).
export const BATCH_HEADER_SIZE = 61;
/** BaseOffset + Length: the bytes before the part that Length counts. */
export const BATCH_LOG_OVERHEAD = 12;
export const BATCH_LENGTH = 8;
export const BATCH_MAGIC = 16;
/** The batch CRC covers the batch from its attributes (byte 21) to the end. */
export const BATCH_CRC_START = 21;
export const BATCH_LAST_OFFSET_DELTA = 23;
export const BATCH_PRODUCER_ID = 43;
export const BATCH_PRODUCER_EPOCH = 51;
export const BATCH_BASE_SEQUENCE = 53;
export const BATCH_RECORD_COUNT = 57;
export const BATCH_MAGIC_V2 = 2;

export interface WalHeader {
  formatVersion: number;
  /** The broker whose sidecar wrote the object. */
  writerBrokerId: number;
  /** When the writer opened the object, in milliseconds since the epoch. */
  createdAtMs: number;
}

export interface WalTrailer {
  formatVersion: number;
  /** Where the footer starts; also where the body ends. */
  footerPosition: number;
  footerLength: number;
  footerCrc: number;
}

/** One batch of the object, as its footer index describes it. */
export interface WalIndexEntry {
  /** 32 lowercase hex digits; ZERO_TOPIC_ID when the writer knew only the name. */
  topicId: string;
  /** Empty when the writer knew only the id (Produce v13+). */
  topicName: string;
  partition: number;
  /** Byte offset of the batch in the object. */
  position: number;
  /** Bytes of the whole batch, its 61-byte header included. */
  length: number;
  /**
   * CRC-32C of the batch's bytes 21..end. For a batch stored untouched this equals the CRC field
   * of its own header (bytes 17..21).
   */
  crc: number;
  producerId: bigint;
  producerEpoch: number;
  baseSequence: number;
  recordCount: number;
  lastOffsetDelta: number;
}

export interface WalObject {
  header: WalHeader;
  trailer: WalTrailer;
  entries: WalIndexEntry[];
}
