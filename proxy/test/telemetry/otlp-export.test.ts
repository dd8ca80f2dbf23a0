import { channel } from 'node:diagnostics_channel';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/log.js';
import { Telemetry } from '../../src/telemetry/index.js';
import { TELEMETRY_STOP_TIMEOUT_MS } from '../../src/telemetry/telemetry.js';
import {
  WAL_WRITER_CHANNELS,
  type WalSealEvent,
  type WalUploadEndEvent,
  type WalUploadStartEvent,
} from '../../src/wal/channels.js';
import { fakeSources, silentLog } from './fixtures.js';

// A stand-in OTLP/HTTP collector: it records what the exporters POST. Nothing a real broker could
// answer is involved; this checks the wiring of --otlp-endpoint end to end over HTTP.
const servers: Array<http.Server | net.Server> = [];
const hungSockets = new Set<net.Socket>();
afterEach(async () => {
  vi.unstubAllEnvs();
  for (const socket of hungSockets) socket.destroy();
  hungSockets.clear();
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

  it('samples traces as OTEL_TRACES_SAMPLER says (the Helm chart’s walproxy.tracing values)', async () => {
    // Given the sampler variables the chart sets, recording no trace
    vi.stubEnv('OTEL_TRACES_SAMPLER', 'traceidratio');
    vi.stubEnv('OTEL_TRACES_SAMPLER_ARG', '0');
    const { url, received } = await collector();
    const telemetry = new Telemetry({
      sources: fakeSources().sources,
      log: silentLog,
      otlpEndpoint: url,
      metricsExportIntervalMs: 3_600_000,
    });
    telemetry.start();
    // When a WAL object is sealed and uploaded, and telemetry stops
    const event = { objectKey: 'k1', size: 1_000, batchCount: 2 };
    channel(WAL_WRITER_CHANNELS.seal).publish({ ...event, reason: 'size', ageMs: 4 } satisfies WalSealEvent);
    channel(WAL_WRITER_CHANNELS.uploadStart).publish({ ...event, queuedMs: 0 } satisfies WalUploadStartEvent);
    channel(WAL_WRITER_CHANNELS.uploadEnd).publish({
      ...event,
      attempts: 1,
      durationMs: 3,
      error: undefined,
    } satisfies WalUploadEndEvent);
    await telemetry.stop();
    // Then metrics went out and no span did
    const paths = received.map((r) => r.path);
    expect(paths).toContain('/v1/metrics');
    expect(paths).not.toContain('/v1/traces');
  });

  it('stops within its bound when the collector accepts and never answers', async () => {
    // Given a collector that takes connections and never answers (hung)
    const url = await hungCollector();
    const lines: Array<{ msg: string; timeoutMs?: number }> = [];
    const telemetry = new Telemetry({
      sources: fakeSources().sources,
      log: createLogger('warn', { write: (line: string) => lines.push(JSON.parse(line)) }),
      otlpEndpoint: url,
      metricsExportIntervalMs: 3_600_000,
    });
    telemetry.start();
    // When telemetry stops (its last metrics export goes to the hung collector)
    const began = performance.now();
    await telemetry.stop();
    const tookMs = performance.now() - began;
    // Then it gave up at its bound, saying so, instead of waiting out the exporter's 10 s
    expect(tookMs).toBeLessThan(TELEMETRY_STOP_TIMEOUT_MS + SCHEDULING_SLACK_MS);
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: expect.stringContaining('telemetry shutdown abandoned'),
        timeoutMs: TELEMETRY_STOP_TIMEOUT_MS,
      }),
    );
  });
});

/** Timers and the event loop on a loaded machine: what a bound may be overrun by. */
const SCHEDULING_SLACK_MS = 500;

/** An OTLP endpoint that accepts connections and never answers. */
async function hungCollector(): Promise<string> {
  const server = net.createServer((socket) => {
    hungSockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
