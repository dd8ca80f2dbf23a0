// How walproxy's two sides talk through a stock Fetch exchange, in tagged fields that stock
// brokers ignore (KIP-482: an unknown tag is kept raw and skipped). Tags 0-2 are Kafka's in these
// structs (docs/kafka-protocol.md, "Fetch responses"); ours sit far above them.
//
// Fetch request, top-level tag FETCH_CAPABILITY_TAG (added by the follower's egress sidecar):
//   Version int8 (= 3) — also the newest segment-list version the follower reads; a leader side
//                        that does not speak it leaves the response stock
//   InlineRequests COMPACT_ARRAY of:   partitions the follower side could not fill last time
//     TopicId uuid, Partition int32, FromOffset int64
// Only a request carrying this tag ever gets references back, in the segment-list version the
// tag names (a leader side reads capability versions 2 and 3).
//
// Fetch response, partition tag PARTITION_SEGMENTS_TAG (added by the leader's replication ingress):
//   Version int8 (= 3, or 2 for a follower side that asked for 2)
//   Stores COMPACT_ARRAY of COMPACT_STRING — the store URLs the references point into (the
//     leader's --wal-store-url: S3 Express One Zone buckets are zonal, so a follower in another
//     zone must know which bucket to read)
//   Segments uvarint count, then per segment:
//     Kind int8: 0 = inline, 1 = reference
//     inline:    Length uvarint — the next Length bytes of the partition's Records field
//     reference: BaseOffset int64, PartitionLeaderEpoch int32 — the two header fields the leader
//                  assigned when it appended the batch (the producer sent 0 and -1)
//                Crc uint32 — the batch's CRC-32C, as the leader stored it
//                Digest 32 bytes (version 3 only) — SHA-256 of the batch's records section
//                  (bytes 61..end), the digest by which the leader proved the produced batch equal
//                  to its log batch
//                Store uvarint — index into Stores
//                ObjectKey COMPACT_STRING, Position uvarint, Length uvarint — where the whole
//                  produced batch (header included) lies in the WAL object
// The partition's Records field then holds only the inline segments, in order.
//
// Why only two header fields (since version 2; version 1 carried all 61 header bytes): the leader
// side references a batch only when its stored header equals the produced one from byte 16 on
// (magic, CRC, attributes, offsets delta, timestamps, producer id/epoch, sequence, count —
// everything the CRC covers), so the follower side rebuilds the stored batch exactly from the
// object's bytes plus BaseOffset and PartitionLeaderEpoch (Length is bytes 8..11 of both).
//
// Why a digest (version 3, issue #24): the CRC proves a batch whole, not that it is the batch the
// leader stored. CRC-32C is linear, so whoever can overwrite a referenced object (any writer of a
// bucket the follower reads) can put there a same-header batch with other records and a CRC that
// holds, and every follower would append it. The follower side checks the SHA-256 of the rebuilt
// batch's records against the leader's before its broker sees a byte. The full 32 bytes, not a
// 128-bit prefix: a producer chooses its records, and one that can also write a bucket needs a
// collision, not a preimage — 2^64 work for a 128-bit prefix (birthday bound, within reach of a
// GPU farm), 2^128 for the whole digest. The 16 bytes saved would be under 2 % of even a 1 KiB
// batch a reference stands for (producers batch 16 KiB by default), so they do not pay for the
// weaker proof.

import { ProtocolError } from '../protocol/errors.js';
import { Reader } from '../protocol/reader.js';
import { Writer } from '../protocol/writer.js';
import { RECORD_BATCH_HEADER_SIZE } from '../records/record-batch.js';

export const FETCH_CAPABILITY_TAG = 27_001;
export const PARTITION_SEGMENTS_TAG = 27_002;
/** The segment-list version this build writes for a follower side that reads it, and asks for. */
export const SEGMENTS_VERSION = 3;
/** The version before digests, still read and written for follower sides that ask for it. */
export const SEGMENTS_VERSION_WITHOUT_DIGEST = 2;
/** SHA-256 of a referenced batch's records section. */
export const SEGMENT_DIGEST_SIZE = 32;
/** The segment-list versions this build reads and writes. */
export type SegmentsVersion = typeof SEGMENTS_VERSION | typeof SEGMENTS_VERSION_WITHOUT_DIGEST;

export interface InlineRequest {
  topicId: string;
  partition: number;
  fromOffset: bigint;
}

export interface FetchCapability {
  /** The segment-list version the follower side reads; SEGMENTS_VERSION when encoding, if left out. */
  version?: SegmentsVersion;
  inlineRequests: InlineRequest[];
}

export type PartitionSegment =
  | { kind: 'inline'; length: number }
  | {
      kind: 'reference';
      baseOffset: bigint;
      partitionLeaderEpoch: number;
      crc: number;
      /**
       * SHA-256 of the batch's bytes 61..end as the leader stored them (SEGMENT_DIGEST_SIZE bytes);
       * undefined in a version-2 list, which carries none.
       */
      digest?: Buffer;
      store: string;
      objectKey: string;
      position: number;
      length: number;
    };

const CAPABILITY_CTX = { api: 'WalproxyFetchCapability', version: SEGMENTS_VERSION, flexible: true };
const SEGMENTS_CTX = { api: 'WalproxyPartitionSegments', version: SEGMENTS_VERSION, flexible: true };

