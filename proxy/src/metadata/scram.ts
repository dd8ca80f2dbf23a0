// SCRAM client (RFC 5802) for SCRAM-SHA-256 (RFC 7677) and SCRAM-SHA-512, as Kafka's brokers
// speak it (KIP-84): no channel binding (gs2 header `n,,`), no authorization id, and the password
// taken as its UTF-8 bytes — Kafka's ScramFormatter does not apply SASLprep, so neither does this.
import { createHash, createHmac, pbkdf2, randomBytes, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

// PBKDF2 runs on libuv's thread pool: thousands of HMAC rounds must not stall the proxy's event loop.
const pbkdf2Async = promisify(pbkdf2);

export const SCRAM_HASHES = { 'SCRAM-SHA-256': 'sha256', 'SCRAM-SHA-512': 'sha512' } as const;
export type ScramMechanism = keyof typeof SCRAM_HASHES;

/** Kafka refuses to store SCRAM credentials with fewer iterations; a server asking for fewer is suspect. */
export const MIN_SCRAM_ITERATIONS = 4096;

const GS2_HEADER = 'n,,';

export class ScramError extends Error {}

/** RFC 5802 §5.1 saslname: `=` and `,` are escaped as `=3D` and `=2C`. */
function saslName(username: string): string {
  return username.replaceAll('=', '=3D').replaceAll(',', '=2C');
}

function attributes(message: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of message.split(',')) {
    const eq = part.indexOf('=');
    if (eq !== 1) throw new ScramError(`malformed SCRAM attribute '${part}'`);
    out.set(part[0]!, part.slice(2));
  }
  return out;
}

/**
 * One SCRAM exchange, client side:
 *   clientFirst() → server-first → await clientFinal(serverFirst) → server-final → verifyServerFinal().
 * The server's signature is checked, so a server that does not know the password (or a
 * man in the middle) is detected, not just trusted.
 */
export class ScramClient {
  private readonly hash: 'sha256' | 'sha512';
  private readonly clientFirstBare: string;
  private expectedServerSignature?: Buffer;

  constructor(
    mechanism: ScramMechanism,
    username: string,
    private readonly password: string,
    private readonly clientNonce = randomBytes(24).toString('base64'),
  ) {
    this.hash = SCRAM_HASHES[mechanism];
    this.clientFirstBare = `n=${saslName(username)},r=${clientNonce}`;
  }

  clientFirst(): Buffer {
    return Buffer.from(GS2_HEADER + this.clientFirstBare, 'utf8');
  }

  async clientFinal(serverFirstBytes: Buffer): Promise<Buffer> {
    const serverFirst = serverFirstBytes.toString('utf8');
    const attrs = attributes(serverFirst);
    if (attrs.has('m'))
      throw new ScramError('the server requires a SCRAM extension this client does not know');
    const nonce = attrs.get('r');
    const salt = attrs.get('s');
    const iterations = Number(attrs.get('i'));
    if (nonce === undefined || salt === undefined || !Number.isInteger(iterations)) {
      throw new ScramError(`server-first-message lacks r, s or i: '${serverFirst}'`);
    }
    if (!nonce.startsWith(this.clientNonce) || nonce.length === this.clientNonce.length) {
      throw new ScramError('the server nonce does not extend the client nonce');
    }
    if (iterations < MIN_SCRAM_ITERATIONS) {
      throw new ScramError(
        `the server asks for ${iterations} iterations, fewer than ${MIN_SCRAM_ITERATIONS}`,
      );
    }
    const keyLength = this.hash === 'sha256' ? 32 : 64;
    const saltedPassword = await pbkdf2Async(
      Buffer.from(this.password, 'utf8'),
      Buffer.from(salt, 'base64'),
      iterations,
      keyLength,
      this.hash,
    );
    const clientKey = this.hmac(saltedPassword, 'Client Key');
    const storedKey = createHash(this.hash).update(clientKey).digest();
    // c= is base64 of the gs2 header: no channel binding.
    const clientFinalWithoutProof = `c=${Buffer.from(GS2_HEADER).toString('base64')},r=${nonce}`;
    const authMessage = `${this.clientFirstBare},${serverFirst},${clientFinalWithoutProof}`;
    const clientSignature = this.hmac(storedKey, authMessage);
    const proof = Buffer.alloc(clientKey.length);
    for (let i = 0; i < proof.length; i++) proof[i] = clientKey[i]! ^ clientSignature[i]!;
    this.expectedServerSignature = this.hmac(this.hmac(saltedPassword, 'Server Key'), authMessage);
    return Buffer.from(`${clientFinalWithoutProof},p=${proof.toString('base64')}`, 'utf8');
  }

  verifyServerFinal(serverFinalBytes: Buffer): void {
    const attrs = attributes(serverFinalBytes.toString('utf8'));
    const error = attrs.get('e');
    if (error !== undefined) throw new ScramError(`the server refused the authentication: ${error}`);
    const verifier = Buffer.from(attrs.get('v') ?? '', 'base64');
    const expected = this.expectedServerSignature;
    if (!expected || verifier.length !== expected.length || !timingSafeEqual(verifier, expected)) {
      throw new ScramError('the server signature does not verify: the server does not know this password');
    }
  }

  private hmac(key: Buffer, text: string): Buffer {
    return createHmac(this.hash, key).update(text, 'utf8').digest();
  }
}
