// TLS and SASL flags of `walproxy sidecar`, and their validation. Files are read and checked at
// startup (certificate parses, key parses and matches it, CA bundle holds certificates), so a
// bad file is one line naming its flag and exit code 2, not a listener that fails its first
// handshake. See docs/security.md for what each setting protects.
import { readFileSync } from 'node:fs';
import type { Argv } from 'yargs';
import {
  SASL_MECHANISMS,
  type SaslCredentials,
  type SaslMechanism,
  Secret,
} from '../metadata/sasl-client.js';
import {
  CLIENT_AUTH_MODES,
  type ClientAuth,
  loadTlsMaterial,
  TlsFileError,
  type TlsFileRole,
  type TlsFiles,
} from '../net/tls-material.js';
import { boolFlag, boolOption, type FlagErrorSink, flagText, present } from './flag-values.js';

/** TLS termination on an ingress listener. */
export interface ListenerTlsConfig {
  files: TlsFiles;
  clientAuth: ClientAuth;
}

/** TLS of the egress to the peers' replication ingress. */
export interface PeerTlsConfig {
  /** `ca` always; `cert` and `key` when the egress presents a client certificate. */
  files: TlsFiles;
  /** Name checked against the peer's certificate and sent as SNI; may hold `{id}`. Default: the peer address's host. */
  serverName?: string;
  /** false: verify the peer's certificate chain against the CA only, not its name. */
  verifyHostname: boolean;
}

/** How the sidecar's own Kafka clients (metadata topic, topic-id lookups) authenticate. */
export interface KafkaClientSecurity {
  sasl?: SaslCredentials;
  /** TLS to the brokers; `files` may be empty (Node's default CAs, no client certificate). */
  tls?: { files: TlsFiles };
}

export interface SecurityConfig {
  clientTls?: ListenerTlsConfig;
  replicationTls?: ListenerTlsConfig;
  peerTls?: PeerTlsConfig;
  metadataClient: KafkaClientSecurity;
}

export const SECURITY_DEFAULTS = {
  'client-tls-client-auth': 'none',
  // Nothing but a sidecar holding a certificate from the peer CA may reach the inter-broker listener.
  'replication-tls-client-auth': 'required',
  'peer-tls-verify-hostname': 'true',
} as const;

