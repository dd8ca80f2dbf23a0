// How walproxy's two sides talk through a stock Fetch exchange, in tagged fields that stock
// brokers ignore (KIP-482: an unknown tag is kept raw and skipped). Tags 0-2 are Kafka's in these
// structs (kafka-protocol.md §1); ours sit far above them.
//
// Fetch request, top-level tag FETCH_CAPABILITY_TAG (added by the follower's egress sidecar):
//   Version int8 (= 2) — also the segment-list version the follower reads; a leader side that
//                        does not speak it leaves the response stock
//   InlineRequests COMPACT_ARRAY of:   partitions the follower side could not fill last time
//     TopicId uuid, Partition int32, FromOffset int64
// Only a request carrying this tag ever gets references back.
//
// Fetch response, partition tag PARTITION_SEGMENTS_TAG (added by the leader's replication ingress):
//   Version int8 (= 2)
//   Stores COMPACT_ARRAY of COMPACT_STRING — the store URLs the references point into (the
//     leader's --wal-store-url: S3 Express One Zone buckets are zonal, so a follower in another
//     zone must know which bucket to read)
//   Segments uvarint count, then per segment:
//     Kind int8: 0 = inline, 1 = reference
//     inline:    Length uvarint — the next Length bytes of the partition's Records field
//     reference: BaseOffset int64, PartitionLeaderEpoch int32 — the two header fields the leader
//                  assigned when it appended the batch (the producer sent 0 and -1)
//                Crc uint32 — the batch's CRC-32C, as the leader stored it
//                Store uvarint — index into Stores
//                ObjectKey COMPACT_STRING, Position uvarint, Length uvarint — where the whole
//                  produced batch (header included) lies in the WAL object
// The partition's Records field then holds only the inline segments, in order.
//
// Why only two header fields (version 2; version 1 carried all 61 header bytes): the leader side
// references a batch only when its stored header equals the produced one from byte 16 on (magic,
// CRC, attributes, offsets delta, timestamps, producer id/epoch, sequence, count — everything the
// CRC covers), so the follower side rebuilds the stored batch exactly from the object's bytes plus
// BaseOffset and PartitionLeaderEpoch (Length is bytes 8..11 of both). The CRC is carried so the
// follower checks the object holds the very batch the leader stored, not merely a valid one.
// With position and length as varints, a reference is 48 bytes shorter than in version 1.

import { ProtocolError } from '../protocol/errors.js';
import { Reader } from '../protocol/reader.js';
import { Writer } from '../protocol/writer.js';
import { RECORD_BATCH_HEADER_SIZE } from '../records/record-batch.js';

export const FETCH_CAPABILITY_TAG = 27_001;
export const PARTITION_SEGMENTS_TAG = 27_002;
const FORMAT_VERSION = 2;

export interface InlineRequest {
  topicId: string;
  partition: number;
  fromOffset: bigint;
}

export interface FetchCapability {
  inlineRequests: InlineRequest[];
}

export type PartitionSegment =
  | { kind: 'inline'; length: number }
  | {
      kind: 'reference';
      baseOffset: bigint;
      partitionLeaderEpoch: number;
      crc: number;
      store: string;
      objectKey: string;
      position: number;
      length: number;
    };

const CAPABILITY_CTX = { api: 'WalproxyFetchCapability', version: FORMAT_VERSION, flexible: true };
const SEGMENTS_CTX = { api: 'WalproxyPartitionSegments', version: FORMAT_VERSION, flexible: true };

function checkVersion(r: Reader, api: string): void {
  const version = r.int8('Version');
  if (version !== FORMAT_VERSION) {
    throw new ProtocolError(
      'UNSUPPORTED_VERSION',
      { api, version, field: 'Version', offset: 0 },
      `walproxy ${api} format version ${version}; this build reads ${FORMAT_VERSION}`,
    );
  }
}

export function encodeFetchCapability(capability: FetchCapability): Buffer {
  const w = new Writer(CAPABILITY_CTX, 16);
  w.int8(FORMAT_VERSION, 'Version');
  w.compactArray(capability.inlineRequests, 'InlineRequests', (w2, r) => {
    w2.uuid(r.topicId, 'TopicId');
    w2.int32(r.partition, 'Partition');
    w2.int64(r.fromOffset, 'FromOffset');
  });
  return w.finish();
}

export function decodeFetchCapability(data: Buffer): FetchCapability {
  const r = new Reader(data, CAPABILITY_CTX);
  checkVersion(r, CAPABILITY_CTX.api);
  const inlineRequests = r.compactArray('InlineRequests', (r2) => ({
    topicId: r2.uuid('TopicId'),
    partition: r2.int32('Partition'),
    fromOffset: r2.int64('FromOffset'),
  }));
  r.done('WalproxyFetchCapability');
  return { inlineRequests };
}

export function encodePartitionSegments(segments: readonly PartitionSegment[]): Buffer {
  const stores: string[] = [];
  const storeIndex = new Map<string, number>();
  for (const s of segments) {
    if (s.kind === 'reference' && !storeIndex.has(s.store)) {
      storeIndex.set(s.store, stores.length);
      stores.push(s.store);
    }
  }
  const w = new Writer(SEGMENTS_CTX, 64 + segments.length * 96);
  w.int8(FORMAT_VERSION, 'Version');
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
  checkVersion(r, SEGMENTS_CTX.api);
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
