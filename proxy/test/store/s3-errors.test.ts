import { describe, expect, it } from 'vitest';
import { classifyS3Error, ObjectStoreError, type S3ErrorContext } from '../../src/store/index.js';

const context: S3ErrorContext = {
  operation: 'PutObject',
  bucket: 'b',
  keyPrefix: 'p/',
  key: 'k',
  target: 'http://127.0.0.1:9',
};

/** The shape @aws-sdk/client-s3 gives service errors. */
function serviceError(name: string, status: number, fault: 'client' | 'server' = 'client'): Error {
  return Object.assign(new Error(`${name} happened`), {
    name,
    $fault: fault,
    $metadata: { httpStatusCode: status },
  });
}

describe('classifyS3Error', () => {
  it.each([
    ['NoSuchKey', 404, 'WALPROXY_ERR_STORE_NOT_FOUND', false],
    ['NoSuchBucket', 404, 'WALPROXY_ERR_STORE_NO_SUCH_BUCKET', false],
    ['PreconditionFailed', 412, 'WALPROXY_ERR_STORE_ALREADY_EXISTS', false],
    ['AccessDenied', 403, 'WALPROXY_ERR_STORE_ACCESS_DENIED', false],
    ['InvalidAccessKeyId', 403, 'WALPROXY_ERR_STORE_ACCESS_DENIED', false],
    ['SignatureDoesNotMatch', 403, 'WALPROXY_ERR_STORE_ACCESS_DENIED', false],
    ['ExpiredToken', 400, 'WALPROXY_ERR_STORE_ACCESS_DENIED', false],
    ['InvalidRange', 416, 'WALPROXY_ERR_STORE_INVALID_RANGE', false],
    ['SlowDown', 503, 'WALPROXY_ERR_STORE_OTHER', true],
    ['InternalError', 500, 'WALPROXY_ERR_STORE_OTHER', true],
    ['ConditionalRequestConflict', 409, 'WALPROXY_ERR_STORE_OTHER', true],
    ['NotImplemented', 501, 'WALPROXY_ERR_STORE_OTHER', false],
    ['InvalidArgument', 400, 'WALPROXY_ERR_STORE_OTHER', false],
  ])('maps service error %s (HTTP %i) to %s, retriable=%s', (name, status, code, retriable) => {
    // Given a service error as the SDK throws it, When classified, Then the code and flag match
    const err = classifyS3Error(serviceError(name, status), context);
    expect(err).toBeInstanceOf(ObjectStoreError);
    expect(err).toMatchObject({ code, retriable, key: 'k' });
    expect(err.message).toContain('PutObject s3://b/p/k');
  });

  it('reads a bare 404 on HeadBucket as a missing bucket, and on other calls as a missing key', () => {
    // Given the body-less 404 that HEAD requests give
    const notFound = serviceError('NotFound', 404);

    // When classified for HeadBucket and HeadObject, Then the meaning follows the operation
    expect(classifyS3Error(notFound, { ...context, operation: 'HeadBucket', key: undefined })).toMatchObject({
      code: 'WALPROXY_ERR_STORE_NO_SUCH_BUCKET',
    });
    expect(classifyS3Error(notFound, { ...context, operation: 'HeadObject' })).toMatchObject({
      code: 'WALPROXY_ERR_STORE_NOT_FOUND',
    });
  });

  it('calls refused, reset and timed-out connections unreachable and retriable, naming the target', () => {
    // Given socket errors, alone, wrapped in an AggregateError, and the SDK's request timeout
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    const aggregate = new AggregateError([refused], 'all attempts failed');
    const timeout = Object.assign(new Error('request timed out'), { name: 'TimeoutError' });

    for (const cause of [refused, aggregate, timeout]) {
      // When classified, Then each is unreachable and says where it tried to go
      const err = classifyS3Error(cause, context);
      expect(err).toMatchObject({ code: 'WALPROXY_ERR_STORE_UNREACHABLE', retriable: true });
      expect(err.message).toContain('http://127.0.0.1:9');
      expect(err.cause).toBe(cause);
    }
  });

  it('turns a missing region into an invalid argument that says how to fix it', () => {
    // Given the SDK's configuration error, When classified, Then it asks for a region
    const err = classifyS3Error(new Error('Region is missing'), context);
    expect(err).toMatchObject({
      code: 'WALPROXY_ERR_STORE_INVALID_ARGUMENT',
      message: expect.stringContaining('AWS_REGION'),
    });
  });

  it('treats unknown server faults as retriable and passes store errors through', () => {
    // Given an unnamed 502 and an error that is already typed
    const typed = new ObjectStoreError('WALPROXY_ERR_STORE_INVALID_RANGE', 'already typed');

    // When classified, Then the 502 is retriable and the typed error is returned unchanged
    expect(classifyS3Error(serviceError('UnknownError', 502, 'server'), context)).toMatchObject({
      code: 'WALPROXY_ERR_STORE_OTHER',
      retriable: true,
    });
    expect(classifyS3Error(typed, context)).toBe(typed);
  });
});
