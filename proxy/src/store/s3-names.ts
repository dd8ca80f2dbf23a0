// S3 facts the flags and the store both need, without the AWS SDK: the CLI validates its flags
// with these at start, and the SDK is loaded only when a store is first used (deferred-s3-store.ts).

export const S3_SERVER_SIDE_ENCRYPTIONS = ['AES256', 'aws:kms'] as const;
export type S3ServerSideEncryption = (typeof S3_SERVER_SIDE_ENCRYPTIONS)[number];

/** S3 Express One Zone directory buckets are named `base--zoneid--x-s3`. */
export function isDirectoryBucket(bucket: string): boolean {
  return bucket.endsWith('--x-s3');
}
