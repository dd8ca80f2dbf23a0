import { channel } from 'node:diagnostics_channel';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AdminServer } from '../../src/admin/admin-server.js';
import { Readiness, Telemetry } from '../../src/telemetry/index.js';
import { WAL_WRITER_CHANNELS, type WalUploadEndEvent } from '../../src/wal/channels.js';
import { fakeSources, silentLog } from './fixtures.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

async function admin(routes: ConstructorParameters<typeof AdminServer>[1]): Promise<string> {
  const port = await freePort();
  const server = new AdminServer({ host: '127.0.0.1', port }, routes, silentLog);
  await server.start();
  cleanups.push(() => server.stop());
  return `http://127.0.0.1:${port}`;
}

/** Prometheus text: metric name → { type, samples: [labels, value] }. */
function parsePrometheus(text: string) {
  const types = new Map<string, string>();
  const samples: Array<{ name: string; labels: string; value: number }> = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name!, type!);
    } else if (line !== '' && !line.startsWith('#')) {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not a sample line: ${line}`);
      samples.push({ name: match[1]!, labels: match[2] ?? '', value: Number(match[3]) });
    }
  }
  return { types, samples };
}

describe('/metrics', () => {
  it('serves Prometheus text with typed metrics, and a counter increments', async () => {
    const fake = fakeSources();
    const telemetry = new Telemetry({ sources: fake.sources, log: silentLog });
    telemetry.start();
    cleanups.push(() => telemetry.stop());
    const url = await admin({
      counters: () => ({}),
      healthy: () => true,
      metrics: () => telemetry.prometheusText(),
    });

    fake.fetchStrip.bytesReferenced = 100;
    // A histogram appears once it has a recording.
    channel(WAL_WRITER_CHANNELS.uploadEnd).publish({
      objectKey: 'k',
      size: 10,
      batchCount: 1,
      attempts: 1,
      durationMs: 7,
      error: undefined,
    } satisfies WalUploadEndEvent);
    const first = await fetch(`${url}/metrics`);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const a = parsePrometheus(await first.text());
    expect(a.types.get('walproxy_replication_bytes_total')).toBe('counter');
    expect(a.types.get('walproxy_wal_pending_bytes')).toBe('gauge');
    expect(a.types.get('walproxy_connections_active')).toBe('gauge');
    expect(a.types.get('walproxy_wal_upload_duration')).toBe('histogram');
    expect(a.samples.find((s) => s.name === 'walproxy_wal_upload_duration_count')?.value).toBe(1);
    const referenced = (p: ReturnType<typeof parsePrometheus>) =>
      p.samples.find(
        (s) =>
          s.name === 'walproxy_replication_bytes_total' &&
          s.labels.includes('side="leader"') &&
          s.labels.includes('path="referenced"'),
      )?.value;
    expect(referenced(a)).toBe(100);

    fake.fetchStrip.bytesReferenced = 250;
    const b = parsePrometheus(await (await fetch(`${url}/metrics`)).text());
    expect(referenced(b)).toBe(250);
  });
});

describe('/readyz', () => {
  it('is 200 while the upstream accepts connections and 503 once its port is closed', async () => {
    const upstream = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const { port } = upstream.address() as net.AddressInfo;
    const readiness = new Readiness({ upstream: { host: '127.0.0.1', port } });
    const url = await admin({ counters: () => ({}), healthy: () => true, ready: () => readiness.check() });

    const up = await fetch(`${url}/readyz`);
    expect(up.status).toBe(200);
    expect(await up.json()).toMatchObject({ ready: true, upstream: { ok: true } });

    await new Promise((r) => upstream.close(r));
    const down = await fetch(`${url}/readyz`);
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({ ready: false, upstream: { ok: false } });
    // Liveness does not depend on the upstream.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });

  it('is 503 when the store refuses a write, and re-checks the store at most every 10 s', async () => {
    const upstream = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => upstream.close(r)));
    const { port } = upstream.address() as net.AddressInfo;
    let now = 0;
    let validations = 0;
    let writable = false;
    const store = {
      validate: async () => {
        validations++;
        if (!writable) throw new Error('AccessDenied');
      },
    };
    const readiness = new Readiness({ upstream: { host: '127.0.0.1', port }, store, now: () => now });

    const failed = await readiness.check();
    expect(failed).toMatchObject({ ready: false, upstream: { ok: true }, store: { ok: false } });
    expect(failed.store?.error).toContain('AccessDenied');
    writable = true;
    now = 9_999;
    expect((await readiness.check()).ready).toBe(false);
    expect(validations).toBe(1);
    now = 10_000;
    expect((await readiness.check()).ready).toBe(true);
    expect(validations).toBe(2);
  });
});
