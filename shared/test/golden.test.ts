// Golden frames: one file per frame in fixtures/golden, named
// <apiName>-v<version>-<request|response>-<source>-<n>.bin, holding the frame without its 4-byte
// size prefix. apiName is the API key table's name (e.g. Fetch, ApiVersions). Every frame must
// decode and re-encode to the same bytes: header always, body too for the messages walproxy decodes.

import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  apiKeyByName,
  canDecode,
  decodeRequestHeader,
  decodeResponseHeader,
  encodeRequestHeader,
  encodeResponseHeader,
  recordBatches,
  responseHeaderVersion,
} from '../src/index.js';
import { type Codec, codecFor, encodeWith } from './helpers/codecs.js';

const DIR = new URL('./fixtures/golden/', import.meta.url);
const NAME = /^([A-Za-z]+)-v(\d+)-(request|response)-(.+)-(\d+)\.bin$/;

const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.bin'))
  .sort();

/** Every complete batch in the decoded message's records fields (Produce and Fetch). */
function recordsOf(msg: unknown): Buffer[] {
  const out: Buffer[] = [];
  const visit = (v: unknown): void => {
    if (Buffer.isBuffer(v) || v === null || typeof v !== 'object') return;
    for (const [k, child] of Object.entries(v)) {
      if (k === 'records' && Buffer.isBuffer(child)) out.push(child);
      else visit(child);
    }
  };
  visit(msg);
  return out;
}

function roundTripBody(codec: Codec | undefined, decodes: boolean, body: Buffer, version: number): Buffer {
  if (codec === undefined || !decodes) return body;
  const msg = codec.decode(body, version);
  // Real data: every complete batch a broker or client sent must carry a valid CRC-32C.
  for (const records of recordsOf(msg)) {
    for (const b of recordBatches(records)) if (!b.partial) expect(b.isCrcValid()).toBe(true);
  }
  return encodeWith(codec, msg, version);
}

describe('golden frames', () => {
  it('has frames to check', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('%s re-encodes to the same bytes', (file) => {
    const m = NAME.exec(file);
    expect(
      m,
      `${file} does not follow <apiName>-v<version>-<request|response>-<source>-<n>.bin`,
    ).not.toBeNull();
    const [, apiName, versionText, direction] = m!;
    const info = apiKeyByName(apiName!);
    expect(info, `unknown API name ${apiName}`).toBeDefined();
    const apiKey = info!.apiKey;
    const version = Number(versionText);
    const frame = readFileSync(new URL(file, DIR));
    const codec = codecFor(apiName!, direction as 'request' | 'response');

    if (direction === 'request') {
      const header = decodeRequestHeader(frame);
      expect({ apiKey: header.apiKey, apiVersion: header.apiVersion }).toEqual({
        apiKey,
        apiVersion: version,
      });
      const body = roundTripBody(
        codec,
        canDecode(apiKey, version),
        frame.subarray(header.headerLength),
        version,
      );
      expect(Buffer.concat([encodeRequestHeader(header), body]).equals(frame)).toBe(true);
    } else {
      const headerVersion = responseHeaderVersion(apiKey, version)!;
      const header = decodeResponseHeader(frame, headerVersion);
      // An ApiVersions answer to a version the broker lacks is a v0 body (KIP-511); the codec reads it.
      const decodes = canDecode(apiKey, version) || apiName === 'ApiVersions';
      const body = roundTripBody(codec, decodes, frame.subarray(header.headerLength), version);
      expect(Buffer.concat([encodeResponseHeader(header, headerVersion), body]).equals(frame)).toBe(true);
    }
  });
});