export function securityFlagOptions<T>(yargs: Argv<T>): Argv<T> {
  const pem = (what: string) => ({ type: 'string' as const, requiresArg: true, describe: what });
  return yargs
    .option(
      'client-tls-cert',
      pem('client ingress TLS: PEM certificate (chain) file; enables TLS, reloaded on change'),
    )
    .option(
      'client-tls-key',
      pem('client ingress TLS: PEM private key file (unencrypted), reloaded on change'),
    )
    .option('client-tls-ca', pem('client ingress TLS: PEM CA bundle that verifies client certificates'))
    .option('client-tls-client-auth', {
      type: 'string',
      describe: 'client ingress: none, requested or required client certificates (as Kafka ssl.client.auth)',
      default: SECURITY_DEFAULTS['client-tls-client-auth'],
    })
    .option(
      'replication-tls-cert',
      pem('replication ingress TLS: PEM certificate file; enables TLS, reloaded on change'),
    )
    .option('replication-tls-key', pem('replication ingress TLS: PEM private key file, reloaded on change'))
    .option(
      'replication-tls-ca',
      pem("replication ingress TLS: PEM CA bundle that signs the peer sidecars' certificates"),
    )
    .option('replication-tls-client-auth', {
      type: 'string',
      describe: 'replication ingress: none, requested or required peer certificates',
      default: SECURITY_DEFAULTS['replication-tls-client-auth'],
    })
    .option(
      'peer-tls',
      boolOption(
        "egress connects to the peers' replication ingress over TLS (true/false; default: true when --replication-tls-cert or a --peer-tls-* file is set)",
      ),
    )
    .option(
      'peer-tls-ca',
      pem("egress TLS: PEM CA bundle that signs the peers' certificates (default: --replication-tls-ca)"),
    )
    .option(
      'peer-tls-cert',
      pem('egress TLS: PEM client certificate presented to peers (default: --replication-tls-cert)'),
    )
    .option('peer-tls-key', pem('egress TLS: PEM key of --peer-tls-cert (default: --replication-tls-key)'))
    .option('peer-tls-server-name', {
      type: 'string',
      requiresArg: true,
      describe:
        "egress TLS: name the peer's certificate must carry, {id} = its broker id, e.g. 'kafka-{id}.kafka-headless' (default: the peer address's host)",
    })
    .option(
      'peer-tls-verify-hostname',
      boolOption(
        "egress TLS: check the peer certificate's name (true) or only that the CA signed it (false)",
        SECURITY_DEFAULTS['peer-tls-verify-hostname'],
      ),
    )
    .option('metadata-sasl-mechanism', {
      type: 'string',
      requiresArg: true,
      describe: `SASL mechanism of the sidecar's own Kafka clients: ${SASL_MECHANISMS.join(', ')} (unset: no SASL)`,
    })
    .option('metadata-sasl-username', {
      type: 'string',
      requiresArg: true,
      describe: "SASL user of the sidecar's own Kafka clients",
    })
    .option('metadata-sasl-password-file', {
      type: 'string',
      requiresArg: true,
      describe: "file holding that user's password (one trailing newline is ignored); never logged",
    })
    .option(
      'metadata-tls',
      boolOption(
        "the sidecar's own Kafka clients use TLS (true/false; default: true when --client-tls-cert is set, since brokers advertise the client ingress)",
      ),
    )
    .option(
      'metadata-tls-ca',
      pem("PEM CA bundle the sidecar's own Kafka clients trust (default: Node's CAs)"),
    )
    .option('metadata-tls-cert', pem("PEM client certificate of the sidecar's own Kafka clients, for mTLS"))
    .option('metadata-tls-key', pem('PEM key of --metadata-tls-cert'));
}

/**
 * Loads a TLS file set once to validate it; every problem is reported against the flag that
 * named the file (`flagOf`), at most one line per file set.
 */
function checkTlsFiles(
  files: TlsFiles,
  flagOf: (role: TlsFileRole) => string,
  errors: FlagErrorSink,
): boolean {
  try {
    loadTlsMaterial(files);
    return true;
  } catch (error) {
    if (error instanceof TlsFileError) errors.add(flagOf(error.role), error.message);
    else errors.add(flagOf('cert'), (error as Error).message);
    return false;
  }
}

function clientAuthOf(
  raw: Record<string, unknown>,
  flag: string,
  errors: FlagErrorSink,
): ClientAuth | undefined {
  const value = flagText(raw, flag) ?? SECURITY_DEFAULTS[flag as keyof typeof SECURITY_DEFAULTS];
  if ((CLIENT_AUTH_MODES as readonly string[]).includes(value)) return value as ClientAuth;
  errors.add(flag, `'${value}' is not ${CLIENT_AUTH_MODES.join(', ')}`);
  return undefined;
}

