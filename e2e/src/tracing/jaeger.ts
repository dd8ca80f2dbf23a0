// A real tracing backend for the e2e: Jaeger v2 (`make jaeger` builds it from the Go module proxy
// into .cache/bin) with its OTLP/HTTP receiver, in-memory storage and query API, each on a free
// loopback port. The sidecars export to `otlpEndpoint`; `traces()` reads them back through the
// same HTTP API the Jaeger UI uses.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../cluster/paths.js';

export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  /** CHILD_OF (parent) and FOLLOWS_FROM (OTLP span links) references. */
  references: Array<{ refType: 'CHILD_OF' | 'FOLLOWS_FROM'; traceID: string; spanID: string }>;
  startTime: number;
  duration: number;
  tags: Array<{ key: string; type: string; value: unknown }>;
  processID: string;
}

export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string; tags: Array<{ key: string; value: unknown }> }>;
}

async function freePort(host: string): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, host, r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** .cache/bin/jaeger (`make jaeger`), or $WALPROXY_JAEGER. */
export function jaegerBinary(): string {
  const binary = process.env.WALPROXY_JAEGER ?? path.join(repoRoot(), '.cache/bin/jaeger');
  if (!existsSync(binary)) throw new Error(`${binary} not found: run \`make jaeger\``);
  return binary;
}

export class Jaeger {
  #output = '';

  private constructor(
    /** Where the sidecars send OTLP/HTTP (`--otlp-endpoint`). */
    readonly otlpEndpoint: string,
    /** The query API and UI. */
    readonly queryUrl: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {
    const append = (d: Buffer) => {
      this.#output = (this.#output + d.toString()).slice(-20_000);
    };
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
  }

  get log(): string {
    return this.#output;
  }

  /**
   * `host`: the address Jaeger listens on (default loopback); processes in other network
   * namespaces reach the root namespace at ZoneNetwork.clientAddress.
   */
  static async start({ host = '127.0.0.1' }: { host?: string } = {}): Promise<Jaeger> {
    const binary = jaegerBinary();
    const dir = await mkdtemp(path.join(tmpdir(), 'walproxy-jaeger-'));
    const [otlp, query, queryGrpc] = [await freePort(host), await freePort(host), await freePort(host)];
    // Only what the test needs: OTLP/HTTP in, memory storage, the query API; the collector's own
    // telemetry off (its default Prometheus port is fixed).
    const config = `
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics: { level: none }
    logs: { level: warn }
extensions:
  jaeger_query:
    storage: { traces: memstore }
    http: { endpoint: ${host}:${query} }
    grpc: { endpoint: ${host}:${queryGrpc} }
  jaeger_storage:
    backends:
      memstore: { memory: { max_traces: 100000 } }
receivers:
  otlp:
    protocols:
      http: { endpoint: ${host}:${otlp} }
processors:
  batch: { timeout: 200ms }
exporters:
  jaeger_storage_exporter: { trace_storage: memstore }
`;
    const configFile = path.join(dir, 'jaeger.yaml');
    await writeFile(configFile, config);
    const child = spawn(binary, ['--config', `file:${configFile}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    const jaeger = new Jaeger(`http://${host}:${otlp}`, `http://${host}:${query}`, child, dir);
    const exited = new Promise<never>((_, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`jaeger exited with ${code}: ${jaeger.log}`)));
    });
    exited.catch(() => undefined);
    try {
      await Promise.race([jaeger.#waitReady(30_000), exited]);
    } catch (error) {
      await jaeger.stop();
      throw error;
    }
    return jaeger;
  }

  async #waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        if ((await fetch(`${this.queryUrl}/api/services`)).ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`jaeger not ready within ${timeoutMs} ms: ${this.log}`);
      await sleep(200);
    }
  }

  /** Services that reported spans. */
  async services(): Promise<string[]> {
    const body = (await (await fetch(`${this.queryUrl}/api/services`)).json()) as { data: string[] | null };
    return body.data ?? [];
  }

  /** Traces of `service` with a span named `operation` (optional), newest first, at most `limit`. */
  async traces(
    service: string,
    options: { operation?: string; limit?: number; tags?: Record<string, string> } = {},
  ): Promise<JaegerTrace[]> {
    const params = new URLSearchParams({ service, limit: String(options.limit ?? 100), lookback: '1h' });
    if (options.operation) params.set('operation', options.operation);
    if (options.tags) params.set('tags', JSON.stringify(options.tags));
    const response = await fetch(`${this.queryUrl}/api/traces?${params}`);
    const body = (await response.json()) as { data: JaegerTrace[] | null; errors?: unknown };
    if (!response.ok)
      throw new Error(`jaeger /api/traces: HTTP ${response.status} ${JSON.stringify(body.errors)}`);
    return body.data ?? [];
  }

  /** One trace by id. */
  async trace(traceId: string): Promise<JaegerTrace | undefined> {
    const response = await fetch(`${this.queryUrl}/api/traces/${traceId}`);
    if (response.status === 404) return undefined;
    const body = (await response.json()) as { data: JaegerTrace[] };
    return body.data[0];
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
