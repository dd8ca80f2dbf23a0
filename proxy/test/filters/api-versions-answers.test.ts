import { readFileSync } from 'node:fs';
import { decodeApiVersionsResponse } from '@walproxy/shared';
import { describe, expect, it } from 'vitest';
import { ApiVersionsFilter } from '../../src/filters/api-versions.js';
import { ZONE_ROUTED_APIS } from '../../src/zone/zone-route-filter.js';
import { errorWithZoneKeysCase, requestCases, responseCases } from './api-versions-cases.js';

// Issue #25 made the two ApiVersions cappers one filter fed by the shared API table. Its answers
// must be the old ones byte for byte: api-versions-answers.json holds what the old cappers
// answered to the cases of api-versions-cases.ts, captured from them before the change — `every`
// from filters/api-versions.ts alone (every Kafka listener), `routed` from zone routing's capper
// followed by it (the listeners zone routing filters, in their chain's order). 'same' means the
// broker's frame itself went on.

interface Captured {
  responses: Record<string, { every: string; routed: string }>;
  requests: Record<string, string>;
}

const captured = JSON.parse(
  readFileSync(new URL('./api-versions-answers.json', import.meta.url), 'utf8'),
) as Captured;

const every = new ApiVersionsFilter();
const routed = new ApiVersionsFilter(ZONE_ROUTED_APIS);
const shown = (out: Buffer, frame: Buffer) => (out === frame ? 'same' : out.toString('hex'));

describe('ApiVersionsFilter answers as the two cappers before it did', () => {
  it.each(responseCases().map((c) => [c.name, c] as const))('%s', (name, c) => {
    const old = captured.responses[name]!;
    expect(old).toBeDefined();
    expect(shown(every.onResponse(c.info, c.frame), c.frame)).toBe(old.every);
    expect(shown(routed.onResponse(c.info, c.frame), c.frame)).toBe(old.routed);
  });

  it.each(requestCases().map((c) => [c.name, c] as const))('%s', (name, c) => {
    const old = captured.requests[name]!;
    expect(old).toBeDefined();
    for (const filter of [every, routed]) {
      const decision = filter.onRequest(c.info, c.frame);
      if (decision.action === 'forward') {
        expect(decision).toEqual({ action: 'forward', frame: c.frame, expectResponse: true });
        expect(old).toBe('forward');
      } else {
        expect(decision.response.toString('hex')).toBe(old);
      }
    }
  });

  it('caps an error answer on zone routing listeners too, where the old zone capper left it', () => {
    // Given the one captured input whose answer changed: an error answer listing Metadata above
    // what walproxy decodes (no broker sends one: an error answer lists at most ApiVersions)
    const c = errorWithZoneKeysCase();
    const old = captured.responses[c.name]!;
    // Then every listener answers as before
    expect(shown(every.onResponse(c.info, c.frame), c.frame)).toBe(old.every);
    // And on the listeners zone routing filters, Metadata is capped as in any other answer
    const out = routed.onResponse(c.info, c.frame);
    expect(
      decodeApiVersionsResponse(out.subarray(8), 3).apiKeys.map((k) => [k.apiKey, k.maxVersion]),
    ).toEqual([
      [1, 18],
      [3, 13],
      [18, 5],
    ]);
    expect(decodeApiVersionsResponse(Buffer.from(old.routed, 'hex').subarray(8), 3).apiKeys[1]).toMatchObject(
      {
        apiKey: 3,
        maxVersion: 14,
      },
    );
  });
});
