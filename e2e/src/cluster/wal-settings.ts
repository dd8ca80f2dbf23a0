import type { S3Info } from './cluster-info.js';

/** moto accepts any credentials; the sidecars take them from the SDK's default chain (env). */
export function walSidecarEnv(): Record<string, string> {
  return { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test', AWS_REGION: 'us-east-1' };
}

/** Sidecar flags that send topics matching `s3.walTopicGlob` to the WAL on the given S3 server. */
export function walSidecarArgs(s3: Omit<S3Info, 'pid'>, extra: string[] = []): string[] {
  return [
    `--wal-store-url=s3://${s3.bucket}/${s3.prefix.replace(/\/$/, '')}`,
    `--s3-endpoint=${s3.endpoint}`,
    '--s3-force-path-style=true',
    `--wal-topic=${s3.walTopicGlob}`,
    // Through the WAL whatever the objects cost: the tests check what the WAL does with small
    // workloads, which the sealing policy (the default, mode=auto) would replicate inline.
    // e2e/test/cost-aware-zones.test.ts runs mode=auto on a cluster of its own.
    `--topic-config=${s3.walTopicGlob}:mode=wal`,
    // The same WAL, but followers replicate these topics the stock way: the baseline that the
    // replication tests compare against, in the same run.
    '--topic-config=wal-inline-*:mode=inline',
    // The default policy, for the tests that show what it decides (a trickle below break-even
    // stays inline: e2e/test/operator-view.test.ts).
    '--topic-config=wal-auto-*:mode=auto',
    // Durable ack is off by default (a store outage must not fail produce); the tests that show
    // what it does ask for it by topic name.
    '--topic-config=wal-durable-*:durable.ack=true',
    // Produce does not wait for the store: replication must carry on inline through an outage
    // (the default since issue #12; kept explicit so the name says what the test relies on).
    '--topic-config=wal-nodurable-*:durable.ack=false',
    ...extra,
  ];
}

/** The bucket of `zone`'s object store in the three-zone e2e clusters (one per zone, as S3 Express One Zone). */
export const zoneBucket = (zone: string) => `walproxy-${zone}`;

/**
 * Sidecar flags for the three-zone clusters: each sidecar writes its zone's bucket and reads any
 * zone's (a follower reads its leader's zone bucket), all on one S3 server at `endpoint`.
 */
export function zonalStoreFlags(zone: string, endpoint: string): string[] {
  return [
    `--wal-store-url=s3://${zoneBucket(zone)}/wal`,
    `--wal-read-store-url=s3://${zoneBucket('zone-*')}/wal`,
    `--s3-endpoint=${endpoint}`,
    '--s3-force-path-style=true',
  ];
}
