import { describe, expect, it } from 'vitest';
import { ScramClient, ScramError } from '../../src/metadata/scram.js';

// RFC 7677 §3: the SCRAM-SHA-256 exchange for user "user", password "pencil".
const RFC7677 = {
  clientNonce: 'rOprNGfwEbeRWgbNEkqO',
  clientFirst: 'n,,n=user,r=rOprNGfwEbeRWgbNEkqO',
  serverFirst: 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096',
  clientFinal:
    'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
  serverFinal: 'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=',
};

describe('ScramClient', () => {
  it('reproduces the RFC 7677 SCRAM-SHA-256 test vector', async () => {
    const client = new ScramClient('SCRAM-SHA-256', 'user', 'pencil', RFC7677.clientNonce);
    expect(client.clientFirst().toString()).toBe(RFC7677.clientFirst);
    expect((await client.clientFinal(Buffer.from(RFC7677.serverFirst))).toString()).toBe(RFC7677.clientFinal);
    expect(() => client.verifyServerFinal(Buffer.from(RFC7677.serverFinal))).not.toThrow();
  });

  it('refuses a server signature that does not verify (the server does not know the password)', async () => {
    const client = new ScramClient('SCRAM-SHA-256', 'user', 'not-pencil', RFC7677.clientNonce);
    await client.clientFinal(Buffer.from(RFC7677.serverFirst));
    expect(() => client.verifyServerFinal(Buffer.from(RFC7677.serverFinal))).toThrow(
      /server signature does not verify/,
    );
  });

  it('escapes = and , in the user name (RFC 5802 saslname)', () => {
    const client = new ScramClient('SCRAM-SHA-512', 'a=b,c', 'x', 'nonce');
    expect(client.clientFirst().toString()).toBe('n,,n=a=3Db=2Cc,r=nonce');
  });

  it.each([
    ['a nonce that does not extend ours', 'r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', /does not extend/],
    [
      'too few iterations',
      `r=${RFC7677.clientNonce}xyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000`,
      /1000 iterations/,
    ],
    ['a mandatory extension', `m=ext,r=${RFC7677.clientNonce}xyz,s=AA==,i=4096`, /extension/],
    ['a missing salt', `r=${RFC7677.clientNonce}xyz,i=4096`, /lacks r, s or i/],
  ])('refuses a server-first message with %s', async (_what, serverFirst, error) => {
    const client = new ScramClient('SCRAM-SHA-256', 'user', 'pencil', RFC7677.clientNonce);
    await expect(client.clientFinal(Buffer.from(serverFirst))).rejects.toThrow(error);
    await expect(client.clientFinal(Buffer.from(serverFirst))).rejects.toBeInstanceOf(ScramError);
  });

  it('reports a server-final error attribute', async () => {
    const client = new ScramClient('SCRAM-SHA-256', 'user', 'pencil', RFC7677.clientNonce);
    await client.clientFinal(Buffer.from(RFC7677.serverFirst));
    expect(() => client.verifyServerFinal(Buffer.from('e=invalid-proof'))).toThrow(/invalid-proof/);
  });
});