/** `--<prefix>-tls-cert/key/ca/client-auth` of one ingress listener. */
function listenerTls(
  raw: Record<string, unknown>,
  prefix: 'client' | 'replication',
  errors: FlagErrorSink,
): ListenerTlsConfig | undefined {
  const flag = (role: string) => `${prefix}-tls-${role}`;
  const cert = flagText(raw, flag('cert'));
  const key = flagText(raw, flag('key'));
  const ca = flagText(raw, flag('ca'));
  if (cert === undefined && key === undefined) {
    if (ca !== undefined)
      errors.add(flag('cert'), `is required with --${flag('ca')} (TLS needs a certificate and key)`);
    if (
      present(raw[flag('client-auth')]) &&
      flagText(raw, flag('client-auth')) !== SECURITY_DEFAULTS[`${prefix}-tls-client-auth`]
    ) {
      errors.add(flag('cert'), `is required with --${flag('client-auth')} (TLS needs a certificate and key)`);
    }
    return undefined;
  }
  if (cert === undefined) {
    errors.add(flag('cert'), `is required with --${flag('key')}`);
    return undefined;
  }
  if (key === undefined) {
    errors.add(flag('key'), `is required with --${flag('cert')}`);
    return undefined;
  }
  const clientAuth = clientAuthOf(raw, flag('client-auth'), errors);
  if (clientAuth === undefined) return undefined;
  if (clientAuth !== 'none' && ca === undefined) {
    errors.add(
      prefix === 'replication' ? flag('ca') : flag('client-auth'),
      prefix === 'replication'
        ? `is required: with --${flag('client-auth')}=${clientAuth} (the default is required) peers are verified against this CA; set --${flag('client-auth')}=none to accept any peer`
        : `'${clientAuth}' needs --${flag('ca')} (the CA that signs client certificates)`,
    );
    return undefined;
  }
  const files: TlsFiles = { cert, key, ...(ca !== undefined ? { ca } : {}) };
  if (!checkTlsFiles(files, flag, errors)) return undefined;
  return { files, clientAuth };
}

function peerTls(
  raw: Record<string, unknown>,
  replicationTls: ListenerTlsConfig | undefined,
  egressCount: number,
  errors: FlagErrorSink,
): PeerTlsConfig | undefined {
  const explicit = {
    ca: flagText(raw, 'peer-tls-ca'),
    cert: flagText(raw, 'peer-tls-cert'),
    key: flagText(raw, 'peer-tls-key'),
  };
  const enabled =
    boolFlag(raw, 'peer-tls', errors) ??
    (replicationTls !== undefined || Object.values(explicit).some((v) => v !== undefined));
  const verifyHostname = boolFlag(raw, 'peer-tls-verify-hostname', errors) ?? true;
  const serverName = flagText(raw, 'peer-tls-server-name');
  if (serverName !== undefined && !/^[A-Za-z0-9.{}:_-]+$/.test(serverName)) {
    errors.add(
      'peer-tls-server-name',
      `'${serverName}' is not a host name (letters, digits, '.', '-', {id})`,
    );
  }
  if (!enabled || egressCount === 0) return undefined;
  // A sidecar is both a replication ingress and an egress: by default the egress presents the
  // ingress's certificate and trusts the CA that the ingress checks peers against.
  const inherited = replicationTls?.files ?? {};
  const files: TlsFiles = {};
  const source: Partial<Record<TlsFileRole, string>> = {};
  for (const role of ['ca', 'cert', 'key'] as const) {
    const value = explicit[role] ?? inherited[role];
    if (value === undefined) continue;
    files[role] = value;
    source[role] = explicit[role] !== undefined ? `peer-tls-${role}` : `replication-tls-${role}`;
  }
  if (files.ca === undefined) {
    errors.add(
      'peer-tls-ca',
      "is required when the egress uses TLS: the CA that signed the peers' replication ingress certificates (default: --replication-tls-ca)",
    );
    return undefined;
  }
  if ((files.cert === undefined) !== (files.key === undefined)) {
    errors.add(
      files.cert === undefined ? 'peer-tls-cert' : 'peer-tls-key',
      'peer TLS needs both a certificate and its key',
    );
    return undefined;
  }
  if (!checkTlsFiles(files, (role) => source[role] ?? `peer-tls-${role}`, errors)) return undefined;
  return { files, verifyHostname, ...(serverName !== undefined ? { serverName } : {}) };
}

