import { channel } from 'node:diagnostics_channel';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Telemetry } from '../../src/telemetry/index.js';
import {
  WAL_WRITER_CHANNELS,
  type WalSealEvent,
  type WalUploadEndEvent,
  type WalUploadStartEvent,
} from '../../src/wal/channels.js';
import { fakeSources, silentLog } from './fixtures.js';

// A stand-in OTLP/HTTP collector: it records what the exporters POST. Nothing a real broker could
// answer is involved; this checks the wiring of --otlp-endpoint end to end over HTTP.
const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function collector(): Promise<{
  url: string;
  received: Array<{ path: string; type: string; bytes: number }>;
}> {
  const received: Array<{ path: string; type: string; bytes: number }> = [];
  const server = http.createServer((req, res) => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      received.push({ path: req.url ?? '', type: String(req.headers['content-type']), bytes });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

describe('OTLP/HTTP export', () => {
  it('posts metrics to <endpoint>/v1/metrics and spans to <endpoint>/v1/traces', async () => {
    const { url, received } = await collector();
    const telemetry = new Telemetry({
      sources: fakeSources().sources,
      log: silentLog,
      otlpEndpoint: url,
      metricsExportIntervalMs: 3_600_000,
    });
    telemetry.start();
    // When a WAL object is sealed and uploaded (the events the writer publishes)
    const seal: WalSealEvent = { objectKey: 'k1', size: 1_000, batchCount: 2, reason: 'size', ageMs: 4 };
    const start: WalUploadStartEvent = { objectKey: 'k1', size: 1_000, batchCount: 2, queuedMs: 0 };
    const end: WalUploadEndEvent = {
      objectKey: 'k1',
      size: 1_000,
      batchCount: 2,
      attempts: 1,
      durationMs: 3,
      error: undefined,
    };
    channel(WAL_WRITER_CHANNELS.seal).publish(seal);
    channel(WAL_WRITER_CHANNELS.uploadStart).publish(start);
    channel(WAL_WRITER_CHANNELS.uploadEnd).publish(end);
    // And telemetry stops (which flushes both exporters)
    await telemetry.stop();
    // Then the collector got both signals (the -otlp-http exporters send OTLP as JSON)
    const paths = received.map((r) => r.path);
    expect(paths).toContain('/v1/metrics');
    expect(paths).toContain('/v1/traces');
    expect(received.map((r) => r.type)).toEqual(received.map(() => 'application/json'));
    expect(received.every((r) => r.bytes > 0)).toBe(true);
  });
});
