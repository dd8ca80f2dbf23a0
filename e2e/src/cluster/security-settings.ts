import { writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A secured cluster as production runs it, behind the sidecars (docs/security.md):
 * - clients speak SASL_SSL to the sidecar's client ingress, which terminates TLS; SASL goes
 *   through untouched to the broker's CLIENT listener (SASL_PLAINTEXT on the pod's loopback), so
 *   the broker authenticates every client and its authorizer (StandardAuthorizer) decides;
 * - brokers replicate over SASL (SCRAM-SHA-512, user `admin`) on REPLICATION, through their
 *   sidecars, which talk to each other over mutual TLS (certificates from the peer CA only);
 * - the controller listener and the harness's DIRECT listener stay PLAINTEXT on loopback; their
 *   principal, ANONYMOUS, is a super user so that brokers register and the harness can set ACLs
 *   (a harness shortcut: production controllers authenticate too).
 */
export const SCRAM = 'SCRAM-SHA-512';

/** SCRAM users created at format time (`kafka-storage format --add-scram`, KIP-900). */
export const USERS = {
  /** Inter-broker principal, super user. */
  admin: 'admin-secret',
  /** An application: may use topics `wal-sec*` and any group, nothing else. */
  alice: 'alice-secret',
  /** The sidecars' own Kafka clients (metadata topic, topic-id lookups). */
  walproxy: 'walproxy-secret',
} as const;

export type User = keyof typeof USERS;

export function scramFormatArgs(): string[] {
  return Object.entries(USERS).flatMap(([name, password]) => [
    '--add-scram',
    `${SCRAM}=[name=${name},password=${password}]`,
  ]);
}

const jaas = (user?: User) =>
  user === undefined
    ? 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
    : `org.apache.kafka.common.security.scram.ScramLoginModule required username="${user}" password="${USERS[user]}";`;

/** Broker (and controller) properties on top of the harness's listener wiring. */
export function secureBrokerProperties(): Record<string, string> {
  return {
    'listener.security.protocol.map':
      'CLIENT:SASL_PLAINTEXT,REPLICATION:SASL_PLAINTEXT,DIRECT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    'sasl.enabled.mechanisms': SCRAM,
    'sasl.mechanism.inter.broker.protocol': SCRAM,
    'listener.name.client.scram-sha-512.sasl.jaas.config': jaas(),
    // The REPLICATION listener's JAAS config serves both ends: the broker's own login as a
    // follower (username/password) and the server side of the leader.
    'listener.name.replication.scram-sha-512.sasl.jaas.config': jaas('admin'),
    'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
    'super.users': 'User:admin;User:ANONYMOUS',
  };
}

export interface SidecarTlsFiles {
  /** Client ingress: the certificate clients verify (SAN IP:127.0.0.1), and its key. */
  serverCert: string;
  serverKey: string;
  /** CA that signed serverCert: what clients and the sidecars' own clients trust. */
  clientCa: string;
  /** This sidecar's peer certificate (replication ingress server + egress client) and key. */
  peerCert: string;
  peerKey: string;
  /** The peer CA: the only issuer the replication ingress accepts. */
  peerCa: string;
}

/**
 * `walproxy sidecar` flags for TLS termination, peer mTLS and the sidecar's own SCRAM login.
 * `metadataBootstrap`: the sidecar's own client ingress (TLS), where its Kafka clients start;
 * brokers advertise the client ingresses, so that is what they speak to anyway.
 */
export function secureSidecarArgs(
  files: SidecarTlsFiles,
  workDir: string,
  metadataBootstrap: string,
): string[] {
  const passwordFile = path.join(workDir, 'walproxy.password');
  writeFileSync(passwordFile, `${USERS.walproxy}\n`, { mode: 0o600 });
  return [
    `--client-tls-cert=${files.serverCert}`,
    `--client-tls-key=${files.serverKey}`,
    `--replication-tls-cert=${files.peerCert}`,
    `--replication-tls-key=${files.peerKey}`,
    `--replication-tls-ca=${files.peerCa}`,
    `--metadata-sasl-mechanism=${SCRAM}`,
    '--metadata-sasl-username=walproxy',
    `--metadata-sasl-password-file=${passwordFile}`,
    `--metadata-tls-ca=${files.clientCa}`,
    `--metadata-bootstrap=${metadataBootstrap}`,
  ];
}

/** Java client properties for SASL_SSL + SCRAM-SHA-512 through the sidecars (PEM truststore). */
export function javaClientProps(user: User, ca: string, password = USERS[user]): Record<string, string> {
  return {
    'security.protocol': 'SASL_SSL',
    'sasl.mechanism': SCRAM,
    'sasl.jaas.config': `org.apache.kafka.common.security.scram.ScramLoginModule required username="${user}" password="${password}";`,
    'ssl.truststore.type': 'PEM',
    'ssl.truststore.location': ca,
  };
}

/** The same for kcat (librdkafka). */
export function kcatSecurityArgs(user: User, ca: string, password: string = USERS[user]): string[] {
  return [
    '-X',
    'security.protocol=SASL_SSL',
    '-X',
    `sasl.mechanisms=${SCRAM}`,
    '-X',
    `sasl.username=${user}`,
    '-X',
    `sasl.password=${password}`,
    '-X',
    `ssl.ca.location=${ca}`,
  ];
}
