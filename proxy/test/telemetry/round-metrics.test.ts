import { afterEach, describe, expect, it } from 'vitest';
import { parsePrometheusText, type Sample } from '../../src/cost/counters-source.js';
import { Telemetry } from '../../src/telemetry/index.js';
import { fakeSources, silentLog } from './fixtures.js';

let current: Telemetry | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
});

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    ?.value;
}

describe('the acks=all round on /metrics (issue #26)', () => {
  it('exports batches stored ahead by outcome, the refused ones’ bytes, and the prefetch hints of both sides', async () => {
    // Given a sidecar that stored 10 batches ahead, 2 of them refused by the broker (300 bytes),
    // sent 7 hints as leader and, as follower, got 5 and read 4 of them ahead
    const fake = fakeSources();
    fake.produce.batchesStoredAhead = 10;
    fake.produce.batchesStoredAheadRefused = 2;
    fake.produce.bytesStoredAheadRefused = 300;
    fake.fetchStrip.prefetchHintsSent = 7;
    fake.fetchFill.prefetchHints = 5;
    fake.fetchFill.prefetchesStarted = 4;
    current = new Telemetry({ sources: fake.sources, log: silentLog });
    current.start();

    // When /metrics is scraped
    const samples = parsePrometheusText(await current.prometheusText());

    // Then each figure is there once, under its outcome
    expect(value(samples, 'walproxy_produce_stored_ahead_total', { outcome: 'appended' })).toBe(8);
    expect(value(samples, 'walproxy_produce_stored_ahead_total', { outcome: 'refused' })).toBe(2);
    expect(value(samples, 'walproxy_produce_stored_ahead_refused_bytes_total')).toBe(300);
    expect(value(samples, 'walproxy_fetch_prefetch_hints_total', { side: 'leader', outcome: 'sent' })).toBe(
      7,
    );
    expect(
      value(samples, 'walproxy_fetch_prefetch_hints_total', { side: 'follower', outcome: 'received' }),
    ).toBe(5);
    expect(
      value(samples, 'walproxy_fetch_prefetch_hints_total', { side: 'follower', outcome: 'started' }),
    ).toBe(4);
  });
});
