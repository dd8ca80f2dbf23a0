/**
 * A front for a real S3 API server that injects the store faults the contract tests need: an
 * error answer (503 SlowDown, 403 AccessDenied, …), a request that is never answered, a connection
 * reset. Requests with no fault queued are forwarded to the server byte for byte (signatures stay
 * valid: the Host header is the front's, as signed).
 */
import { Agent, createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type Fault =
  | { kind: 'answer'; status: number; code: string; message?: string }
  | { kind: 'hang' }
  | { kind: 'reset' }
  /** Forward the request with the first body byte flipped, as a bad NIC or memory would. */
  | { kind: 'corrupt' };

export interface FaultFront {
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  /** Requests received, faulted or forwarded. */
  readonly requests: number;
  /** Faults for the next requests, in order; `always` applies once the queue is empty. */
  queue(...faults: Fault[]): void;
  always(fault: Fault | undefined): void;
  /** Resolves when a hung request's connection has been closed by the client. */
  hungClosed(): Promise<void>;
  /** Resolves once `n` requests in all have been received. */
  received(n: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startFaultFront(upstream: string): Promise<FaultFront> {
  const target = new URL(upstream);
  const agent = new Agent({ keepAlive: true });
  const faults: Fault[] = [];
  let standing: Fault | undefined;
  let requests = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  const closedWaiters: (() => void)[] = [];
  const sockets = new Set<Socket>();

  const forward = (req: IncomingMessage, res: ServerResponse, corrupt = false) => {
    const upstreamReq = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        agent,
      },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        upstreamRes.pipe(res);
      },
    );
    upstreamReq.on('error', (err) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`fault front: upstream failed: ${err.message}`);
    });
    if (!corrupt) {
      req.pipe(upstreamReq);
      return;
    }
    let first = true;
    req.on('data', (chunk: Buffer) => {
      if (first && chunk.length > 0) {
        chunk[0] = chunk[0]! ^ 0xff;
        first = false;
      }
      upstreamReq.write(chunk);
    });
    req.on('end', () => upstreamReq.end());
  };

  const server = createServer((req, res) => {
    requests++;
    for (const waiter of waiters.filter((w) => requests >= w.n)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    const fault = faults.shift() ?? standing;
    if (fault === undefined) return forward(req, res);
    switch (fault.kind) {
      case 'answer': {
        req.resume();
        const body =
          '<?xml version="1.0" encoding="UTF-8"?>\n' +
          `<Error><Code>${fault.code}</Code><Message>${fault.message ?? 'injected by the fault front'}</Message></Error>`;
        res.writeHead(fault.status, {
          'content-type': 'application/xml',
          'content-length': Buffer.byteLength(body),
        });
        res.end(req.method === 'HEAD' ? undefined : body);
        return;
      }
      case 'hang':
        req.resume();
        req.socket.once('close', () => {
          for (const resolve of closedWaiters.splice(0)) resolve();
        });
        return;
      case 'reset':
        req.socket.resetAndDestroy();
        return;
      case 'corrupt':
        return forward(req, res, true);
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    queue(...more) {
      faults.push(...more);
    },
    always(fault) {
      standing = fault;
    },
    hungClosed() {
      return new Promise((resolve) => closedWaiters.push(resolve));
    },
    received(n) {
      if (requests >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      agent.destroy();
      await closed;
    },
  };
}
