import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { brokerRequest } from '../../src/metadata/broker-request.js';
import { type SaslCredentials, type SaslMechanism, Secret } from '../../src/metadata/sasl-client.js';
import { ANSWER, type FakeSaslBroker, PROTECTED_API, startFakeSaslBroker } from './fake-sasl-broker.js';

const USERS = { walproxy: 'p@ss,w=rd', other: 'x' };

let broker: FakeSaslBroker | undefined;
afterEach(async () => {
  await broker?.stop();
  broker = undefined;
});

function credentials(
  mechanism: SaslMechanism,
  username = 'walproxy',
  password = USERS.walproxy,
): SaslCredentials {
  return { mechanism, username, password: new Secret(password) };
}

async function ask(port: number, sasl?: SaslCredentials): Promise<Buffer> {
  return brokerRequest(
    { host: '127.0.0.1', port },
    PROTECTED_API.apiKey,
    PROTECTED_API.apiVersion,
    Buffer.alloc(0),
    sasl ? { sasl } : {},
  );
}

describe('brokerRequest with SASL (SaslHandshake v1 + SaslAuthenticate v2)', () => {
  it.each(['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const)(
    'authenticates with %s, then gets its answer on the same connection',
    async (mechanism) => {
      broker = await startFakeSaslBroker(USERS);
      expect(await ask(broker.port, credentials(mechanism))).toEqual(ANSWER);
      expect(broker.authenticated).toEqual(['walproxy']);
    },
  );

  it.each(['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const)(
    'reports a wrong %s password with the broker’s message, never the password',
    async (mechanism) => {
      broker = await startFakeSaslBroker(USERS);
      const error = await ask(broker.port, credentials(mechanism, 'walproxy', 'wrong-secret')).catch(
        (e: Error) => e,
      );
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(
        new RegExp(`^SASL ${mechanism} authentication of 'walproxy' failed: SASL_AUTHENTICATION_FAILED`),
      );
      expect((error as Error).message).not.toContain('wrong-secret');
      expect(broker.authenticated).toEqual([]);
    },
  );

  it('names the mechanisms the broker enables when ours is not one of them', async () => {
    broker = await startFakeSaslBroker(USERS, ['SCRAM-SHA-512']);
    await expect(ask(broker.port, credentials('PLAIN'))).rejects.toThrow(
      'the broker does not enable SASL mechanism PLAIN (it enables: SCRAM-SHA-512)',
    );
  });

  it('without credentials, a SASL listener closes the connection and the caller hears it', async () => {
    broker = await startFakeSaslBroker(USERS);
    await expect(ask(broker.port)).rejects.toThrow(/closed the connection without answering/);
  });
});

describe('Secret', () => {
  it('never prints its value: JSON, inspect, strings and pino all see [redacted]', () => {
    const creds = credentials('PLAIN', 'walproxy', 'hunter2');
    const lines: string[] = [];
    createLogger('info', { write: (l: string) => lines.push(l) }).info({ creds }, 'config');
    const renderings = [JSON.stringify(creds), inspect(creds), `${creds.password}`, lines.join('')];
    for (const text of renderings) {
      expect(text).not.toContain('hunter2');
      expect(text).toContain('[redacted]');
    }
    expect(creds.password.reveal()).toBe('hunter2');
  });
});
