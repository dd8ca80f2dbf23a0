/**
 * The store front's own process (started by store-front.ts; its CPU is read from /proc apart from
 * the sidecars' and the S3 server's). An HTTP/1.1 forwarder in front of a real S3 server that
 * holds each response's first byte for a latency drawn per request, and injects the faults a test
 * switches on at runtime through the control port. Only node builtins: it runs on every request of
 * a benchmark, so it does as little per request as it can.
 *
 * Over the 600 lines scripts/check-imports.mjs allows (its allow-list says so too): one process by
 * design, started as a single file with only node builtins, so its fault modes live beside it.
 *
 * node:http on both sides. Request bodies are gathered (see GATHER_REQUEST_BYTES), responses
 * streamed chunk by chunk with backpressure. Measured at 1–1.8 CPU-seconds per GB for 400 KB PUTs
 * and GETs and 0.17–0.28 ms per request, a quarter of versitygw's own per-request cost
 * (docs/object-store.md), so a raw TCP forwarder that parses HTTP itself was not worth its risks.
 *
 * Usage: node store-front-process.js '<ProcessConfig as JSON>'. It prints one JSON line
 * `{"port":P,"controlPort":C}` once both ports listen, and exits when its stdin closes (the
 * parent is gone, even if killed) or on SIGTERM.
 */
