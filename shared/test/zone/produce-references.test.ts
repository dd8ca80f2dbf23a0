import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../src/protocol/errors.js';
import { recordBatches } from '../../src/records/record-batch.js';
import {
  decodeProduceReference,
  encodeProduceReference,
  isProduceReference,
  PRODUCE_REFERENCE_MAGIC,
  produceReferenceMismatch,
} from '../../src/zone/produce-references.js';
import { buildRecordBatch } from '../helpers/record-batches.js';

const location = {
  store: 's3://walproxy--use1-az4--x-s3/wal',
  objectKey: 'wal/2026/01/01/00/2/abc.wal',
  position: 123_456,
  objectSize: 400_000,
};

function batch(values = 3, producerId = 4_000n): Buffer {
  return buildRecordBatch({
    producerId,
    producerEpoch: 2,
    baseSequence: 17,
    records: Array.from({ length: values }, (_, i) => ({
      key: Buffer.from(`k${i}`),
      value: Buffer.from(`value-${i}`),
    })),
  });
}

describe('produce references (zone-local produce)', () => {
  it('round-trips where the batch is, and restores the produced header', () => {
    // Given a produced batch and where S_Z stored it
    const produced = batch();
    const reference = encodeProduceReference(produced, location);
    // Then the reference decodes to that place and to the produced batch's own header
    const decoded = decodeProduceReference(reference);
    expect(decoded).toMatchObject({ ...location, batchSize: produced.length });
    expect(decoded.header.equals(produced.subarray(0, 61))).toBe(true);
    // And the produced bytes are accepted as the batch it stands for
    expect(produceReferenceMismatch(decoded, produced)).toBeUndefined();
    expect(isProduceReference(reference)).toBe(true);
    expect(isProduceReference(produced)).toBe(false);
    expect(isProduceReference(null)).toBe(false);
  });

  it('is framed as one record batch a broker reads past whole, with a magic no Kafka batch has', () => {
    const produced = batch();
    const reference = encodeProduceReference(produced, location);
    // Kafka's framing: Length counts the bytes after it, so the reference is exactly one "batch"
    expect(reference.readInt32BE(8) + 12).toBe(reference.length);
    expect(reference[16]).toBe(PRODUCE_REFERENCE_MAGIC);
    expect([0, 1, 2]).not.toContain(PRODUCE_REFERENCE_MAGIC);
    // And the producer state a broker authorizes by (attributes, producer id) is the produced batch's
    expect(reference.subarray(17, 61).equals(produced.subarray(17, 61))).toBe(true);
    // Our own batch reader refuses it: it is not magic 2
    expect(() => [...recordBatches(reference)]).toThrow(ProtocolError);
  });

  it('refuses bytes that are not the batch it stands for', () => {
    const produced = batch();
    const decoded = decodeProduceReference(encodeProduceReference(produced, location));
    // Another batch of the same size (another producer id)
    expect(produceReferenceMismatch(decoded, batch(3, 4_001n))).toMatch(/header/);
    // A byte of the records changed (CRC-32C no longer matches)
    const flipped = Buffer.from(produced);
    flipped[flipped.length - 2]! ^= 0x01;
    expect(produceReferenceMismatch(decoded, flipped)).toMatch(/CRC-32C/);
    // Fewer bytes
    expect(produceReferenceMismatch(decoded, produced.subarray(0, produced.length - 1))).toMatch(/bytes/);
    // The base offset or leader epoch (outside the CRC) changed
    const moved = Buffer.from(produced);
    moved.writeInt32BE(9, 12);
    expect(produceReferenceMismatch(decoded, moved)).toMatch(/header/);
  });

  it('refuses to stand for anything but one magic v2 batch', () => {
    const legacy = Buffer.from(batch());
    legacy[16] = 1;
    expect(() => encodeProduceReference(legacy, location)).toThrow(RangeError);
    expect(() => encodeProduceReference(Buffer.alloc(20), location)).toThrow(RangeError);
  });

  it('raises only ProtocolError on arbitrary bytes, and on references cut or stretched', () => {
    const reference = encodeProduceReference(batch(), location);
    const inputs = [
      reference.subarray(0, reference.length - 1),
      Buffer.concat([reference, Buffer.from([0])]),
    ];
    for (const input of inputs) expect(() => decodeProduceReference(input)).toThrow(ProtocolError);
    // A place past the object's end is no place
    const past = encodeProduceReference(batch(), { ...location, objectSize: location.position + 10 });
    expect(() => decodeProduceReference(past)).toThrow(/ends past the object/);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const input = Buffer.from(bytes);
        if (input.length > 16) input[16] = PRODUCE_REFERENCE_MAGIC;
        try {
          decodeProduceReference(input);
        } catch (error) {
          expect(error).toBeInstanceOf(ProtocolError);
        }
      }),
    );
  });
});
