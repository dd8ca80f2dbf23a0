import { channel } from 'node:diagnostics_channel';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parsePrometheusText } from '../../src/cost/counters-source.js';
import { Telemetry } from '../../src/telemetry/index.js';
import {
  WAL_READER_CHANNELS,
  WAL_WRITER_CHANNELS,
  type WalReaderGetEvent,
  type WalUploadEndEvent,
} from '../../src/wal/channels.js';
import { fakeSources, silentLog } from './fixtures.js';

let current: Telemetry | undefined;
afterEach(async () => {
  await current?.stop();
  current = undefined;
  vi.useRealTimers();
});

async function scrape(telemetry: Telemetry): Promise<Map<string, number>> {
  const samples = parsePrometheusText(await telemetry.prometheusText());
  return new Map(samples.map((s) => [s.name, s.value]));
}

const get = (outcome: 'ok' | 'error'): WalReaderGetEvent => ({
  store: 's3://wal',
  objectKey: 'k1',
  whole: false,
  bytes: 100,
  durationMs: 2,
  outcome,
});

const upload = (error: Error | undefined): WalUploadEndEvent => ({
  objectKey: 'k1',
  size: 1_000,
  batchCount: 1,
  attempts: 1,
  durationMs: 3,
  error,
});

describe('data-path liveness on /metrics', () => {
  it('ages the last stored upload and the last answered GET; failures do not count as success', async () => {
    // Given a sidecar with a WAL store, on a clock the test moves
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    current = new Telemetry({ sources: fakeSources().sources, log: silentLog });
    current.start();
    // When an upload is stored and a GET answered, then 42 s pass with a failed upload and a failed GET
    channel(WAL_WRITER_CHANNELS.uploadEnd).publish(upload(undefined));
    channel(WAL_READER_CHANNELS.get).publish(get('ok'));
    vi.setSystemTime(1_042_000);
    channel(WAL_WRITER_CHANNELS.uploadEnd).publish(upload(new Error('503 Slow Down')));
    channel(WAL_READER_CHANNELS.get).publish(get('error'));
    // Then both ages are 42 s
    const m = await scrape(current);
    expect(m.get('walproxy_wal_upload_success_age_seconds')).toBe(42);
    expect(m.get('walproxy_wal_reader_success_age_seconds')).toBe(42);
  });

  it('counts the age from the start before any success', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(2_000_000);
    current = new Telemetry({ sources: fakeSources().sources, log: silentLog });
    current.start();
    vi.setSystemTime(2_300_000);
    const m = await scrape(current);
    expect(m.get('walproxy_wal_upload_success_age_seconds')).toBe(300);
    expect(m.get('walproxy_wal_reader_success_age_seconds')).toBe(300);
  });

  it('exports no staleness without a WAL store', async () => {
    const { sources } = fakeSources();
    delete sources.wal;
    current = new Telemetry({ sources, log: silentLog });
    current.start();
    const m = await scrape(current);
    expect(m.has('walproxy_wal_upload_success_age_seconds')).toBe(false);
    expect(m.has('walproxy_event_loop_delay_max')).toBe(true);
  });

  it('reports an event loop blocked for 300 ms in the delay it was late by', async () => {
    // Given telemetry watching the event loop
    current = new Telemetry({ sources: fakeSources().sources, log: silentLog });
    current.start();
    await new Promise((r) => setTimeout(r, 50));
    // When the thread is busy for 300 ms
    const until = performance.now() + 300;
    while (performance.now() < until);
    await new Promise((r) => setTimeout(r, 50));
    // Then the longest delay of the window is at least most of it
    const m = await scrape(current);
    expect(m.get('walproxy_event_loop_delay_max')).toBeGreaterThanOrEqual(250);
  });
});
