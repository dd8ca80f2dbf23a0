// Who a zone egress connection's producer is, as the broker will judge it (zone-produce.ts keys
// what leaders accepted by it): the SASL handshake and authenticate requests of the connection,
// read on their way and trusted only once the broker answered them.
import { decodeRequestHeader, decodeResponseHeader, responseHeaderVersion } from '@walproxy/shared';
import {
  decodeSaslAuthenticateRequest,
  decodeSaslAuthenticateResponse,
  decodeSaslHandshakeRequest,
  decodeSaslHandshakeResponse,
  SASL_AUTHENTICATE,
  SASL_HANDSHAKE,
} from '../metadata/sasl-messages.js';
import { FRAME_SIZE_PREFIX_BYTES } from '../net/frame-decoder.js';
import type { FilterConnection, RequestInfo } from '../net/frame-filter.js';
import { saslUsername } from './sasl-identity.js';

/** A promise and the function that settles it. */
export interface Awaiting {
  promise: Promise<void>;
  settle(): void;
}

/**
 * Whose ACLs the broker applies on a connection, as far as this sidecar can tell, and only once the
 * broker said so: the user of a SASL PLAIN or SCRAM login once the broker answered its last
 * SaslAuthenticate without error, `anonymous` for a connection that never began a login (behind
 * the sidecar the broker's listener is PLAINTEXT: every such client is User:ANONYMOUS), and the
 * connection itself for mechanisms whose identity the sidecar cannot read (GSSAPI, OAUTHBEARER).
 * A login's first message only claims a user; a Produce pipelined behind it is decided once the
 * broker answered the login (a wrong password: the broker refuses it and closes the connection,
 * and nothing of that connection is stored).
 */
export interface ProducerConnection {
  readonly id: number;
  /** The mechanism of the connection's SASL login; `?` for a SASL request that named none readable. */
  mechanism?: string;
  /** The user the login's first message claims: trusted only once the broker accepted the login. */
  claimedUser?: string;
  /** The user of a login the broker accepted. */
  user?: string;
  /** The broker answered the login's last step without error (the login is over and succeeded). */
  authenticated: boolean;
  /** SaslAuthenticate steps of the current login the broker answered without error. */
  steps: number;
  /** The broker refused the connection's SASL handshake or login: nothing of it is ever stored. */
  refused: boolean;
  /** SaslHandshake / SaslAuthenticate requests not answered yet. */
  saslPending: number;
  /** Settled when saslPending drops to 0: the Produce requests held behind the login decide then. */
  saslSettled?: Awaiting;
  /**
   * The leader side of this connection filled a reference (a referenced partition was appended):
   * an INVALID_RECORD / CORRUPT_MESSAGE for a referenced partition is then the batch's own. The
   * connection is end to end with one leader-side process, so this holds for its whole life.
   */
  filled: boolean;
  /** Until when this connection's requests go as bytes (connectionFallback). */
  bytesUntil: number;
}

/** How many successful SaslAuthenticate steps complete a login, for the mechanisms this sidecar reads. */
const LOGIN_STEPS: Readonly<Record<string, number>> = {
  // RFC 4616: one message, one answer.
  PLAIN: 1,
  // RFC 5802: client-first → server-first (error code 0, nothing proven yet), client-final →
  // server-final: only the second answer says the password was right.
  'SCRAM-SHA-256': 2,
  'SCRAM-SHA-512': 2,
};

/** The SASL state of every zone egress connection, for the producer's zone side of zone-local produce. */
export class ProducerLogins {
  private readonly connections = new WeakMap<FilterConnection, ProducerConnection>();
  private nextConnectionId = 0;

  /** The connection's state, made at its first SASL or Produce request. */
  stateOf(connection: FilterConnection): ProducerConnection {
    let state = this.connections.get(connection);
    if (state === undefined) {
      state = {
        id: this.nextConnectionId++,
        authenticated: false,
        steps: 0,
        refused: false,
        saslPending: 0,
        filled: false,
        bytesUntil: 0,
      };
      this.connections.set(connection, state);
    }
    return state;
  }

