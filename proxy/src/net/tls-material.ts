import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import tls from 'node:tls';
import type { Logger } from '../log.js';

/** PEM files of one TLS identity: certificate (chain), private key, and the CA bundle that verifies peers. */
export interface TlsFiles {
  cert?: string;
  key?: string;
  ca?: string;
}

/** Which file of a TlsFiles set a problem is about. */
export type TlsFileRole = keyof TlsFiles;

export class TlsFileError extends Error {
  constructor(
    readonly role: TlsFileRole,
    message: string,
  ) {
    super(message);
  }
}

/** Validated PEM bytes, ready for tls.createSecureContext / server.setSecureContext. */
export interface TlsMaterialSnapshot {
  cert?: Buffer;
  key?: Buffer;
  ca?: Buffer;
  /** The leaf certificate, for logs (subject, expiry). */
  certificate?: X509Certificate;
  secureContext: tls.SecureContext;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

type Bytes = { [R in TlsFileRole]?: Buffer };

function readAll(files: TlsFiles): Bytes {
  const out: Bytes = {};
  for (const role of ['cert', 'key', 'ca'] as const) {
    const path = files[role];
    if (path === undefined) continue;
    try {
      out[role] = readFileSync(path);
    } catch (error) {
      throw new TlsFileError(role, `cannot read ${path}: ${(error as Error).message}`);
    }
  }
  return out;
}

function certificates(role: TlsFileRole, path: string, pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('utf8').match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new TlsFileError(role, `${path} holds no PEM certificate`);
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (error) {
      throw new TlsFileError(
        role,
        `certificate ${i + 1} in ${path} does not parse: ${(error as Error).message}`,
      );
    }
  });
}

/**
 * Checks PEM bytes the way an operator needs to hear about them, one problem at a time and naming
 * the file: a certificate that does not parse, a key that does not parse (encrypted keys are not
 * supported), a key that does not belong to the certificate, a CA bundle without certificates.
 * OpenSSL's own messages ("key values mismatch") come last, as a backstop.
 */
export function validateTlsMaterial(files: TlsFiles, bytes: Bytes): TlsMaterialSnapshot {
  let certificate: X509Certificate | undefined;
  let key: KeyObject | undefined;
  if (bytes.cert) certificate = certificates('cert', files.cert!, bytes.cert)[0];
  if (bytes.key) {
    try {
      key = createPrivateKey(bytes.key);
    } catch (error) {
      throw new TlsFileError(
        'key',
        `${files.key} does not hold an unencrypted PEM private key: ${(error as Error).message}`,
      );
    }
  }
  if (certificate && key && !certificate.checkPrivateKey(key)) {
    throw new TlsFileError('key', `the key in ${files.key} does not match the certificate in ${files.cert}`);
  }
  if (bytes.ca) certificates('ca', files.ca!, bytes.ca);
  let secureContext: tls.SecureContext;
  try {
    secureContext = tls.createSecureContext({
      ...(bytes.cert ? { cert: bytes.cert } : {}),
      ...(bytes.key ? { key: bytes.key } : {}),
      ...(bytes.ca ? { ca: bytes.ca } : {}),
    });
  } catch (error) {
    throw new TlsFileError(bytes.cert ? 'cert' : 'ca', `TLS files rejected: ${(error as Error).message}`);
  }
  return {
    ...(bytes.cert ? { cert: bytes.cert } : {}),
    ...(bytes.key ? { key: bytes.key } : {}),
    ...(bytes.ca ? { ca: bytes.ca } : {}),
    ...(certificate ? { certificate } : {}),
    secureContext,
  };
}

/** Reads and validates a set of TLS files now; throws TlsFileError naming the file at fault. */
export function loadTlsMaterial(files: TlsFiles): TlsMaterialSnapshot {
  return validateTlsMaterial(files, readAll(files));
}

/** Subject and expiry of a snapshot's certificate, for log lines. */
export function describeCertificate(snapshot: TlsMaterialSnapshot): Record<string, string> {
  const c = snapshot.certificate;
  if (!c) return {};
  return { subject: c.subject.replaceAll('\n', ', '), notAfter: new Date(c.validTo).toISOString() };
}

export interface TlsMaterialOptions {
  /** Names the material in logs, e.g. `client ingress`, `peer client`. */
  name: string;
  log: Logger;
  /** How often the files are read to look for a change; default 1 s. */
  reloadIntervalMs?: number;
}

/**
 * One TLS identity from PEM files, reloaded when the files change, so certificates rotate without
 * a restart. The files are re-read every interval and compared byte for byte, which sees every way
 * they can be replaced: rewritten in place, renamed over, or — in a Kubernetes secret volume — the
 * `..data` symlink swapped to a new directory (fs.watch on a file would miss that last one).
 *
 * A change is applied once the new bytes read the same twice in a row, so a certificate and key
 * copied one after the other are never paired half-way. A pair that does not validate (key not
 * matching the certificate, unreadable file) is logged once and the current material stays;
 * established connections are never touched, only new handshakes use the new material.
 */
export class TlsMaterial {
  private current: TlsMaterialSnapshot;
  /** What the previous check read; undefined when a file could not be read. */
  private lastRead: Bytes | undefined;
  /** Consecutive checks that could not read a file. */
  private unreadable = 0;
  /** Bytes already refused, so a bad pair is logged once, not every interval. */
  private refused?: Bytes;
  private timer?: NodeJS.Timeout;
  private checking?: Promise<void>;
  private readonly listeners: Array<(snapshot: TlsMaterialSnapshot) => void> = [];
  private readonly log: Logger;
  /** Reloads applied since start. */
  reloads = 0;

