import { expect } from 'vitest';
import { ProtocolError } from '../../src/index.js';

/**
 * Encodes `msg`, decodes the bytes, and checks that the decoded message equals `msg` and encodes
 * back to the very same bytes. Returns the bytes.
 */
export function expectExactRoundTrip<T>(
  encode: (m: T, v: number) => Buffer,
  decode: (b: Buffer, v: number) => T,
  msg: T,
  version: number,
): Buffer {
  const bytes = encode(msg, version);
  const decoded = decode(bytes, version);
  expect(decoded).toEqual(msg);
  expect(encode(decoded, version).equals(bytes)).toBe(true);
  return bytes;
}

/** The ProtocolError `fn` throws; fails the test if it throws anything else or nothing. */
export function protocolErrorOf(fn: () => unknown): ProtocolError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ProtocolError);
    return e as ProtocolError;
  }
  throw new Error('expected a ProtocolError');
}

export const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
