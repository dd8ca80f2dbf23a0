import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { formatMeasured, loadCounters, parseMeasuredFlags } from '../../src/cli/cost-command.js';
import {
  countersFromJson,
  countersFromScrapes,
  parsePrometheusText,
} from '../../src/cost/counters-source.js';
import { type MeasuredCounters, priceMeasured } from '../../src/cost/measured.js';
import { DEFAULT_PRICES } from '../../src/cost/prices.js';
import { Telemetry } from '../../src/telemetry/index.js';
import { fakeSources, silentLog } from '../telemetry/fixtures.js';

const RF3_3Z = { replicationFactor: 3, zones: 3 };
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** One hour at 10 MB/s produced, RF 3: 36 GB produced, 72 GB replicated to two followers. */
const HOUR: MeasuredCounters = {
  durationSec: 3_600,
  referencedBytes: 70e9,
  inlineBytes: 2e9,
  puts: 120_000,
  bytesUploaded: 35e9,
  gets: 240_000,
  bytesRead: 70e9,
  sidecarCpuSeconds: 5_400,
};

describe('priceMeasured', () => {
  it('prices the counters against stock replication of the same bytes, arithmetic written out', () => {
    const cost = priceMeasured(HOUR, DEFAULT_PRICES, RF3_3Z, {
      retentionSec: 3_600,
      residualFraction: 0.0114,
    });
    const usd = Object.fromEntries(cost.walproxy.map((l) => [l.item, l.usd]));
    // Stock: every replicated byte (70 + 2 GB) to a follower in another zone × $0.02 = $1.44.
    expect(cost.stockUsd).toBeCloseTo(1.44, 12);
    // PUTs 120,000 × $0.00113/1,000 = $0.1356; upload 35 GB × $0.0032 = $0.112.
    expect(usd['S3 Express One Zone PUT requests']).toBeCloseTo(0.1356, 12);
    expect(usd['S3 Express One Zone upload']).toBeCloseTo(0.112, 12);
    // GETs 240,000 × $0.00003/1,000 = $0.0072; retrieval 70 GB × $0.0006 = $0.042.
    expect(usd['S3 Express One Zone GET requests']).toBeCloseTo(0.0072, 12);
    expect(usd['S3 Express One Zone retrieval']).toBeCloseTo(0.042, 12);
    // Storage: 35 GB each held 1 h = 35 × 3,600 / 2,592,000 GB-months × $0.11 = $0.0053472.
    expect(usd['S3 Express One Zone storage (3600 s each)']).toBeCloseTo((35 * 3_600 * 0.11) / 2_592_000, 12);
    // Cross-zone, no kernel count: inline 2 GB + 1.14 % of the 70 GB referenced = 2.798 GB × $0.02.
    expect(usd['cross-zone (inline bytes + residue, estimated)']).toBeCloseTo(0.05596, 12);
    // CPU: 5,400 s = 1.5 vCPU-hours × $0.0408 = $0.0612, no relaying share given: all the WAL path's.
    expect(usd['sidecar CPU, WAL path']).toBeCloseTo(0.0612, 12);
    const walproxy = 0.1356 + 0.112 + 0.0072 + 0.042 + (35 * 3_600 * 0.11) / 2_592_000 + 0.05596 + 0.0612;
    expect(cost.walproxyUsd).toBeCloseTo(walproxy, 12);
    expect(cost.proxyUsd).toBe(0);
    expect(cost.savedFraction).toBeCloseTo((1.44 - walproxy) / 1.44, 12);
    // A month is 720 such hours.
    expect(cost.perMonth.savedUsd).toBeCloseTo((1.44 - walproxy) * 720, 9);
    expect(cost).toMatchObject({ crossZoneMeasured: false, cpuMeasured: true });
  });

  it('keeps the relaying CPU out of the saving, on a line of its own and in the total', () => {
    // Given 5,400 CPU-s of which 1,800 s relayed bytes (as a stock run through the same sidecars showed)
    const cost = priceMeasured({ ...HOUR, proxyCpuSeconds: 1_800 }, DEFAULT_PRICES, RF3_3Z);
    // Then the WAL path is charged 3,600 s = 1 vCPU-hour = $0.0408, relaying 0.5 h = $0.0204
    expect(cost.walproxy.find((l) => l.key === 'cpu_wal')?.usd).toBeCloseTo(0.0408, 12);
    expect(cost.proxy).toEqual([
      {
        key: 'cpu_proxy',
        item: 'sidecar CPU, relaying (any proxy in front of the broker)',
        quantity: 0.5,
        unit: 'vCPU-hours',
        usd: 0.0204,
      },
    ]);
    // And the saving is stock less walproxy's replication; the net one takes the relaying off too
    expect(cost.savedUsd).toBeCloseTo(cost.stockUsd - cost.walproxyUsd, 12);
    expect(cost.totalUsd).toBeCloseTo(cost.walproxyUsd + 0.0204, 12);
    expect(cost.netSavedUsd).toBeCloseTo(cost.savedUsd - 0.0204, 12);
    // And a relaying share above the measured CPU never makes the WAL path's negative
    const over = priceMeasured({ ...HOUR, proxyCpuSeconds: 9_000 }, DEFAULT_PRICES, RF3_3Z);
    expect(over.walproxy.find((l) => l.key === 'cpu_wal')?.usd).toBe(0);
    expect(over.proxyUsd).toBeCloseTo(0.0612, 12);
  });

  it('takes the kernel’s cross-zone counts when there are some', () => {
    const cost = priceMeasured(
      { ...HOUR, crossZoneBytes: 3e9, stockCrossZoneBytes: 75e9 },
      DEFAULT_PRICES,
      RF3_3Z,
    );
    expect(cost.stockUsd).toBeCloseTo(1.5, 12);
    expect(cost.walproxy.find((l) => l.item === 'cross-zone (kernel-counted)')?.usd).toBeCloseTo(0.06, 12);
    expect(cost.crossZoneMeasured).toBe(true);
  });

  it('all inline, every CPU-second relaying: walproxy replication costs what stock does', () => {
    const inline = {
      ...HOUR,
      referencedBytes: 0,
      inlineBytes: 72e9,
      puts: 0,
      bytesUploaded: 0,
      gets: 0,
      bytesRead: 0,
    };
    const cost = priceMeasured({ ...inline, proxyCpuSeconds: 5_400 }, DEFAULT_PRICES, RF3_3Z);
    expect(cost.savedUsd).toBeCloseTo(0, 12);
    expect(cost.netSavedUsd).toBeCloseTo(-0.0612, 12);
  });

  it('RF 3 over 2 zones: only the follower in another zone counts for stock', () => {
    const cost = priceMeasured(HOUR, DEFAULT_PRICES, { replicationFactor: 3, zones: 2 });
    expect(cost.stockUsd).toBeCloseTo(0.72, 12);
  });
});

