// Where a bucket's requests go and how they are signed, resolved through the SDK (s3-data-path.ts
// says why the data path signs its own requests). Apart from the data path so that the signing,
// which tests check against the SDK's own requests, reads on its own.
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { SignatureV4SignWithCredentials } from '@aws-sdk/signature-v4-multi-region';
import { getEndpointFromInstructions } from '@smithy/core/endpoints';
import type { S3ExpressSession } from './s3-express-sessions.js';

/**
 * Where a bucket's requests go and how they are signed, from the client's config: the same
 * endpoint rules, auth scheme, credentials and signer as the SDK's own calls. Resolved once per store.
 */
export interface S3Signing {
  protocol: 'http:' | 'https:';
  /** For `net.connect` (an IPv6 address without brackets). */
  hostname: string;
  port: number | undefined;
  /** The Host header, as signed: hostname, and the port when it is not the scheme's default. */
  host: string;
  /** `''` (virtual-hosted) or `/bucket` (path-style); a key's path is `${basePath}/${encodeKey(key)}`. */
  basePath: string;
  /** `s3`, or `s3express` for directory buckets. */
  signingName: string;
  signingRegion: string;
  /** S3 Express session auth (`sigv4-s3express`); else plain SigV4 with the client's credentials. */
  session: boolean;
  /** Send `x-amz-checksum-crc32` on puts (the SDK's `requestChecksumCalculation: WHEN_SUPPORTED`). */
  checksum: boolean;
  /**
   * The headers to send: `headers` (which must hold `host` and `x-amz-content-sha256`) plus
   * `x-amz-date`, `authorization` and, with a session, `x-amz-s3session-token`; with plain SigV4
   * and temporary credentials, `x-amz-security-token`.
   */
  sign(
    request: {
      method: string;
      path: string;
      query?: Record<string, string>;
      headers: Record<string, string>;
    },
    signingDate: Date,
    session?: S3ExpressSession,
  ): Promise<Record<string, string>>;
}

export async function resolveS3Signing(client: S3Client, bucket: string): Promise<S3Signing> {
  const config = client.config;
  // The Key is no endpoint parameter (the SDK's endpoint cache leaves it out): one answer per bucket.
  const endpoint = await getEndpointFromInstructions(
    { Bucket: bucket, Key: 'k' },
    PutObjectCommand as unknown as Parameters<typeof getEndpointFromInstructions>[1],
    config as unknown as Parameters<typeof getEndpointFromInstructions>[2],
  );
  const scheme = (
    endpoint.properties?.authSchemes as
      | { name?: string; signingName?: string; signingRegion?: string }[]
      | undefined
  )?.[0];
  const url = endpoint.url;
  const signingName = scheme?.signingName ?? 's3';
  const signingRegion = scheme?.signingRegion ?? (await config.region());
  const signer = new SignatureV4SignWithCredentials({
    credentials: config.credentials,
    region: signingRegion,
    service: signingName,
    sha256: config.sha256,
    // S3 signs the path as sent, without a second round of URI encoding.
    uriEscapePath: false,
    applyChecksum: false,
  });
  const protocol = url.protocol === 'https:' ? 'https:' : 'http:';
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  const port = url.port === '' ? undefined : Number(url.port);
  return {
    protocol,
    hostname,
    port,
    host: url.host,
    // The S3 Express rules give `/bucket/` for an IP endpoint; the key adds its own `/`.
    basePath: url.pathname.replace(/\/+$/, ''),
    signingName,
    signingRegion,
    session: scheme?.name === 'sigv4-s3express',
    checksum: (await config.requestChecksumCalculation()) === 'WHEN_SUPPORTED',
    async sign(request, signingDate, session) {
      const unsigned = { query: {}, ...request, protocol, hostname, port };
      const signed =
        session === undefined
          ? await signer.sign(unsigned, { signingDate })
          : await signer.signWithCredentials(unsigned, session, { signingDate });
      return signed.headers;
    },
  };
}

/**
 * The key as the SDK puts it in the path: each segment URI-encoded (RFC 3986, so `!'()*` too),
 * `/` kept; the signer signs this path as is.
 */
export function encodeKey(key: string): string {
  return key
    .split('/')
    .map((segment) =>
      encodeURIComponent(segment).replace(
        /[!'()*]/g,
        (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
      ),
    )
    .join('/');
}
