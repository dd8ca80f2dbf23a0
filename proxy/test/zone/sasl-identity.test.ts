import { describe, expect, it } from 'vitest';
import { saslUsername } from '../../src/zone/sasl-identity.js';

describe('saslUsername', () => {
  it('reads the user of PLAIN and SCRAM logins as Kafka does', () => {
    expect(saslUsername('PLAIN', Buffer.from('\u0000alice\u0000pw'))).toBe('alice');
    expect(saslUsername('PLAIN', Buffer.from('alice\u0000alice\u0000pw'))).toBe('alice');
    expect(saslUsername('SCRAM-SHA-256', Buffer.from('n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL'))).toBe('alice');
    expect(saslUsername('SCRAM-SHA-512', Buffer.from('n,a=bob,n=bob,r=abc'))).toBe('bob');
    // RFC 5802 saslname escapes
    expect(saslUsername('SCRAM-SHA-512', Buffer.from('n,,n=a=2Cb=3Dc,r=abc'))).toBe('a,b=c');
  });

  it('names nobody for mechanisms or messages it cannot read', () => {
    expect(saslUsername('GSSAPI', Buffer.from('\u0000alice\u0000pw'))).toBeUndefined();
    expect(saslUsername('OAUTHBEARER', Buffer.from('n,,\u0001auth=Bearer x\u0001\u0001'))).toBeUndefined();
    expect(saslUsername('PLAIN', Buffer.from('alice'))).toBeUndefined();
    expect(saslUsername('PLAIN', Buffer.from('\u0000\u0000pw'))).toBeUndefined();
    expect(saslUsername('SCRAM-SHA-256', Buffer.from('c=biws,r=abc,p=xyz'))).toBeUndefined();
  });
});