describe('counters from /metrics', () => {
  it("reads a sidecar's real /metrics text", async () => {
    const fake = fakeSources();
    const telemetry = new Telemetry({ sources: fake.sources, log: silentLog });
    telemetry.start();
    cleanups.push(() => telemetry.stop());
    fake.writer.uploadAttempts = 12;
    fake.writer.bytesUploaded = 3_400_000;
    fake.reader.gets = 24;
    fake.reader.bytesFetched = 6_800_000;
    fake.fetchStrip.bytesReferenced = 6_700_000;
    fake.fetchStrip.inlineBytes = 100_000;
    fake.fetchFill.bytesFilled = 6_700_000;
    const text = await telemetry.prometheusText();

    const result = countersFromScrapes([{ origin: 'a', text }], 60);
    if ('errors' in result) throw new Error(result.errors.join('\n'));
    expect(result.counters).toMatchObject({
      durationSec: 60,
      puts: 12,
      bytesUploaded: 3_400_000,
      gets: 24,
      bytesRead: 6_800_000,
      referencedBytes: 6_700_000,
      inlineBytes: 100_000,
    });
    // And the process's own CPU, as OpenTelemetry names it, with no bytes relayed to charge to relaying
    expect(result.counters.sidecarCpuSeconds).toBeGreaterThan(0);
    expect(result.counters.proxyCpuSeconds).toBe(0);
  });

  it('sums sidecars, takes the CPU only when every one reports it, and the longest uptime', () => {
    const scrape = (cpu: boolean, uptime: number) =>
      [
        '# TYPE walproxy_wal_upload_attempts_total counter',
        'walproxy_wal_upload_attempts_total 10',
        'walproxy_replication_bytes_total{side="leader",path="referenced"} 1000',
        'walproxy_replication_bytes_total{side="follower",path="referenced"} 999',
        'walproxy_replication_bytes_total{side="leader",path="inline"} 50 1700000000000',
        // 1 GiB from downstream and 2 GiB from upstream relayed: 1.03 + 2 × 0.86 CPU-s relaying
        `walproxy_listener_bytes_total{listener="client",direction="from_downstream"} ${2 ** 30}`,
        `walproxy_listener_bytes_total{listener="replication",direction="from_upstream"} ${2 ** 31}`,
        `walproxy_listener_bytes_total{listener="replication",direction="to_downstream"} ${2 ** 31}`,
        ...(cpu
          ? ['process_cpu_time_total{cpu_mode="user"} 1.5', 'process_cpu_time_total{cpu_mode="system"} 0.5']
          : []),
        `process_uptime ${uptime}`,
      ].join('\n');
    const both = countersFromScrapes(
      [
        { origin: 'a', text: scrape(true, 100) },
        { origin: 'b', text: scrape(true, 120) },
      ],
      undefined,
    );
    expect(both).toMatchObject({
      counters: { durationSec: 120, puts: 20, referencedBytes: 2000, inlineBytes: 100, sidecarCpuSeconds: 4 },
    });
    if ('errors' in both) throw new Error(both.errors.join('\n'));
    expect(both.counters.proxyCpuSeconds).toBeCloseTo(2 * (1.03 + 2 * 0.86), 12);
    const one = countersFromScrapes(
      [
        { origin: 'a', text: scrape(true, 100) },
        { origin: 'b', text: scrape(false, 120) },
      ],
      30,
    );
    expect(one).toMatchObject({ counters: { durationSec: 30, sidecarCpuSeconds: undefined } });
  });

  it('refuses what is not a sidecar scrape, and a scrape without a duration', () => {
    expect(countersFromScrapes([{ origin: 'x', text: 'up 1\n' }], 10)).toEqual({
      errors: ["x: no walproxy_ metrics (is this a sidecar's /metrics?)"],
    });
    expect(
      countersFromScrapes([{ origin: 'a', text: 'walproxy_wal_reader_gets_total 1' }], undefined),
    ).toEqual({
      errors: ['no process_uptime in the scrapes: give --duration (how long the counters counted)'],
    });
  });

  it('parses labels with escapes', () => {
    expect(parsePrometheusText('m{a="x\\"y",b="1"} 2.5\n# HELP m x\n')).toEqual([
      { name: 'm', labels: { a: 'x"y', b: '1' }, value: 2.5 },
    ]);
  });

  it('takes a JSON counters file, strictly', () => {
    expect(countersFromJson({ ...HOUR, crossZoneBytes: 1 }, 'c.json')).toEqual({
      counters: { ...HOUR, crossZoneBytes: 1, stockCrossZoneBytes: undefined, proxyCpuSeconds: undefined },
    });
    expect(countersFromJson({ ...HOUR, puts: -1, bytes: 3 }, 'c.json')).toEqual({
      errors: [
        'c.json: unknown counter "bytes" (known: durationSec, referencedBytes, inlineBytes, puts, bytesUploaded, gets, bytesRead, sidecarCpuSeconds, proxyCpuSeconds, crossZoneBytes, stockCrossZoneBytes)',
        'c.json: "puts" must be a number >= 0, got -1',
      ],
    });
  });
});

