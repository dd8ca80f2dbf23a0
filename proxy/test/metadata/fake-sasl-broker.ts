// A stand-in for a broker's SASL_PLAINTEXT listener, for what a unit test cannot ask a real broker:
// the server side of PLAIN and SCRAM (RFC 5802 §3, written from the server's point of view so the
// client is checked by an independent implementation), and a request answered only once
// authenticated. The e2e suite runs the sidecar's client against real brokers.
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import net from 'node:net';
import { decodeRequestHeader, encodeResponseHeader, responseHeaderVersion } from '@walproxy/shared';
import {
  decodeSaslAuthenticateRequest,
  decodeSaslHandshakeRequest,
  encodeSaslAuthenticateResponse,
  encodeSaslHandshakeResponse,
} from '../../src/metadata/sasl-messages.js';
import { FrameDecoder } from '../../src/net/frame-decoder.js';

export interface FakeSaslBroker {
  port: number;
  /** Authenticated principals, in order. */
  authenticated: string[];
  /** SaslHandshake requests seen: `v1 SCRAM-SHA-512`. */
  handshakes: string[];
  stop(): Promise<void>;
}

/** The API a test asks once authenticated; answered with ANSWER as the body. */
export const PROTECTED_API = { apiKey: 18, apiVersion: 0 } as const;
export const ANSWER = Buffer.from([0, 0, 0, 0, 0, 0]);

const HASHES = { 'SCRAM-SHA-256': 'sha256', 'SCRAM-SHA-512': 'sha512' } as const;

export async function startFakeSaslBroker(
  users: Record<string, string>,
  mechanisms: string[] = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'],
): Promise<FakeSaslBroker> {
  const authenticated: string[] = [];
  const handshakes: string[] = [];
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    const decoder = new FrameDecoder(1 << 20);
    let mechanism: string | undefined;
    let principal: string | undefined;
    let scram: ((token: Buffer) => { token: Buffer; error?: string; done?: string }) | undefined;
    const respond = (apiKey: number, apiVersion: number, correlationId: number, body: Buffer) => {
      const header = encodeResponseHeader({ correlationId }, responseHeaderVersion(apiKey, apiVersion)!);
      const size = Buffer.alloc(4);
      size.writeInt32BE(header.length + body.length);
      socket.write(Buffer.concat([size, header, body]));
    };
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) {
        const payload = frame.subarray(4);
        const header = decodeRequestHeader(payload);
        const body = payload.subarray(header.headerLength);
        const { apiKey, apiVersion, correlationId } = header;
        if (apiKey === 17) {
          const wanted = decodeSaslHandshakeRequest(body, apiVersion);
          const ok = mechanisms.includes(wanted);
          handshakes.push(`v${apiVersion} ${wanted}`);
          // A new handshake starts a new exchange (KIP-368 re-authentication on a live connection).
          mechanism = ok ? wanted : undefined;
          scram = undefined;
          respond(
            apiKey,
            apiVersion,
            correlationId,
            encodeSaslHandshakeResponse({ errorCode: ok ? 0 : 33, mechanisms }, apiVersion),
          );
        } else if (apiKey === 36 && mechanism) {
          const token = decodeSaslAuthenticateRequest(body, apiVersion);
          let result: { token: Buffer; error?: string; done?: string };
          if (mechanism === 'PLAIN') {
            const [, user, password] = token.toString('utf8').split('\u0000');
            result =
              user !== undefined && users[user] === password
                ? { token: Buffer.alloc(0), done: user }
                : { token: Buffer.alloc(0), error: 'Authentication failed: Invalid username or password' };
          } else {
            scram ??= scramServer(HASHES[mechanism as keyof typeof HASHES], users);
            result = scram(token);
          }
          if (result.done) {
            principal = result.done;
            authenticated.push(principal);
          }
          respond(
            apiKey,
            apiVersion,
            correlationId,
            encodeSaslAuthenticateResponse(
              {
                errorCode: result.error ? 58 : 0,
                errorMessage: result.error ?? null,
                authBytes: result.token,
                sessionLifetimeMs: 0n,
              },
              apiVersion,
            ),
          );
          if (result.error) socket.end();
        } else if (apiKey === PROTECTED_API.apiKey && principal !== undefined) {
          respond(apiKey, apiVersion, correlationId, ANSWER);
        } else {
          // A broker closes a connection that skips authentication.
          socket.destroy();
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    authenticated,
    handshakes,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** RFC 5802 server: stores only StoredKey and ServerKey, checks the client's proof against them. */
function scramServer(hash: 'sha256' | 'sha512', users: Record<string, string>) {
  const salt = randomBytes(16);
  const iterations = 4096;
  const hmac = (key: Buffer, text: string) => createHmac(hash, key).update(text).digest();
  let state: { user: string; clientFirstBare: string; serverFirst: string; nonce: string } | undefined;
  return (token: Buffer): { token: Buffer; error?: string; done?: string } => {
    const message = token.toString('utf8');
    if (!state) {
      const bare = message.replace(/^n,,/, '');
      const user = /n=([^,]*)/.exec(bare)![1]!.replaceAll('=2C', ',').replaceAll('=3D', '=');
      const nonce = /r=([^,]*)/.exec(bare)![1]! + randomBytes(12).toString('base64');
      const serverFirst = `r=${nonce},s=${salt.toString('base64')},i=${iterations}`;
      state = { user, clientFirstBare: bare, serverFirst, nonce };
      return { token: Buffer.from(serverFirst) };
    }
    const password = users[state.user];
    const withoutProof = message.replace(/,p=[^,]*$/, '');
    const proof = Buffer.from(/,p=([^,]*)$/.exec(message)![1]!, 'base64');
    if (password === undefined || !withoutProof.endsWith(`r=${state.nonce}`)) {
      return {
        token: Buffer.alloc(0),
        error: 'Authentication failed during authentication due to invalid credentials with SASL mechanism',
      };
    }
    const salted = pbkdf2Sync(password, salt, iterations, hash === 'sha256' ? 32 : 64, hash);
    const storedKey = createHash(hash).update(hmac(salted, 'Client Key')).digest();
    const serverKey = hmac(salted, 'Server Key');
    const authMessage = `${state.clientFirstBare},${state.serverFirst},${withoutProof}`;
    const signature = hmac(storedKey, authMessage);
    const clientKey = Buffer.from(proof.map((b, i) => b ^ signature[i]!));
    if (!createHash(hash).update(clientKey).digest().equals(storedKey)) {
      return {
        token: Buffer.alloc(0),
        error: 'Authentication failed during authentication due to invalid credentials with SASL mechanism',
      };
    }
    return { token: Buffer.from(`v=${hmac(serverKey, authMessage).toString('base64')}`), done: state.user };
  };
}