  /** Loads the files now; throws TlsFileError when they are unusable. */
  constructor(
    readonly files: TlsFiles,
    private readonly options: TlsMaterialOptions,
  ) {
    this.log = options.log.child({ tls: options.name });
    const bytes = readAll(files);
    this.current = validateTlsMaterial(files, bytes);
    this.lastRead = bytes;
    this.warnIfExpired(this.current);
  }

  /** Peers refuse an expired certificate; say so where the operator looks, at load and at reload. */
  private warnIfExpired(snapshot: TlsMaterialSnapshot): void {
    const notAfter = snapshot.certificate ? Date.parse(snapshot.certificate.validTo) : Number.NaN;
    if (notAfter < Date.now()) {
      this.log.warn(describeCertificate(snapshot), 'TLS certificate has expired; peers will refuse it');
    }
  }

  /** The name it was loaded under (logs, the certificate-expiry metric). */
  get name(): string {
    return this.options.name;
  }

  get snapshot(): TlsMaterialSnapshot {
    return this.current;
  }

  get secureContext(): tls.SecureContext {
    return this.current.secureContext;
  }

  /** Calls `listener` with every new snapshot applied. */
  onReload(listener: (snapshot: TlsMaterialSnapshot) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.options.reloadIntervalMs ?? 1_000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reads the files once and applies them if they changed and have settled. */
  check(): Promise<void> {
    this.checking ??= this.readAndApply().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async readAndApply(): Promise<void> {
    const bytes: Bytes = {};
    for (const role of ['cert', 'key', 'ca'] as const) {
      const path = this.files[role];
      if (path === undefined) continue;
      try {
        bytes[role] = await readFile(path);
      } catch (error) {
        // Mid-swap a file can be missing for a moment; say so once, and only if it stays missing.
        this.lastRead = undefined;
        if (++this.unreadable === 2) {
          this.log.warn(
            { file: path, error: (error as Error).message },
            'TLS file unreadable; keeping the current certificate',
          );
        }
        return;
      }
    }
    this.unreadable = 0;
    const settled = sameBytes(bytes, this.lastRead);
    this.lastRead = bytes;
    if (!settled || sameBytes(bytes, this.currentBytes()) || sameBytes(bytes, this.refused)) return;
    let next: TlsMaterialSnapshot;
    try {
      next = validateTlsMaterial(this.files, bytes);
    } catch (error) {
      this.refused = bytes;
      this.log.error(
        { file: this.files[(error as TlsFileError).role ?? 'cert'], error: (error as Error).message },
        'new TLS files refused; keeping the current certificate',
      );
      return;
    }
    this.current = next;
    this.refused = undefined;
    this.reloads++;
    this.log.info(describeCertificate(next), 'TLS certificate reloaded; new connections use it');
    this.warnIfExpired(next);
    for (const listener of this.listeners) listener(next);
  }

  private currentBytes(): Bytes {
    const { cert, key, ca } = this.current;
    return { ...(cert ? { cert } : {}), ...(key ? { key } : {}), ...(ca ? { ca } : {}) };
  }
}

function sameBytes(a: Bytes | undefined, b: Bytes | undefined): boolean {
  if (a === undefined || b === undefined) return false;
  for (const role of ['cert', 'key', 'ca'] as const) {
    const x = a[role];
    const y = b[role];
    if (x === undefined || y === undefined) {
      if (x !== y) return false;
    } else if (!x.equals(y)) return false;
  }
  return true;
}

/**
 * Kafka's `ssl.client.auth`: whether a listener asks for a client certificate and whether a client
 * without one may connect. A certificate that is presented is always verified against the CA.
 */
export const CLIENT_AUTH_MODES = ['none', 'requested', 'required'] as const;
export type ClientAuth = (typeof CLIENT_AUTH_MODES)[number];

/** OpenSSL's words for the verify results a TLS server sees most (X509_verify_cert_error_string). */
const VERIFY_ERRORS: Readonly<Record<string, string>> = {
  CERT_HAS_EXPIRED: 'certificate has expired',
  CERT_NOT_YET_VALID: 'certificate is not yet valid',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'unable to verify the first certificate (not signed by the configured CA)',
  UNABLE_TO_GET_ISSUER_CERT: 'unable to get issuer certificate (not signed by the configured CA)',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    'unable to get local issuer certificate (not signed by the configured CA)',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'self-signed certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'self-signed certificate in certificate chain',
  CERT_SIGNATURE_FAILURE: 'certificate signature failure',
  CERT_REVOKED: 'certificate revoked',
  INVALID_PURPOSE: 'unsupported certificate purpose (extended key usage lacks clientAuth)',
};

/**
 * Why a client's certificate is refused on a listener with `clientAuth`, or undefined when the
 * connection may proceed. Node hands the verify result to the 'secureConnection' handler (the
 * server runs with rejectUnauthorized off), so the refusal can name the peer and the reason; with
 * rejectUnauthorized on, Node destroys such sockets silently and only 'socket hang up' is left.
 */
export function clientCertificateRefusal(socket: tls.TLSSocket, clientAuth: ClientAuth): string | undefined {
  if (clientAuth === 'none' || socket.authorized) return undefined;
  const presented = Object.keys(socket.getPeerCertificate()).length > 0;
  if (!presented) return clientAuth === 'required' ? 'peer did not return a certificate' : undefined;
  const code = String(socket.authorizationError ?? 'unknown');
  return VERIFY_ERRORS[code] ?? code;
}