  /**
   * A SASL request on its way to the broker: the connection is no longer anonymous, its Produce
   * requests wait for the answer, and a handshake (a login, or a KIP-368 re-authentication) starts
   * a new login whose user is only claimed so far.
   */
  onRequest(info: RequestInfo, frame: Buffer, state: ProducerConnection): void {
    state.saslPending++;
    state.mechanism ??= '?';
    if (info.apiKey === SASL_HANDSHAKE) {
      state.mechanism = '?';
      state.claimedUser = undefined;
      state.user = undefined;
      state.authenticated = false;
      state.steps = 0;
    }
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    try {
      const { headerLength } = decodeRequestHeader(payload);
      const body = payload.subarray(headerLength);
      if (info.apiKey === SASL_HANDSHAKE) state.mechanism = decodeSaslHandshakeRequest(body, info.apiVersion);
      else if (state.steps === 0)
        state.claimedUser ??= saslUsername(
          state.mechanism,
          decodeSaslAuthenticateRequest(body, info.apiVersion),
        );
    } catch {
      // Not ours to judge: the broker answers a malformed login; the connection stays unnamed.
    }
  }

  /** The broker's answer to a SASL request: the login goes on, succeeded, or was refused. */
  onAnswer(info: RequestInfo, frame: Buffer, state: ProducerConnection): void {
    if (saslRefused(info, frame)) {
      // The broker closes the connection (SaslServerAuthenticator); nothing of it is stored.
      state.refused = true;
      state.authenticated = false;
      state.user = undefined;
    } else if (info.apiKey === SASL_AUTHENTICATE) {
      state.steps++;
      // A mechanism whose identity we cannot read keys acceptances by the connection alone, so
      // only the broker's own answer to a Produce on it can ever let its batches be stored:
      // "authenticated" after any accepted step is then safe, whatever the number of steps.
      if (state.steps >= (LOGIN_STEPS[state.mechanism ?? '?'] ?? 1)) {
        state.authenticated = true;
        state.user = state.claimedUser;
      }
    }
    if (--state.saslPending === 0 && state.saslSettled !== undefined) {
      const settled = state.saslSettled;
      state.saslSettled = undefined;
      settled.settle();
    }
  }

  /** Settled once every SASL request of the connection sent so far is answered. */
  answered(state: ProducerConnection): Promise<void> {
    if (state.saslSettled === undefined) {
      let settle!: () => void;
      const promise = new Promise<void>((resolve) => {
        settle = resolve;
      });
      state.saslSettled = { promise, settle };
    }
    return state.saslSettled.promise;
  }

  /**
   * Who the broker authorizes on this connection, as a key for what it accepted; undefined while
   * that is not known (a login not over) or after the broker refused the login.
   */
  identityOf(state: ProducerConnection): string | undefined {
    if (state.refused) return undefined;
    if (state.mechanism === undefined) return 'anonymous';
    if (!state.authenticated) return undefined;
    return state.user !== undefined ? `user:${state.user}` : `connection:${state.id}`;
  }
}

/**
 * Whether the broker's answer to a SASL request refuses the handshake or the login (or cannot be
 * read: then nothing of the connection is trusted either).
 */
function saslRefused(info: RequestInfo, frame: Buffer): boolean {
  try {
    const payload = frame.subarray(FRAME_SIZE_PREFIX_BYTES);
    const { headerLength } = decodeResponseHeader(
      payload,
      responseHeaderVersion(info.apiKey, info.apiVersion)!,
    );
    const body = payload.subarray(headerLength);
    const errorCode =
      info.apiKey === SASL_HANDSHAKE
        ? decodeSaslHandshakeResponse(body, info.apiVersion).errorCode
        : decodeSaslAuthenticateResponse(body, info.apiVersion).errorCode;
    return errorCode !== 0;
  } catch {
    return true;
  }
}
