import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../src/protocol/errors.js';
import {
  decodeFetchCapability,
  decodePartitionSegments,
  encodeFetchCapability,
  encodePartitionSegments,
  type PartitionSegment,
  SEGMENT_DIGEST_SIZE,
} from '../../src/replication/wal-references.js';

/** Version-2 segments: references without a digest. */
const segmentV2Arb: fc.Arbitrary<PartitionSegment> = fc.oneof(
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

const digestArb = fc
  .uint8Array({ minLength: SEGMENT_DIGEST_SIZE, maxLength: SEGMENT_DIGEST_SIZE })
  .map((b) => Buffer.from(b));

/** Version-3 segments: every reference with its digest. */
const segmentArb: fc.Arbitrary<PartitionSegment> = fc
  .tuple(segmentV2Arb, digestArb)
  .map(([s, digest]) => (s.kind === 'reference' ? { ...s, digest } : s));

describe('walproxy Fetch tags', () => {
  it('round-trips any segment list, digests included (version 3)', () => {
    fc.assert(
      fc.property(fc.array(segmentArb, { maxLength: 30 }), (segments) => {
        expect(decodePartitionSegments(encodePartitionSegments(segments))).toEqual(segments);
      }),
    );
  });

  it('still writes and reads version 2, without digests, for a follower side that asks for it', () => {
    fc.assert(
      fc.property(fc.array(segmentV2Arb, { maxLength: 30 }), (segments) => {
        const data = encodePartitionSegments(segments, 2);
        expect(data[0]).toBe(2);
        expect(decodePartitionSegments(data)).toEqual(segments);
      }),
    );
    // A digest the follower side did not ask for is not written.
    const withDigest: PartitionSegment[] = [
      {
        kind: 'reference',
        baseOffset: 1n,
        partitionLeaderEpoch: 0,
        crc: 1,
        digest: Buffer.alloc(32, 7),
        store: 's',
        objectKey: 'k',
        position: 0,
        length: 61,
      },
    ];
    expect(decodePartitionSegments(encodePartitionSegments(withDigest, 2))[0]).not.toHaveProperty('digest');
  });

  it('refuses to write a version-3 reference without a whole digest', () => {
    const reference: PartitionSegment = {
      kind: 'reference',
      baseOffset: 1n,
      partitionLeaderEpoch: 0,
      crc: 1,
      store: 's',
      objectKey: 'k',
      position: 0,
      length: 61,
    };
    expect(() => encodePartitionSegments([reference])).toThrow(/32-byte digest/);
    expect(() => encodePartitionSegments([{ ...reference, digest: Buffer.alloc(16) }])).toThrow(
      /32-byte digest/,
    );
  });

  it('round-trips the capability with its version and inline requests', () => {
    const inlineRequests = [{ topicId: 'ab'.repeat(16), partition: 3, fromOffset: 12_345n }];
    expect(decodeFetchCapability(encodeFetchCapability({ inlineRequests }))).toEqual({
      version: 3,
      inlineRequests,
    });
    expect(decodeFetchCapability(encodeFetchCapability({ version: 2, inlineRequests: [] }))).toEqual({
      version: 2,
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
    data[0] = 4;
    expect(() => decodePartitionSegments(data)).toThrow(/format version 4/);
    const capability = encodeFetchCapability({ inlineRequests: [] });
    capability[0] = 1;
    expect(() => decodeFetchCapability(capability)).toThrow(/format version 1/);
    capability[0] = 4;
    expect(() => decodeFetchCapability(capability)).toThrow(/format version 4/);
  });

  it('spends 119 bytes on a reference to a typical WAL object key: 32 for the digest, 48 fewer than version 1 (whole header, fixed-width position)', () => {
    // Given a reference as the leader side sends it, with a key as the WAL writer names objects
    const objectKey = 'wal/2026/11/30/04/1/1764477600123-0000001f-9c1d2e3f4a5b6c7d.wal';
    const segment: PartitionSegment = {
      kind: 'reference',
      baseOffset: 1_234_567n,
      partitionLeaderEpoch: 7,
      crc: 0xdeadbeef,
      digest: Buffer.alloc(32, 0xab),
      store: 's3://walproxy--use1-az4--x-s3/wal',
      objectKey,
      position: 300_000,
      length: 12_345,
    };
    const withStoreTable = encodePartitionSegments([segment]).length;
    const storeTable = encodePartitionSegments([]).length + 1 + segment.store.length;
    // Then kind + offsets/epoch/CRC + digest + store index + key + position and length as varints
    expect(withStoreTable - storeTable).toBe(1 + 8 + 4 + 4 + 32 + 1 + 1 + objectKey.length + 3 + 2);
    expect(withStoreTable - storeTable).toBe(119);
  });
});
