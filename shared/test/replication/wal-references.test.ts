import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../src/protocol/errors.js';
import {
  decodeFetchCapability,
  decodePartitionSegments,
  encodeFetchCapability,
  encodePartitionSegments,
  type PartitionSegment,
} from '../../src/replication/wal-references.js';

const segmentArb: fc.Arbitrary<PartitionSegment> = fc.oneof(
  fc.record({ kind: fc.constant('inline' as const), length: fc.nat({ max: 10_000_000 }) }),
  fc.record({
    kind: fc.constant('reference' as const),
    baseOffset: fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }),
    partitionLeaderEpoch: fc.integer({ min: -1, max: 0x7fff_ffff }),
    crc: fc.nat({ max: 0xffff_ffff }),
    store: fc.constantFrom(
      's3://walproxy--use1-az4--x-s3/wal',
      's3://walproxy--use1-az6--x-s3/wal',
      'file:///mnt/wal',
    ),
    objectKey: fc.string({ minLength: 1, maxLength: 80 }),
    position: fc.nat({ max: 0xffff_ffff }),
    length: fc.integer({ min: 61, max: 0xffff_ffff }),
  }),
);

describe('walproxy Fetch tags', () => {
  it('round-trips any segment list', () => {
    fc.assert(
      fc.property(fc.array(segmentArb, { maxLength: 30 }), (segments) => {
        expect(decodePartitionSegments(encodePartitionSegments(segments))).toEqual(segments);
      }),
    );
  });

  it('round-trips the capability with its inline requests', () => {
    const capability = { inlineRequests: [{ topicId: 'ab'.repeat(16), partition: 3, fromOffset: 12_345n }] };
    expect(decodeFetchCapability(encodeFetchCapability(capability))).toEqual(capability);
    expect(decodeFetchCapability(encodeFetchCapability({ inlineRequests: [] }))).toEqual({
      inlineRequests: [],
    });
  });

  it('raises only ProtocolError on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        for (const decode of [decodePartitionSegments, decodeFetchCapability]) {
          try {
            decode(Buffer.from(bytes));
          } catch (error) {
            expect(error).toBeInstanceOf(ProtocolError);
          }
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses a format version it does not read', () => {
    const data = encodePartitionSegments([{ kind: 'inline', length: 5 }]);
    data[0] = 1;
    expect(() => decodePartitionSegments(data)).toThrow(/format version 1/);
    const capability = encodeFetchCapability({ inlineRequests: [] });
    capability[0] = 1;
    expect(() => decodeFetchCapability(capability)).toThrow(/format version 1/);
  });

  it('spends 87 bytes on a reference to a typical WAL object key, 48 fewer than version 1 (whole header, fixed-width position)', () => {
    // Given a reference as the leader side sends it, with a key as the WAL writer names objects
    const objectKey = 'wal/2026/11/30/04/1/1764477600123-0000001f-9c1d2e3f4a5b6c7d.wal';
    const segment: PartitionSegment = {
      kind: 'reference',
      baseOffset: 1_234_567n,
      partitionLeaderEpoch: 7,
      crc: 0xdeadbeef,
      store: 's3://walproxy--use1-az4--x-s3/wal',
      objectKey,
      position: 300_000,
      length: 12_345,
    };
    const withStoreTable = encodePartitionSegments([segment]).length;
    const storeTable = encodePartitionSegments([]).length + 1 + segment.store.length;
    // Then kind + offsets/epoch/CRC + store index + key + position and length as varints
    expect(withStoreTable - storeTable).toBe(1 + 8 + 4 + 4 + 1 + 1 + objectKey.length + 3 + 2);
  });
});