function metadataSasl(raw: Record<string, unknown>, errors: FlagErrorSink): SaslCredentials | undefined {
  const mechanismText = flagText(raw, 'metadata-sasl-mechanism');
  const username = flagText(raw, 'metadata-sasl-username');
  const passwordFile = flagText(raw, 'metadata-sasl-password-file');
  if (mechanismText === undefined) {
    if (username !== undefined)
      errors.add('metadata-sasl-mechanism', 'is required with --metadata-sasl-username');
    else if (passwordFile !== undefined)
      errors.add('metadata-sasl-mechanism', 'is required with --metadata-sasl-password-file');
    return undefined;
  }
  const mechanism = mechanismText.toUpperCase();
  if (!(SASL_MECHANISMS as readonly string[]).includes(mechanism)) {
    errors.add('metadata-sasl-mechanism', `'${mechanismText}' is not one of ${SASL_MECHANISMS.join(', ')}`);
    return undefined;
  }
  if (username === undefined)
    errors.add('metadata-sasl-username', `is required with --metadata-sasl-mechanism`);
  if (passwordFile === undefined) {
    errors.add(
      'metadata-sasl-password-file',
      'is required with --metadata-sasl-mechanism (a file, so the password is never on a command line)',
    );
    return undefined;
  }
  let password: string;
  try {
    // A file written by `echo` or a text editor ends in a newline that is not part of the password.
    password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
  } catch (error) {
    errors.add('metadata-sasl-password-file', `cannot read ${passwordFile}: ${(error as Error).message}`);
    return undefined;
  }
  if (password === '') {
    errors.add('metadata-sasl-password-file', `${passwordFile} is empty`);
    return undefined;
  }
  if (username === undefined) return undefined;
  return { mechanism: mechanism as SaslMechanism, username, password: new Secret(password) };
}

function metadataTls(
  raw: Record<string, unknown>,
  clientTls: ListenerTlsConfig | undefined,
  errors: FlagErrorSink,
): { files: TlsFiles } | undefined {
  const files: TlsFiles = {};
  for (const role of ['ca', 'cert', 'key'] as const) {
    const value = flagText(raw, `metadata-tls-${role}`);
    if (value !== undefined) files[role] = value;
  }
  const enabled =
    boolFlag(raw, 'metadata-tls', errors) ?? (clientTls !== undefined || Object.keys(files).length > 0);
  if (!enabled) return undefined;
  if ((files.cert === undefined) !== (files.key === undefined)) {
    errors.add(
      files.cert === undefined ? 'metadata-tls-cert' : 'metadata-tls-key',
      'needs both a certificate and its key',
    );
    return undefined;
  }
  if (Object.keys(files).length > 0 && !checkTlsFiles(files, (role) => `metadata-tls-${role}`, errors)) {
    return undefined;
  }
  return { files };
}

/**
 * Validates every TLS and SASL flag; `replicationListen`: a listener takes peers (the replication
 * ingress or the zone ingress), `egressCount`: how many egress listeners will dial peers.
 */
export function parseSecurityFlags(
  raw: Record<string, unknown>,
  errors: FlagErrorSink,
  { replicationListen, egressCount }: { replicationListen: boolean; egressCount: number },
): SecurityConfig {
  const clientTls = listenerTls(raw, 'client', errors);
  let replicationTls: ListenerTlsConfig | undefined;
  if (replicationListen) replicationTls = listenerTls(raw, 'replication', errors);
  else if (present(raw['replication-tls-cert']) || present(raw['replication-tls-key'])) {
    errors.add('replication-tls-cert', 'is used only with --replication-listen or --zone-ingress-listen');
  }
  const peer = peerTls(raw, replicationTls, egressCount, errors);
  const sasl = metadataSasl(raw, errors);
  const tls = metadataTls(raw, clientTls, errors);
  return {
    ...(clientTls ? { clientTls } : {}),
    ...(replicationTls ? { replicationTls } : {}),
    ...(peer ? { peerTls: peer } : {}),
    metadataClient: { ...(sasl ? { sasl } : {}), ...(tls ? { tls } : {}) },
  };
}