describe('walproxy cost --from-metrics', () => {
  it('prices files of scrapes and prints the comparison', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'walproxy-measured-'));
    const file = path.join(dir, 'a.prom');
    writeFileSync(
      file,
      [
        'walproxy_wal_upload_attempts_total 120000',
        'walproxy_wal_bytes_uploaded_total 35000000000',
        'walproxy_wal_reader_gets_total 240000',
        'walproxy_wal_reader_bytes_total 70000000000',
        'walproxy_replication_bytes_total{side="leader",path="referenced"} 70000000000',
        'walproxy_replication_bytes_total{side="leader",path="inline"} 2000000000',
        'process_cpu_time_total{cpu_mode="user"} 5400',
      ].join('\n'),
    );
    const flags = parseMeasuredFlags({
      'from-metrics': [file],
      duration: '1h',
      rf: '3',
      zones: '3',
      retention: '1h',
      residual: '0.0114',
    });
    if ('errors' in flags) throw new Error(flags.errors.join('\n'));
    const loaded = await loadCounters(flags.parsed.sources, flags.parsed.durationSec);
    if ('errors' in loaded) throw new Error(loaded.errors.join('\n'));
    // No listener bytes in the scrape: nothing is charged to relaying
    expect(loaded.counters).toEqual({ ...HOUR, proxyCpuSeconds: 0 });
    const cost = priceMeasured(loaded.counters, DEFAULT_PRICES, flags.parsed.layout);
    const text = formatMeasured(1, loaded.counters, flags.parsed.layout, DEFAULT_PRICES, cost);
    console.log(text);
    expect(text).toMatch(
      /^saved: \$1\.02 this run, \$734\.90 per month at its rate \(70\.9 % of stock\); net of relaying \$734\.90 per month$/m,
    );
    expect(text).toContain('cross-zone bytes estimated');
    expect(text).not.toContain('NOT MEASURED');
  });

  it('refuses a rate and metrics together', () => {
    expect(
      parseMeasuredFlags({
        'from-metrics': ['x'],
        'throughput-mbps': '3',
        rf: '3',
        zones: '3',
        retention: '1h',
        residual: '0',
      }),
    ).toEqual({
      errors: ['--from-metrics: prices what was measured; leave out --throughput-mbps (a hypothetical rate)'],
    });
  });
});