import { randomBytes } from 'node:crypto';
import {
  Agent,
  type ClientRequest,
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

export const STORE_OPERATIONS = ['get', 'put', 'head', 'list', 'delete', 'other'] as const;
/**
 * What a request is, from its method and path-style URL: `get` GetObject (ranged or not), `put`
 * PutObject, `head` HeadObject/HeadBucket, `list` a GET on a bucket (ListObjectsV2), `delete`
 * DeleteObjects (POST ?delete) or DeleteObject, `other` the rest (CreateBucket, ListBuckets...).
 */
export type StoreOperation = (typeof STORE_OPERATIONS)[number];

export const STORE_FRONT_MODES = ['normal', 'freeze', 'refuse', 'slowdown', 'slow-get', 'slow-put'] as const;
/**
 * - `normal`: forwarded, with the configured latency.
 * - `freeze`: requests are read but nothing is answered, and responses under way stop, until the
 *   mode changes (then they proceed): a SIGSTOPped server as seen from outside.
 * - `refuse`: requests are answered with a TCP reset; when every operation refuses, the port stops
 *   listening (new connections get ECONNREFUSED) and every open connection is reset.
 * - `slowdown`: `503 SlowDown` with S3's XML error body, not forwarded.
 * - `slow-get` / `slow-put`: GetObject (PutObject) responses get `delayMs` more before their first byte.
 */
export type StoreFrontMode = (typeof STORE_FRONT_MODES)[number];

/** A latency distribution: none, the published S3 Express One Zone figures, or a lognormal through two quantiles. */
export type LatencySpec = 'none' | 's3-express' | { p50Ms: number; p99Ms: number };

export interface ProcessConfig {
  /** `http://host:port` of the S3 server to forward to. */
  upstream: string;
  host: string;
  port: number;
  controlPort: number;
  latency: LatencySpec;
  /** PutObject's first-byte latency; the other operations take `latency`. */
  putLatency: LatencySpec;
}

export interface SetModeRequest {
  mode: StoreFrontMode;
  /** Operations the mode applies to (default all; `slow-get` and `slow-put` name their own). */
  operations?: StoreOperation[];
  /** `slow-get` / `slow-put`: the extra first-byte delay (default 1,000 ms). */
  delayMs?: number;
}

export interface OperationCounters {
  requests: number;
  /** Body bytes received from clients (forwarded upstream, or drained for a 503). */
  requestBytes: number;
  /** Body bytes sent to clients. */
  responseBytes: number;
  /** Milliseconds the front held these requests itself: first-byte latency, slow-* delay, freeze. */
  injectedDelayMs: number;
}

export interface StoreFrontStats {
  /** The mode each operation is in now, with the slow-* delay. */
  modes: Record<StoreOperation, { mode: StoreFrontMode; delayMs: number }>;
  /**
   * Per mode, per operation; a request counts under the mode its operation was in when it arrived
   * (one held by a freeze under `freeze`, though it is forwarded after the thaw).
   */
  counters: Record<StoreFrontMode, Record<StoreOperation, OperationCounters>>;
  connections: {
    accepted: number;
    /** Connections this front reset (refuse), idle ones included. */
    reset: number;
  };
  /** Requests the upstream failed (connection error, reset): the client's connection was reset. */
  upstreamErrors: number;
  /** Requests sent to the upstream a second time after its connection broke before answering. */
  upstreamRetries: number;
}

const DEFAULT_SLOW_DELAY_MS = 1_000;

/**
 * A request body up to this size reaches the upstream in one batch once the client has sent it
 * all (as an S3 client sends a Buffer body), and stays in hand until the answer, so it can be
 * sent again if the upstream connection breaks first; a longer one is streamed.
 */
const GATHER_REQUEST_BYTES = 8 << 20;

/** Standard normal quantiles for the 95th and 99th percentiles. */
const Z95 = 1.6448536269514722;
const Z99 = 2.3263478740408408;

/**
 * The published S3 Express One Zone figures: AWS promises "consistent single-digit millisecond
 * first-byte latency"; a read benchmark (nixiesearch, second-hand; docs/object-store.md, "The
 * store front") gives p50 ≈ 3 ms, p95 ≈ 8 ms, p99 ≈ 15 ms for objects
 * under 1 MB.
 */
export const S3_EXPRESS_FIRST_BYTE_MS = { p50: 3, p95: 8, p99: 15 } as const;

export interface Lognormal {
  medianMs: number;
  /** Standard deviation of ln(latency). */
  sigma: number;
}

/**
 * A lognormal's median and sigma. Two quantiles fix it exactly: median = p50,
 * sigma = ln(p99 / p50) / z99. The S3 Express figures give three: the median is pinned to the
 * published p50 (the best attested number) and sigma is the least-squares fit of
 * ln(q / p50) = sigma * z over p95 and p99, i.e. sigma = Σ z ln(q/p50) / Σ z² ≈ 0.660, which puts
 * p95 at 8.9 ms and p99 at 13.9 ms (against 8 and 15; a lognormal cannot hit all three).
 */
export function lognormalOf(spec: Exclude<LatencySpec, 'none'>): Lognormal {
  if (spec === 's3-express') {
    const { p50, p95, p99 } = S3_EXPRESS_FIRST_BYTE_MS;
    const sigma = (Z95 * Math.log(p95 / p50) + Z99 * Math.log(p99 / p50)) / (Z95 * Z95 + Z99 * Z99);
    return { medianMs: p50, sigma };
  }
  if (!(spec.p50Ms >= 0) || !(spec.p99Ms >= spec.p50Ms)) {
    throw new Error(`latency needs 0 <= p50Ms <= p99Ms, got ${JSON.stringify(spec)}`);
  }
  return { medianMs: spec.p50Ms, sigma: spec.p50Ms === 0 ? 0 : Math.log(spec.p99Ms / spec.p50Ms) / Z99 };
}

/** Milliseconds drawn from the distribution; `none` is always 0. */
export function latencySampler(spec: LatencySpec): () => number {
  if (spec === 'none') return () => 0;
  const { medianMs, sigma } = lognormalOf(spec);
  if (sigma === 0) return () => medianMs;
  return () => {
    // Box-Muller: a standard normal from two uniforms (1 - random() is in (0, 1], so log is finite).
    const z = Math.sqrt(-2 * Math.log(1 - Math.random())) * Math.cos(2 * Math.PI * Math.random());
    return medianMs * Math.exp(sigma * z);
  };
}

/** The operation of a path-style request (the front is addressed by IP, so the SDK uses path-style). */
export function classifyRequest(method: string | undefined, url: string | undefined): StoreOperation {
  const target = url ?? '/';
  const queryAt = target.indexOf('?');
  const path = queryAt === -1 ? target : target.slice(0, queryAt);
  const keyAt = path.indexOf('/', 1);
  const hasKey = keyAt !== -1 && keyAt < path.length - 1;
  const hasBucket = path.length > 1;
  switch (method) {
    case 'GET':
      return hasKey ? 'get' : hasBucket ? 'list' : 'other';
    case 'PUT':
      return hasKey ? 'put' : 'other';
    case 'HEAD':
      return hasBucket ? 'head' : 'other';
    case 'DELETE':
      return hasKey ? 'delete' : 'other';
    case 'POST':
      return !hasKey && queryAt !== -1 && /(^|&)delete(=|&|$)/.test(target.slice(queryAt + 1))
        ? 'delete'
        : 'other';
    default:
      return 'other';
  }
}

/** Hop-by-hop headers (RFC 9110 7.6.1) each side of the front sets for itself; `expect` is answered here. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'expect',
]);

function endToEnd(rawHeaders: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!HOP_BY_HOP.has(rawHeaders[i]!.toLowerCase())) out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return out;
}

/** What S3 answers when it throttles (the SDK reads Code; AWS sends RequestId and HostId too). */
function slowDownBody(requestId: string): string {
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>' +
    `<RequestId>${requestId}</RequestId><HostId>${randomBytes(24).toString('base64')}</HostId></Error>`
  );
}

