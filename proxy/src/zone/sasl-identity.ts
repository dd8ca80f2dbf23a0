/**
 * The user a SASL login names, for the mechanisms whose first client message carries it in the
 * clear (RFC 4616 PLAIN, RFC 5802 SCRAM), as Kafka's own servers read it: PLAIN's authentication
 * id (PlainSaslServer refuses an authorization id that differs from it), SCRAM's `n=` saslname
 * with `=2C` and `=3D` decoded (ScramSaslServer). The broker's principal is then `User:<user>`
 * (the default principal builder; a delegation token's login names the token id, the same token
 * every time). Undefined for anything else: GSSAPI and OAUTHBEARER carry no readable user here.
 */
export function saslUsername(mechanism: string, authBytes: Buffer): string | undefined {
  if (mechanism === 'PLAIN') {
    const parts = authBytes.toString('utf8').split('\u0000');
    return parts.length === 3 && parts[1] !== '' ? parts[1] : undefined;
  }
  if (mechanism === 'SCRAM-SHA-256' || mechanism === 'SCRAM-SHA-512') {
    // client-first-message = gs2-header client-first-message-bare; gs2-header = "n,," or "n,a=<authzid>,"
    const match = /^[nyp][^,]*,[^,]*,n=([^,]*),r=/.exec(authBytes.toString('utf8'));
    if (!match || match[1] === '') return undefined;
    return match[1]!.replaceAll('=2C', ',').replaceAll('=3D', '=');
  }
  return undefined;
}
