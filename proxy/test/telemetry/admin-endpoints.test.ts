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

describe('walproxy_store_healthy', () => {
  it('is 0 while the store is degraded and 1 once it is usable', async () => {
    // Given a sidecar's telemetry whose store starts degraded
    let usable = false;
    const fake = fakeSources();
    const telemetry = new Telemetry({
      sources: { ...fake.sources, store: () => ({ usable }) },
      log: silentLog,
    });
    telemetry.start();
    cleanups.push(() => telemetry.stop());
    const url = await admin({
      counters: () => ({}),
      healthy: () => true,
      metrics: () => telemetry.prometheusText(),
    });
    const healthy = async () => {
      const parsed = parsePrometheus(await (await fetch(`${url}/metrics`)).text());
      expect(parsed.types.get('walproxy_store_healthy')).toBe('gauge');
      return parsed.samples.find((s) => s.name === 'walproxy_store_healthy')?.value;
    };
    expect(await healthy()).toBe(0);
    // When the store answers
    usable = true;
    // Then the gauge says so
    expect(await healthy()).toBe(1);
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

  it('stays 200 while the store is degraded, and reports the store in the body', async () => {
    // Given a reachable broker and a store whose probe fails
    const upstream = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => upstream.close(r)));
    const { port } = upstream.address() as net.AddressInfo;
    let usable = false;
    const store = () => ({
      url: 's3://bucket/wal',
      usable,
      state: usable ? ('healthy' as const) : ('degraded' as const),
      degradations: 0,
      probes: 3,
      probeFailures: 3,
      degradedMsTotal: 1_500,
      ...(usable ? {} : { lastError: 'AccessDenied: not allowed' }),
    });
    const readiness = new Readiness({ upstream: { host: '127.0.0.1', port }, store });
    const url = await admin({ counters: () => ({}), healthy: () => true, ready: () => readiness.check() });

    // Then the pod stays ready (it serves everything inline), and says why the store is not used
    const degraded = await fetch(`${url}/readyz`);
    expect(degraded.status).toBe(200);
    expect(await degraded.json()).toMatchObject({
      ready: true,
      upstream: { ok: true },
      store: { usable: false, state: 'degraded', lastError: 'AccessDenied: not allowed' },
    });
    // And once the store answers, the body says so
    usable = true;
    const healthy = await (await fetch(`${url}/readyz`)).json();
    expect(healthy.store).toMatchObject({ usable: true, state: 'healthy' });
    expect(healthy.store.lastError).toBeUndefined();
  });

  it('is 503 while the sidecar is stopping, so the pod leaves the Service endpoints', async () => {
    const upstream = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => upstream.close(r)));
    const { port } = upstream.address() as net.AddressInfo;
    let stopping = false;
    const readiness = new Readiness({ upstream: { host: '127.0.0.1', port }, stopping: () => stopping });
    expect((await readiness.check()).ready).toBe(true);
    stopping = true;
    expect(await readiness.check()).toMatchObject({ ready: false, stopping: true, upstream: { ok: true } });
  });
});
