// A real Prometheus server (Debian package `prometheus`, installed by `make system-deps`) for the
// e2e: it scrapes the sidecars' admin endpoints and answers PromQL over its HTTP API.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface PrometheusOptions {
  /** Admin endpoints to scrape, as http://host:port. */
  targets: string[];
  scrapeIntervalSeconds?: number;
  binary?: string;
  /** Rules files' contents (YAML), loaded and evaluated every scrape interval. */
  rules?: string[];
}

export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  value: string;
}

export interface PromSample {
  metric: Record<string, string>;
  value: number;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class PrometheusServer {
  private output = '';

  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {
    child.stdout?.on('data', (d: Buffer) => this.append(d));
    child.stderr?.on('data', (d: Buffer) => this.append(d));
  }

  private append(data: Buffer): void {
    this.output = (this.output + data.toString()).slice(-20_000);
  }

  /** The last lines Prometheus logged, for failure messages. */
  get log(): string {
    return this.output;
  }

  static async start(options: PrometheusOptions): Promise<PrometheusServer> {
    const dir = await mkdtemp(path.join(tmpdir(), 'walproxy-prometheus-'));
    const port = await freePort();
    const interval = `${options.scrapeIntervalSeconds ?? 1}s`;
    const targets = options.targets.map((t) => new URL(t).host);
    const ruleFiles = (options.rules ?? []).map((_, i) => path.join(dir, `rules-${i}.yaml`));
    await Promise.all(ruleFiles.map((file, i) => writeFile(file, options.rules![i]!)));
    const config = [
      'global:',
      `  scrape_interval: ${interval}`,
      `  scrape_timeout: ${interval}`,
      `  evaluation_interval: ${interval}`,
      ...(ruleFiles.length > 0 ? ['rule_files:', ...ruleFiles.map((f) => `  - '${f}'`)] : []),
      'scrape_configs:',
      '  - job_name: walproxy',
      '    metrics_path: /metrics',
      '    static_configs:',
      `      - targets: [${targets.map((t) => `'${t}'`).join(', ')}]`,
      '',
    ].join('\n');
    await writeFile(path.join(dir, 'prometheus.yml'), config);
    const child = spawn(
      options.binary ?? 'prometheus',
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const server = new PrometheusServer(`http://127.0.0.1:${port}`, child, dir);
    const exited = new Promise<never>((_, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`prometheus exited with ${code}: ${server.log}`)));
    });
    exited.catch(() => undefined);
    try {
      await Promise.race([
        server.waitFor(async () => (await fetch(`${server.url}/-/ready`)).ok, 30_000),
        exited,
      ]);
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  /** Polls `check` until it returns true (errors count as false). */
  async waitFor(check: () => Promise<boolean>, timeoutMs: number, what = 'condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        if (await check()) return;
      } catch {
        // not yet
      }
      if (Date.now() > deadline) throw new Error(`prometheus: ${what} not met within ${timeoutMs} ms`);
      await sleep(250);
    }
  }

  /** Waits until every scrape target reports health "up". */
  async waitForTargetsUp(count: number, timeoutMs = 30_000): Promise<void> {
    await this.waitFor(
      async () => {
        const body = (await (await fetch(`${this.url}/api/v1/targets`)).json()) as {
          data: { activeTargets: Array<{ health: string }> };
        };
        const active = body.data.activeTargets;
        return active.length === count && active.every((t) => t.health === 'up');
      },
      timeoutMs,
      `${count} targets up`,
    );
  }

  /** An instant PromQL query through the HTTP API. */
  async query(promql: string): Promise<PromSample[]> {
    const response = await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await response.json()) as {
      status: string;
      error?: string;
      data: {
        resultType: string;
        result: Array<{ metric: Record<string, string>; value: [number, string] }>;
      };
    };
    if (body.status !== 'success') throw new Error(`PromQL ${promql}: ${body.error}`);
    return body.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  }

  /** Alerts pending or firing now (the rules files' alerting rules). */
  async alerts(): Promise<PromAlert[]> {
    const body = (await (await fetch(`${this.url}/api/v1/alerts`)).json()) as {
      status: string;
      data: { alerts: PromAlert[] };
    };
    if (body.status !== 'success') throw new Error('prometheus /api/v1/alerts failed');
    return body.data.alerts;
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
