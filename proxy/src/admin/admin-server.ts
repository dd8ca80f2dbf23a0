import http from 'node:http';
import type { Logger } from '../log.js';
import type { HostPort } from '../net/proxy-listener.js';

export interface AdminRoutes {
  /** JSON counters of every listener. */
  counters(): unknown;
  /** Liveness: the process serves. */
  healthy(): boolean;
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
