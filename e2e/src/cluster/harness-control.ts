// The shared cluster's processes belong to the global setup (the vitest main process); test files
// run in workers and get only the serializable ClusterInfo. A file that kills one of those
// processes (e2e/test/operator-view.test.ts: a sidecar SIGKILLed, a broker frozen) asks the
// global setup to start it again over this loopback HTTP port, so the process stays the
// harness's: the cluster's teardown stops it, and the files after get the cluster back whole.
//
//   GET  /pids                 {"sidecars":{"1":pid,…},"brokers":{"1":pid,…}}
//   POST /sidecars/<id>/start  starts the sidecar if it is not running; answers once it is ready
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the control port needs of a KafkaCluster. */
export interface ControlledCluster {
  readonly sidecars: ReadonlyMap<number, { readonly pid?: number | undefined; readonly running: boolean }>;
  readonly brokers: ReadonlyMap<number, { readonly pid?: number | undefined }>;
  startSidecar(id: number): Promise<void>;
}

export interface ClusterPids {
  sidecars: Record<number, number>;
  brokers: Record<number, number>;
}

function pidsOf(map: ReadonlyMap<number, { readonly pid?: number | undefined }>): Record<number, number> {
  return Object.fromEntries([...map].flatMap(([id, p]) => (p.pid === undefined ? [] : [[id, p.pid]])));
}

/** Serves the control port on 127.0.0.1; resolves with its URL and a close function. */
export async function serveHarnessControl(
  cluster: ControlledCluster,
): Promise<{ url: string; close: () => Promise<void> }> {
  // One start at a time per sidecar: a retried request must not spawn a second process.
  const starting = new Map<number, Promise<void>>();
  const server: Server = createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const start = req.method === 'POST' ? /^\/sidecars\/(\d+)\/start$/.exec(req.url ?? '') : null;
    if (req.method === 'GET' && req.url === '/pids') {
      const pids: ClusterPids = {
        sidecars: pidsOf(cluster.sidecars),
        brokers: pidsOf(cluster.brokers),
      };
      reply(200, pids);
    } else if (start) {
      const id = Number(start[1]);
      const sidecar = cluster.sidecars.get(id);
      if (!sidecar) return reply(404, { error: `no sidecar ${id}` });
      if (sidecar.running && !starting.has(id)) return reply(200, { pid: sidecar.pid });
      const started = starting.get(id) ?? cluster.startSidecar(id).finally(() => starting.delete(id));
      starting.set(id, started);
      started.then(
        () => reply(200, { pid: cluster.sidecars.get(id)?.pid }),
        (error: Error) => reply(500, { error: error.message }),
      );
    } else {
      reply(404, { error: `${req.method} ${req.url}` });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The test files' side of the control port (ClusterInfo.controlUrl). */
export class HarnessControl {
  constructor(private readonly url: string) {}

  async pids(): Promise<ClusterPids> {
    const response = await fetch(`${this.url}/pids`);
    if (!response.ok) throw new Error(`harness control /pids: HTTP ${response.status}`);
    return (await response.json()) as ClusterPids;
  }

  /** Starts sidecar `id` again if it is not running (killed); resolves once it is ready. */
  async startSidecar(id: number): Promise<number> {
    const response = await fetch(`${this.url}/sidecars/${id}/start`, { method: 'POST' });
    const body = (await response.json()) as { pid?: number; error?: string };
    if (!response.ok || body.pid === undefined) {
      throw new Error(`harness control: sidecar ${id} did not start: ${body.error ?? response.status}`);
    }
    return body.pid;
  }
}
