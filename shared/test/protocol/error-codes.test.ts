import { describe, expect, it } from 'vitest';
import { ErrorCode, isRetriable, KAFKA_ERRORS, kafkaError } from '../../src/protocol/error-codes.js';

describe('Kafka error codes', () => {
  it('holds each code once, in order, from -1 to the 4.1 maximum', () => {
    const codes = KAFKA_ERRORS.map((e) => e.code);
    expect(codes).toEqual([...codes].sort((a, b) => a - b));
    expect(new Set(codes).size).toBe(codes.length);
    expect(codes[0]).toBe(-1);
    expect(codes.at(-1)).toBe(133);
  });

  it('maps names to codes and back', () => {
    expect(ErrorCode.NONE).toBe(0);
    expect(ErrorCode.REQUEST_TIMED_OUT).toBe(7);
    expect(ErrorCode.UNSUPPORTED_VERSION).toBe(35);
    expect(ErrorCode.UNKNOWN_TOPIC_ID).toBe(100);
    expect(kafkaError(70)?.name).toBe('FETCH_SESSION_ID_NOT_FOUND');
    expect(kafkaError(9999)).toBeUndefined();
  });

  it('marks retriable the codes whose Kafka exception extends RetriableException', () => {
    // The ones walproxy relies on: a failed durable upload answers REQUEST_TIMED_OUT.
    expect(isRetriable(ErrorCode.REQUEST_TIMED_OUT)).toBe(true);
    expect(isRetriable(ErrorCode.NOT_LEADER_OR_FOLLOWER)).toBe(true);
    expect(isRetriable(ErrorCode.CORRUPT_MESSAGE)).toBe(true);
    expect(isRetriable(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)).toBe(true);
    expect(isRetriable(ErrorCode.UNKNOWN_TOPIC_ID)).toBe(true);
    expect(isRetriable(ErrorCode.NONE)).toBe(false);
    expect(isRetriable(ErrorCode.OFFSET_OUT_OF_RANGE)).toBe(false);
    expect(isRetriable(ErrorCode.UNSUPPORTED_VERSION)).toBe(false);
    expect(isRetriable(ErrorCode.TRANSACTION_ABORTABLE)).toBe(false);
    expect(isRetriable(12345)).toBe(false);
  });
});
