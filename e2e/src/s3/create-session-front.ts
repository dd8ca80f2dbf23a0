/**
 * No S3 emulator implements S3 Express CreateSession, so a test of the SDK's real session path
 * needs this front: it answers `GET /<bucket>?session` (path-style, as the SDK sends it to an IP
 * endpoint) with fresh session credentials and forwards every other request to the emulator
 * byte for byte. moto does not check signatures, so requests signed with the session keys pass.
 */
import { randomBytes } from 'node:crypto';
import { Agent, createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CreateSessionFront {
  /** `http://127.0.0.1:<port>` to give the S3 client as its endpoint. */
  readonly endpoint: string;
  /** CreateSession calls answered so far. */
  readonly createSessionCalls: number;
  /** Forwarded requests that carried `x-amz-s3session-token` with a token this front issued. */
  readonly sessionAuthenticatedRequests: number;
  stop(): Promise<void>;
}

export interface CreateSessionFrontOptions {
  /** How long issued credentials live; S3 Express gives 5 minutes. */
  sessionLifetimeMs?: number;
}

export async function startCreateSessionFront(
  upstream: string,
  options: CreateSessionFrontOptions = {},
): Promise<CreateSessionFront> {
  const lifetime = options.sessionLifetimeMs ?? 5 * 60_000;
  const target = new URL(upstream);
  const agent = new Agent({ keepAlive: true });
  const issued = new Set<string>();
  let createSessionCalls = 0;
  let sessionAuthenticatedRequests = 0;

  const answerCreateSession = (res: ServerResponse) => {
    createSessionCalls++;
    const token = randomBytes(24).toString('base64url');
    issued.add(token);
    const expiration = new Date(Date.now() + lifetime).toISOString();
    const body =
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
      '<CreateSessionResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Credentials>' +
      `<SessionToken>${token}</SessionToken>` +
      `<SecretAccessKey>${randomBytes(30).toString('base64url')}</SecretAccessKey>` +
      `<AccessKeyId>ASIA${randomBytes(8).toString('hex').toUpperCase()}</AccessKeyId>` +
      `<Expiration>${expiration}</Expiration>` +
      '</Credentials></CreateSessionResult>';
    res.writeHead(200, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };

  const forward = (req: IncomingMessage, res: ServerResponse) => {
    const token = req.headers['x-amz-s3session-token'];
    if (typeof token === 'string' && issued.has(token)) sessionAuthenticatedRequests++;
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
      res.end(`create-session front: upstream failed: ${err.message}`);
    });
    req.pipe(upstreamReq);
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://front');
    if (req.method === 'GET' && url.searchParams.has('session')) {
      req.resume();
      answerCreateSession(res);
    } else {
      forward(req, res);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    get createSessionCalls() {
      return createSessionCalls;
    },
    get sessionAuthenticatedRequests() {
      return sessionAuthenticatedRequests;
    },
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      agent.destroy();
      await closed;
    },
  };
}
