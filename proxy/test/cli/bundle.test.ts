import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
// The options `node proxy/bundle.mjs` builds with (on the compiled dist/cli/main.js, which
// `make test-unit` builds first).
import { BUNDLE_OPTIONS } from '../../bundle.mjs';

/** The bundle `make build` writes, and the same program unbundled. */
const BUNDLED_CLI = fileURLToPath(new URL('../../dist/cli/walproxy.mjs', import.meta.url));
const UNBUNDLED_CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** The packages whose code the entry chunk holds (own code as `(walproxy)`), with their bytes. */
function packagesOf(output: Metafile['outputs'][string]): Map<string, number> {
  const bytes = new Map<string, number>();
  for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
    const name = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? '(walproxy)';
    bytes.set(name, (bytes.get(name) ?? 0) + bytesInOutput);
  }
  return bytes;
}

describe('the bundled CLI', () => {
  it('keeps the AWS SDK, kafkajs and the OpenTelemetry SDK out of the entry chunk: they load after the listeners open', async () => {
    // Given the bundle as `make build` makes it
    const result = await build({ ...BUNDLE_OPTIONS, write: false, metafile: true, logLevel: 'silent' });
    const outputs = Object.entries(result.metafile.outputs);
    const [, entry] = outputs.find(([file]) => file.endsWith('dist/cli/walproxy.mjs'))!;

    // Then the entry chunk, everything a sidecar parses and evaluates before `sidecar ready`,
    // holds none of the heavy packages (a static import of any of them anywhere on the start path
    // would pull it back in: issue #12, ready within 2 s)
    const packages = [...packagesOf(entry).keys()];
    expect(
      packages.filter((p) =>
        /^@aws-sdk\/|^@smithy\/|^kafkajs$|^@opentelemetry\/sdk-|^@opentelemetry\/exporter-/.test(p),
      ),
    ).toEqual([]);
    // And they are in the bundle all the same, in chunks of their own
    const lazy = outputs
      .filter(([file]) => file.includes('/chunks/'))
      .flatMap(([, o]) => [...packagesOf(o).keys()]);
    expect(lazy).toEqual(
      expect.arrayContaining(['@aws-sdk/client-s3', 'kafkajs', '@opentelemetry/sdk-metrics']),
    );
    // And the entry stays small (4.1 MB when it held everything)
    expect(entry.bytes).toBeLessThan(1_500_000);
  });

  it('leaves the YAML parser out of the entry, and still reads a --config file, named as a flag or by WALPROXY_CONFIG', async () => {
    // Given the bundle's entry chunk
    const result = await build({ ...BUNDLE_OPTIONS, write: false, metafile: true, logLevel: 'silent' });
    const [, entry] = Object.entries(result.metafile.outputs).find(([file]) =>
      file.endsWith('dist/cli/walproxy.mjs'),
    )!;
    // Then yaml (~250 KB) is not in it
    expect([...packagesOf(entry).keys()]).not.toContain('yaml');

    // And the bundled CLI (as `make build` wrote it) reads a config file all the same
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-bundle-'));
    try {
      const file = path.join(dir, 'walproxy.yaml');
      writeFileSync(file, 'broker-id: 7\nclient-listen: 127.0.0.1:1\nlog-level: from-file\n');
      for (const [args, env] of [
        [['sidecar', `--config=${file}`], {}],
        [['sidecar'], { WALPROXY_CONFIG: file }],
      ] as const) {
        const run = spawnSync(process.execPath, [BUNDLED_CLI, ...args], {
          encoding: 'utf8',
          env: { PATH: process.env.PATH, ...env },
        });
        expect(run.status).toBe(2);
        expect(run.stderr).toContain("--log-level: 'from-file' is not one of");
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('does not evaluate string-width at start (an Intl.Segmenter and an emoji RegExp: ~25 ms), and --help lays out as unbundled', () => {
    // Given the bundled CLI, run with Intl.Segmenter counted
    const counting = `data:text/javascript,${encodeURIComponent(
      'const S = Intl.Segmenter; let n = 0;' +
        'Intl.Segmenter = class extends S { constructor(...a) { super(...a); n++; } };' +
        "process.on('exit', () => process.stderr.write('segmenters=' + n + '\\n'));",
    )}`;
    const count = (args: string[]) =>
      spawnSync(process.execPath, ['--import', counting, BUNDLED_CLI, ...args], { encoding: 'utf8' });

    // When it runs a command that prints no help, Then no Segmenter was built
    const version = count(['version']);
    expect(version.stdout).toMatch(/^walproxy /);
    expect(version.stderr).toContain('segmenters=0');
    // And --help, which measures text widths, still builds one and lays out exactly as the
    // unbundled CLI does
    const help = count(['sidecar', '--help']);
    expect(help.stderr).not.toContain('segmenters=0');
    const unbundled = spawnSync(process.execPath, [UNBUNDLED_CLI, 'sidecar', '--help'], { encoding: 'utf8' });
    expect(help.stdout).toBe(unbundled.stdout);
  });

  it('gives the lazily loaded kafkajs chunk its exports: the metadata publisher can build its client', async () => {
    // Given a program that loads kafkajs as the publisher and the wal tools do, bundled with the
    // CLI's options (code splitting makes a CommonJS package a chunk exporting only `default`)
    const dir = mkdtempSync(path.join(os.tmpdir(), 'walproxy-bundle-'));
    try {
      const loader = fileURLToPath(new URL('../../dist/metadata/kafkajs-module.js', import.meta.url));
      const entry = path.join(dir, 'probe.mjs');
      writeFileSync(
        entry,
        `import { loadKafkajs, loadRequestQueue } from ${JSON.stringify(loader)};\n` +
          'const k = await loadKafkajs();\n' +
          'const RequestQueue = await loadRequestQueue();\n' +
          "const q = new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 1000, clientId: 'p', broker: 'b', logger: { debug() {} } });\n" +
          'q.checkPendingRequests();\n' +
          'console.log(typeof k.Kafka, k.CompressionTypes.GZIP, k.logLevel.NOTHING, q.throttleCheckTimeoutId === null);\n' +
          'q.destroy();\n',
      );
      await build({
        ...BUNDLE_OPTIONS,
        entryPoints: { probe: entry },
        outdir: path.join(dir, 'out'),
        logLevel: 'silent',
      });

      // When it runs, Then the constructor and the enums are there, and the request queue's idle
      // timer loop is stopped in the one copy of that module the bundle holds (kafkajs' own)
      const run = spawnSync(process.execPath, [path.join(dir, 'out', 'probe.mjs')], { encoding: 'utf8' });
      expect(run.stderr).toBe('');
      expect(run.stdout.trim()).toBe('function 1 0 true');
      const copies = readdirSync(path.join(dir, 'out'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.mjs'))
        .map(
          (f) =>
            readFileSync(path.join(dir, 'out', f), 'utf8').split('scheduleCheckPendingRequests() {').length -
            1,
        )
        .reduce((a, b) => a + b, 0);
      expect(copies).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
