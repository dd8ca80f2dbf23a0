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
    header: fc.uint8Array({ minLength: 61, maxLength: 61 }).map((a) => Buffer.from(a)),
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
    data[0] = 2;
    expect(() => decodePartitionSegments(data)).toThrow(/format version 2/);
  });
});