function zeroCounters(): StoreFrontStats['counters'] {
  const perOperation = () =>
    Object.fromEntries(
      STORE_OPERATIONS.map((op) => [
        op,
        { requests: 0, requestBytes: 0, responseBytes: 0, injectedDelayMs: 0 },
      ]),
    ) as Record<StoreOperation, OperationCounters>;
  return Object.fromEntries(
    STORE_FRONT_MODES.map((mode) => [mode, perOperation()]),
  ) as StoreFrontStats['counters'];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Waits at least `ms` by performance.now(). A timer is due by the event loop's millisecond clock,
 * cached at the start of each turn, so by performance.now() it may fire up to a millisecond early:
 * a store front that promises "at least delayMs" waits out the remainder.
 */
async function sleepAtLeast(ms: number): Promise<void> {
  const end = performance.now() + ms;
  for (let left = ms; left > 0; left = end - performance.now()) await sleep(Math.ceil(left));
}

/**
 * Copies `from` into a writable with backpressure, pausing while `held()` (a freeze); `resume()`
 * restarts it once the hold is lifted, and the writable is ended when `from` ends. A body of up to
 * `gatherBytes` is gathered whole and written in one corked batch (one writev, no copy) and kept,
 * so it can be sent again to another writable; a longer one is streamed once it passes that size.
 */
class Pump {
  #to: Writable;
  #pausedAt: number | undefined;
  /** The body so far while it fits in `gatherBytes`; undefined once streaming. */
  #body: Buffer[] | undefined;
  #bodyBytes = 0;
  #ended = false;

  constructor(
    private readonly from: Readable,
    to: Writable,
    gatherBytes: number,
    private readonly held: () => boolean,
    onBytes: (n: number) => void,
    private readonly onHeldMs: (ms: number) => void,
  ) {
    this.#to = to;
    this.#body = gatherBytes > 0 ? [] : undefined;
    to.on('drain', () => this.resume());
    from.on('data', (chunk: Buffer) => {
      onBytes(chunk.length);
      if (this.#body === undefined) {
        if (!this.#to.write(chunk)) from.pause();
        return;
      }
      this.#body.push(chunk);
      this.#bodyBytes += chunk.length;
      if (this.#bodyBytes > gatherBytes) {
        this.#writeBody();
        this.#body = undefined;
      }
    });
    from.once('end', () => {
      this.#ended = true;
      this.#writeBody();
      this.#to.end();
    });
  }

  #writeBody(): void {
    if (this.#body === undefined || this.#body.length === 0) return;
    this.#to.cork();
    for (const chunk of this.#body) this.#to.write(chunk);
    this.#to.uncork();
    if (this.#to.writableNeedDrain) this.from.pause();
  }

  /** Whether nothing but the gathered body has been sent, so `sendAgainTo` can start over. */
  get canSendAgain(): boolean {
    return this.#body !== undefined;
  }

  /** Sends the body (what has come so far, and the rest as it comes) to `to` instead. */
  sendAgainTo(to: Writable): void {
    this.#to = to;
    to.on('drain', () => this.resume());
    if (this.#ended) {
      this.#writeBody();
      to.end();
    }
  }

  hold(): void {
    this.#pausedAt ??= performance.now();
    this.from.pause();
  }

  resume(): void {
    if (this.held() || this.#to.writableNeedDrain) return;
    if (this.#pausedAt !== undefined) {
      this.onHeldMs(performance.now() - this.#pausedAt);
      this.#pausedAt = undefined;
    }
    this.from.resume();
  }
}

interface Exchange {
  op: StoreOperation;
  req: IncomingMessage;
  pumps: Pump[];
}

class StoreFront {
  readonly #upstream: URL;
  readonly #agent = new Agent({ keepAlive: true });
  readonly #sampleLatency: () => number;
  readonly #samplePutLatency: () => number;
  readonly #modes = Object.fromEntries(
    STORE_OPERATIONS.map((op) => [op, { mode: 'normal' as StoreFrontMode, delayMs: 0 }]),
  ) as StoreFrontStats['modes'];
  readonly #counters = zeroCounters();
  readonly #connections = { accepted: 0, reset: 0 };
  #upstreamErrors = 0;
  #upstreamRetries = 0;
  readonly #sockets = new Set<Socket>();
  readonly #exchanges = new Set<Exchange>();
  /** Woken on every mode change; each re-checks whether its operation is still frozen. */
  #thawWaiters = new Set<() => void>();
  readonly server: Server;
  #listening = false;

  constructor(private readonly config: ProcessConfig) {
    this.#upstream = new URL(config.upstream);
    this.#sampleLatency = latencySampler(config.latency);
    this.#samplePutLatency = latencySampler(config.putLatency);
    this.server = createServer((req, res) => void this.#handle(req, res));
    // Without a checkContinue listener node answers 100 Continue at once, even when frozen.
    this.server.on('checkContinue', (req, res) => void this.#handle(req, res));
    // Idle client connections stay open (as S3 keeps them for a while), and a frozen request may
    // be held for as long as the test wants.
    this.server.keepAliveTimeout = 0;
    this.server.requestTimeout = 0;
    this.server.on('connection', (socket: Socket) => {
      this.#connections.accepted++;
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.config.port, this.config.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.#listening = true;
    // Re-listening after `refuse` must get the same port back.
    this.config.port = (this.server.address() as AddressInfo).port;
    return this.config.port;
  }

  stats(): StoreFrontStats {
    return {
      modes: this.#modes,
      counters: this.#counters,
      connections: this.#connections,
      upstreamErrors: this.#upstreamErrors,
      upstreamRetries: this.#upstreamRetries,
    };
  }

  async setMode(change: SetModeRequest): Promise<void> {
    if (!STORE_FRONT_MODES.includes(change.mode))
      throw new Error(`unknown mode ${JSON.stringify(change.mode)}`);
    for (const op of change.operations ?? []) {
      if (!STORE_OPERATIONS.includes(op)) throw new Error(`unknown operation ${JSON.stringify(op)}`);
    }
    const own = change.mode === 'slow-get' ? 'get' : change.mode === 'slow-put' ? 'put' : undefined;
    if (own !== undefined && change.operations !== undefined && change.operations.join() !== own) {
      throw new Error(`${change.mode} applies to ${own} only, not ${change.operations.join(', ')}`);
    }
    const delayMs = change.delayMs ?? (own === undefined ? 0 : DEFAULT_SLOW_DELAY_MS);
    if (!(delayMs >= 0)) throw new Error(`delayMs must be >= 0, got ${change.delayMs}`);
    const operations: readonly StoreOperation[] =
      own !== undefined ? [own] : (change.operations ?? STORE_OPERATIONS);
    for (const op of operations) this.#modes[op] = { mode: change.mode, delayMs };

    for (const exchange of this.#exchanges) {
      const mode = this.#modes[exchange.op].mode;
      if (mode === 'freeze') for (const pump of exchange.pumps) pump.hold();
      else if (mode === 'refuse') this.#reset(exchange.req.socket);
      else for (const pump of exchange.pumps) pump.resume();
    }
    const waiters = this.#thawWaiters;
    this.#thawWaiters = new Set();
    for (const wake of waiters) wake();

    const everyRefuses = STORE_OPERATIONS.every((op) => this.#modes[op].mode === 'refuse');
    if (everyRefuses && this.#listening) {
      this.#listening = false;
      // Reset first: close() would end idle connections politely (FIN), not as a dead store does.
      for (const socket of this.#sockets) this.#reset(socket);
      this.server.close();
    } else if (!everyRefuses && !this.#listening) {
      await this.listen();
    }
  }

  #reset(socket: Socket): void {
    if (socket.destroyed) return;
    this.#connections.reset++;
    socket.resetAndDestroy();
  }

  /** Resolves once `op` is not frozen, with the milliseconds waited. */
  async #whileFrozen(op: StoreOperation): Promise<number> {
    if (this.#modes[op].mode !== 'freeze') return 0;
    const start = performance.now();
    while (this.#modes[op].mode === 'freeze') {
      await new Promise<void>((resolve) => this.#thawWaiters.add(resolve));
    }
    return performance.now() - start;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const op = classifyRequest(req.method, req.url);
    const exchange: Exchange = { op, req, pumps: [] };
    // Errors of a connection being reset end the exchange through 'close'; unheard they would crash us.
    res.on('error', () => {});
    this.#exchanges.add(exchange);
    let gone = false;
    res.once('close', () => {
      gone = true;
      this.#exchanges.delete(exchange);
    });
    // Not read while frozen: the client's body waits in the socket buffers, as with a stopped server.
    req.pause();
    const requestEnded = new Promise<number>((resolve) => req.once('end', () => resolve(performance.now())));
    const arrivedIn = this.#modes[op].mode;
    const heldAtArrival = await this.#whileFrozen(op);
    // The client gave up while it was held (its request timeout): nothing to count or forward.
    if (gone || req.socket.destroyed) return;
    const mode = this.#modes[op].mode;
    const counters = this.#counters[arrivedIn][op];
    counters.requests++;
    counters.injectedDelayMs += heldAtArrival;
    if (mode === 'refuse') {
      this.#reset(req.socket);
      return;
    }
    const latency = op === 'put' ? this.#samplePutLatency : this.#sampleLatency;
    // The first byte is due `latency` after the request's last byte, as a store's first-byte
    // latency is measured; the upstream's own time counts against it.
    const firstByte = async (): Promise<boolean> => {
      const ended = await requestEnded;
      const ready = performance.now();
      const wait = ended + latency() - ready;
      if (wait > 0) await sleepAtLeast(wait);
      const { mode: now, delayMs } = this.#modes[op];
      if (now === 'slow-get' || now === 'slow-put') await sleepAtLeast(delayMs);
      await this.#whileFrozen(op);
      counters.injectedDelayMs += performance.now() - ready;
      if (this.#modes[op].mode === 'refuse') {
        this.#reset(req.socket);
        return false;
      }
      return !gone;
    };
    if (req.headers.expect !== undefined) res.writeContinue();

    if (mode === 'slowdown') {
      req.on('data', (chunk: Buffer) => {
        counters.requestBytes += chunk.length;
      });
      req.resume();
      if (!(await firstByte())) return;
      const requestId = randomBytes(8).toString('hex').toUpperCase();
      const body = slowDownBody(requestId);
      counters.responseBytes += req.method === 'HEAD' ? 0 : Buffer.byteLength(body);
      res.writeHead(503, 'Slow Down', {
        'content-type': 'application/xml',
        'content-length': Buffer.byteLength(body),
        'x-amz-request-id': requestId,
      });
      res.end(body);
      return;
    }

    const frozen = () => this.#modes[op].mode === 'freeze';
    const held = (ms: number) => {
      counters.injectedDelayMs += ms;
    };
    const open = () =>
      request({
        host: this.#upstream.hostname,
        port: this.#upstream.port,
        method: req.method,
        path: req.url,
        // The client's Host header goes along unchanged: the SigV4 signature covers it.
        headers: endToEnd(req.rawHeaders),
        agent: this.#agent,
      });
    let upstreamReq: ClientRequest = open();
    const requestPump = new Pump(
      req,
      upstreamReq,
      GATHER_REQUEST_BYTES,
      frozen,
      (n) => (counters.requestBytes += n),
      held,
    );
    exchange.pumps.push(requestPump);
    // A client gone mid-exchange (its timeout, a reset) frees the upstream connection too.
    res.once('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    req.on('error', () => upstreamReq.destroy());
    const onResponse = async (upstreamRes: IncomingMessage) => {
      upstreamRes.pause();
      if (!(await firstByte())) return;
      res.sendDate = false;
      res.writeHead(
        upstreamRes.statusCode ?? 502,
        upstreamRes.statusMessage,
        endToEnd(upstreamRes.rawHeaders),
      );
      const pump = new Pump(upstreamRes, res, 0, frozen, (n) => (counters.responseBytes += n), held);
      exchange.pumps.push(pump);
      upstreamRes.on('error', () => res.destroy());
      upstreamRes.once('close', () => {
        // Cut off mid-body: the client must see a broken response, not a short one.
        if (!upstreamRes.complete) res.destroy();
      });
      pump.resume();
    };
    let retried = false;
    const onError = () => {
      if (res.writableFinished || req.socket.destroyed) return;
      // versitygw closes the connection of a PUT it refused early (412 to If-None-Match) once it
      // has drained 256 KB, and our write of the rest then fails before the 412 is read: about
      // one 400 KB PUT in five through the front, never directly. The whole body is in hand, so
      // send it once more on a new connection (a real error will fail again).
      if (!retried && requestPump.canSendAgain) {
        retried = true;
        this.#upstreamRetries++;
        wire(open());
        requestPump.sendAgainTo(upstreamReq);
        return;
      }
      this.#upstreamErrors++;
      // What a client sees when the store's connection breaks; S3 clients retry that.
      req.socket.destroy();
    };
    const wire = (target: ClientRequest) => {
      upstreamReq = target;
      target.on('error', onError);
      target.once('response', (upstreamRes) => void onResponse(upstreamRes));
    };
    wire(upstreamReq);
    requestPump.resume();
  }
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '') as ProcessConfig;
  const front = new StoreFront(config);
  const port = await front.listen();
  const control = createServer((req, res) => void answerControl(front, req, res));
  await new Promise<void>((resolve, reject) => {
    control.once('error', reject);
    control.listen(config.controlPort, config.host, resolve);
  });
  const controlPort = (control.address() as AddressInfo).port;
  process.stdout.write(`${JSON.stringify({ port, controlPort })}\n`);
  // The parent holds our stdin open; when it is gone, however it died, so are we.
  process.stdin.on('data', () => {});
  process.stdin.once('close', () => process.exit(0));
  process.once('SIGTERM', () => process.exit(0));
}

/** The control API: `GET /stats` → StoreFrontStats; `POST /mode` with a SetModeRequest. */
async function answerControl(front: StoreFront, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const reply = (status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  try {
    if (req.method === 'GET' && req.url === '/stats') return reply(200, front.stats());
    if (req.method === 'POST' && req.url === '/mode') {
      let text = '';
      for await (const chunk of req) text += chunk;
      await front.setMode(JSON.parse(text) as SetModeRequest);
      return reply(200, front.stats().modes);
    }
    reply(404, { error: `no ${req.method} ${req.url}; try GET /stats or POST /mode` });
  } catch (err) {
    reply(400, { error: (err as Error).message });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`store front: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
