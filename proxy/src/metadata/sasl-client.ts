import { inspect } from 'node:util';
import { kafkaError } from '@walproxy/shared';
import {
  decodeSaslAuthenticateResponse,
  decodeSaslHandshakeResponse,
  encodeSaslAuthenticateRequest,
  encodeSaslHandshakeRequest,
  SASL_AUTHENTICATE,
  SASL_HANDSHAKE,
} from './sasl-messages.js';
import { SCRAM_HASHES, ScramClient, type ScramMechanism } from './scram.js';

/** The mechanisms walproxy's own clients speak (GSSAPI and OAUTHBEARER would need more than a password). */
export const SASL_MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const;
export type SaslMechanism = (typeof SASL_MECHANISMS)[number];

/**
 * A value that must never reach a log line or an error message: JSON, util.inspect and string
 * conversion all print `[redacted]`; only reveal() gives the value.
 */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return '[redacted]';
  }
  toString(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return '[redacted]';
  }
}

export interface SaslCredentials {
  mechanism: SaslMechanism;
  username: string;
  password: Secret;
}

/** Sends one request on an open connection and resolves with the response body (after its header). */
export type Exchange = (apiKey: number, apiVersion: number, body: Buffer) => Promise<Buffer>;

export class SaslAuthenticationError extends Error {}

/** SaslHandshake v1 (KIP-152: tokens then travel in SaslAuthenticate requests) and SaslAuthenticate v2. */
const HANDSHAKE_VERSION = 1;
const AUTHENTICATE_VERSION = 2;
const UNSUPPORTED_SASL_MECHANISM = 33;

function errorName(code: number): string {
  return kafkaError(code)?.name ?? `error ${code}`;
}

/**
 * Authenticates a fresh connection as Kafka's own clients do: SaslHandshake v1 naming the
 * mechanism, then SaslAuthenticate round trips carrying the mechanism's tokens. Resolves with
 * the session lifetime the broker granted (KIP-368; 0 = unlimited). The callers open a connection
 * per question, so re-authentication is never needed.
 */
export async function saslAuthenticate(
  exchange: Exchange,
  credentials: SaslCredentials,
  scramNonce?: string,
): Promise<{ sessionLifetimeMs: bigint }> {
  const { mechanism, username } = credentials;
  const handshake = decodeSaslHandshakeResponse(
    await exchange(
      SASL_HANDSHAKE,
      HANDSHAKE_VERSION,
      encodeSaslHandshakeRequest(mechanism, HANDSHAKE_VERSION),
    ),
    HANDSHAKE_VERSION,
  );
  if (handshake.errorCode === UNSUPPORTED_SASL_MECHANISM) {
    throw new SaslAuthenticationError(
      `the broker does not enable SASL mechanism ${mechanism} (it enables: ${handshake.mechanisms.join(', ') || 'none'})`,
    );
  }
  if (handshake.errorCode !== 0) {
    throw new SaslAuthenticationError(`SaslHandshake refused: ${errorName(handshake.errorCode)}`);
  }
  const step = async (token: Buffer): Promise<{ authBytes: Buffer; sessionLifetimeMs: bigint }> => {
    const response = decodeSaslAuthenticateResponse(
      await exchange(
        SASL_AUTHENTICATE,
        AUTHENTICATE_VERSION,
        encodeSaslAuthenticateRequest(token, AUTHENTICATE_VERSION),
      ),
      AUTHENTICATE_VERSION,
    );
    if (response.errorCode !== 0) {
      throw new SaslAuthenticationError(
        `SASL ${mechanism} authentication of '${username}' failed: ${errorName(response.errorCode)}${
          response.errorMessage ? ` (${response.errorMessage})` : ''
        }`,
      );
    }
    return response;
  };
  if (mechanism === 'PLAIN') {
    // RFC 4616: [authzid] NUL authcid NUL passwd; an empty authzid means "act as authcid".
    const token = Buffer.from(`\u0000${username}\u0000${credentials.password.reveal()}`, 'utf8');
    const { sessionLifetimeMs } = await step(token);
    return { sessionLifetimeMs };
  }
  if (!(mechanism in SCRAM_HASHES)) throw new SaslAuthenticationError(`unknown SASL mechanism ${mechanism}`);
  const scram = new ScramClient(
    mechanism as ScramMechanism,
    username,
    credentials.password.reveal(),
    scramNonce,
  );
  try {
    const serverFirst = await step(scram.clientFirst());
    const serverFinal = await step(await scram.clientFinal(serverFirst.authBytes));
    scram.verifyServerFinal(serverFinal.authBytes);
    return { sessionLifetimeMs: serverFinal.sessionLifetimeMs };
  } catch (error) {
    if (error instanceof SaslAuthenticationError) throw error;
    throw new SaslAuthenticationError(
      `SASL ${mechanism} authentication of '${username}' failed: ${(error as Error).message}`,
    );
  }
}