function readVersion(r: Reader, api: string): SegmentsVersion {
  const version = r.int8('Version');
  if (version !== SEGMENTS_VERSION && version !== SEGMENTS_VERSION_WITHOUT_DIGEST) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      { api, version, field: 'Version', offset: 0 },
      `walproxy ${api} format version ${version}; this build reads ${SEGMENTS_VERSION_WITHOUT_DIGEST} and ${SEGMENTS_VERSION}`,
    );
  }
  return version;
}

export function encodeFetchCapability(capability: FetchCapability): Buffer {
  const w = new Writer(CAPABILITY_CTX, 16);
  w.int8(capability.version ?? SEGMENTS_VERSION, 'Version');
  w.compactArray(capability.inlineRequests, 'InlineRequests', (w2, r) => {
    w2.uuid(r.topicId, 'TopicId');
    w2.int32(r.partition, 'Partition');
    w2.int64(r.fromOffset, 'FromOffset');
  });
  return w.finish();
}

/** The capability, its version always set. */
export function decodeFetchCapability(data: Buffer): Required<FetchCapability> {
  const r = new Reader(data, CAPABILITY_CTX);
  const version = readVersion(r, CAPABILITY_CTX.api);
  const inlineRequests = r.compactArray('InlineRequests', (r2) => ({
    topicId: r2.uuid('TopicId'),
    partition: r2.int32('Partition'),
    fromOffset: r2.int64('FromOffset'),
  }));
  r.done('WalproxyFetchCapability');
  return { version, inlineRequests };
}

/**
 * The segment list in `version` (the one the follower side's capability names): version 3 needs
 * every reference's digest, version 2 leaves digests out.
 */
export function encodePartitionSegments(
  segments: readonly PartitionSegment[],
  version: SegmentsVersion = SEGMENTS_VERSION,
): Buffer {
  const stores: string[] = [];
  const storeIndex = new Map<string, number>();
  for (const s of segments) {
    if (s.kind === 'reference' && !storeIndex.has(s.store)) {
      storeIndex.set(s.store, stores.length);
      stores.push(s.store);
    }
  }
  const w = new Writer(SEGMENTS_CTX, 64 + segments.length * 128);
  w.int8(version, 'Version');
  w.compactArray(stores, 'Stores', (w2, store) => w2.compactString(store, 'Store'));
  w.uvarint(segments.length, 'Segments');
  for (const s of segments) {
    if (s.kind === 'inline') {
      w.int8(0, 'Kind');
      w.uvarint(s.length, 'Length');
    } else {
      if (s.length < RECORD_BATCH_HEADER_SIZE) {
        throw new RangeError(`a referenced batch of ${s.length} bytes is shorter than its header`);
      }
      w.int8(1, 'Kind');
      w.int64(s.baseOffset, 'BaseOffset');
      w.int32(s.partitionLeaderEpoch, 'PartitionLeaderEpoch');
      w.uint32(s.crc, 'Crc');
      if (version === SEGMENTS_VERSION) {
        if (s.digest?.length !== SEGMENT_DIGEST_SIZE) {
          throw new RangeError(`a version ${version} reference needs a ${SEGMENT_DIGEST_SIZE}-byte digest`);
        }
        w.raw(s.digest);
      }
      w.uvarint(storeIndex.get(s.store)!, 'Store');
      w.compactString(s.objectKey, 'ObjectKey');
      w.uvarint(s.position, 'Position');
      w.uvarint(s.length, 'Length');
    }
  }
  return w.finish();
}

export function decodePartitionSegments(data: Buffer): PartitionSegment[] {
  const r = new Reader(data, SEGMENTS_CTX);
  const version = readVersion(r, SEGMENTS_CTX.api);
  const stores = r.compactArray('Stores', (r2) => r2.compactString('Store'));
  const count = r.uvarint('Segments');
  // Every segment takes at least two bytes: a count past that is corrupt, not an allocation.
  if (count > r.remaining() / 2)
    r.fail('TRUNCATED', 'Segments', `${count} segments cannot fit in ${r.remaining()} bytes`);
  const segments: PartitionSegment[] = [];
  for (let i = 0; i < count; i++) {
    const kind = r.int8('Kind');
    if (kind === 0) {
      segments.push({ kind: 'inline', length: r.uvarint('Length') });
    } else if (kind === 1) {
      const baseOffset = r.int64('BaseOffset');
      const partitionLeaderEpoch = r.int32('PartitionLeaderEpoch');
      const crc = r.uint32('Crc');
      let digest: Buffer | undefined;
      if (version === SEGMENTS_VERSION) {
        const at = r.offset;
        r.skip(SEGMENT_DIGEST_SIZE, 'Digest');
        digest = data.subarray(at, at + SEGMENT_DIGEST_SIZE);
      }
      const storeAt = r.uvarint('Store');
      const store =
        stores[storeAt] ?? r.fail('INVALID_VALUE', 'Store', `store ${storeAt} of ${stores.length}`);
      const objectKey = r.compactString('ObjectKey');
      const position = r.uvarint('Position');
      const length = r.uvarint('Length');
      if (length < RECORD_BATCH_HEADER_SIZE)
        r.fail('INVALID_VALUE', 'Length', `a batch of ${length} bytes is shorter than its header`);
      segments.push({
        kind: 'reference',
        baseOffset,
        partitionLeaderEpoch,
        crc,
        ...(digest !== undefined ? { digest } : {}),
        store,
        objectKey,
        position,
        length,
      });
    } else {
      r.fail('INVALID_VALUE', 'Kind', `segment kind ${kind} is neither inline (0) nor reference (1)`);
    }
  }
  r.done('WalproxyPartitionSegments');
  return segments;
}
