import { describe, expect, it } from 'vitest';
import { DeferredS3ObjectStore, FileObjectStore, openObjectStore } from '../../src/store/index.js';
import { S3ObjectStore } from '../../src/store/s3-store.js';

describe('openObjectStore', () => {
  it.each([
    ['s3://walproxy-wal', 'walproxy-wal', ''],
    ['s3://walproxy-wal/', 'walproxy-wal', ''],
    ['s3://walproxy-wal/cluster-a', 'walproxy-wal', 'cluster-a/'],
    ['s3://walproxy-wal/cluster-a/wal/', 'walproxy-wal', 'cluster-a/wal/'],
    ['s3://wal--use1-az4--x-s3/c%201', 'wal--use1-az4--x-s3', 'c 1/'],
  ])('opens %s as bucket %s with key prefix "%s"', async (url, bucket, prefix) => {
    // Given an s3 URL, When opened, Then bucket and prefix come from it
    const store = openObjectStore(url, { region: 'us-east-1' });
    expect(store).toBeInstanceOf(DeferredS3ObjectStore);
    expect(store).toMatchObject({ url, bucket, keyPrefix: prefix });
    // And the S3 store it builds on first use (the AWS SDK loads then) has the same
    const loaded = await (store as DeferredS3ObjectStore).loaded();
    expect(loaded).toBeInstanceOf(S3ObjectStore);
    expect(loaded).toMatchObject({ url, bucket, keyPrefix: prefix });
    await store.close();
  });

  it('closes an S3 store never used without loading the SDK, and refuses calls after close', async () => {
    // Given an S3 store opened and closed before any call
    const store = openObjectStore('s3://walproxy-wal/x', {
      region: 'us-east-1',
      endpoint: 'http://127.0.0.1:1',
    });
    await store.close();

    // When it is called after all, Then the call fails as a closed store's does
    await expect(store.get('k')).rejects.toMatchObject({ code: 'WALPROXY_ERR_STORE_ABORTED' });
  });

  it('opens a file URL as a directory store', async () => {
    // Given a file URL, When opened, Then a file store for it comes back
    const store = openObjectStore('file:///var/lib/walproxy/wal/');
    expect(store).toBeInstanceOf(FileObjectStore);
    await store.close();
  });

  it.each([
    ['not a url', 'not a URL'],
    ['http://bucket/x', 'unsupported scheme'],
    ['s3://Upper/x', 'not a valid bucket name'],
    ['s3://ab', 'not a valid bucket name'],
    ['s3://bucket:9000/x', 'not in the s3:// URL'],
    ['s3://key:secret@bucket/x', 'not in the s3:// URL'],
    ['s3://bucket/x?region=eu-west-1', 'query strings'],
    ['file://server/share', 'remove the host'],
    ['file:///', 'filesystem root'],
  ])('refuses %s with one clear message', (url, why) => {
    // Given a bad URL, When opened, Then it fails at once as an invalid argument that says why
    expect(() => openObjectStore(url)).toThrow(
      expect.objectContaining({ code: 'WALPROXY_ERR_STORE_INVALID_ARGUMENT' }),
    );
    expect(() => openObjectStore(url)).toThrow(why);
  });
});
