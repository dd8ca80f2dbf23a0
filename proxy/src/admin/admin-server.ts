import http from 'node:http';
import type { Logger } from '../log.js';
import type { HostPort } from '../net/proxy-listener.js';

export interface AdminRoutes {
  /** JSON counters of every listener. */
  counters(): unknown;
  /** Liveness: the process serves. */
  healthy(): boolean;
  /** Readiness (/readyz): 200 when `ready`, else 503; the report is the JSON body. */
  ready?(): Promise<{ ready: boolean }>;
  /** Prometheus text exposition (/metrics). */
  metrics?(): Promise<string>;
}

/** A small HTTP server for probes and counters; never on the data path. */
export class AdminServer {
  private readonly server: http.Server;

  constructor(
    private readonly listen: HostPort,
    routes: AdminRoutes,
    private readonly log: Logger,
  ) {
    this.server = http.createServer((request, response) => {
      const path = (request.url ?? '/').split('?')[0];
      if (request.method !== 'GET') {
        response.writeHead(405).end();
      } else if (path === '/counters') {
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify(routes.counters()));
      } else if (path === '/healthz') {
        const ok = routes.healthy();
        response.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok\n' : 'unhealthy\n');
      } else if (path === '/readyz' && routes.ready) {
        routes.ready().then(
          (report) =>
            response
              .writeHead(report.ready ? 200 : 503, { 'content-type': 'application/json' })
              .end(`${JSON.stringify(report)}\n`),
          (error: Error) =>
            response.writeHead(503, { 'content-type': 'text/plain' }).end(`not ready: ${error.message}\n`),
        );
      } else if (path === '/metrics' && routes.metrics) {
        routes.metrics().then(
          (text) =>
            response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(text),
          (error: Error) => {
            this.log.debug({ error: error.message }, 'metrics collection failed');
            response.writeHead(500, { 'content-type': 'text/plain' }).end(`# metrics collection failed\n`);
          },
        );
      } else {
        response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      }
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.listen.port, this.listen.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.log.info({ listen: `${this.listen.host}:${this.listen.port}` }, 'admin endpoint listening');
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
