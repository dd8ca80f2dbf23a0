import { describe, expect, it } from 'vitest';
import { type S3ExpressSession, S3ExpressSessions } from '../../src/store/s3-express-sessions.js';

const MINUTE = 60_000;

/** A CreateSession stand-in on a fake clock: 5-minute sessions, numbered, failing on demand. */
function fakeCreateSession(clock: { now: number }) {
  const calls: string[] = [];
  const signals: AbortSignal[] = [];
  let failNext = 0;
  let hold: Promise<void> | undefined;
  const create = async (bucket: string, signal: AbortSignal): Promise<S3ExpressSession> => {
    calls.push(bucket);
    signals.push(signal);
    const n = calls.length;
    if (hold !== undefined) await hold;
    if (failNext > 0) {
      failNext--;
      throw Object.assign(new Error('CreateSession failed'), { name: 'InternalError' });
    }
    return {
      accessKeyId: `ASIA${n}`,
      secretAccessKey: `secret-${n}`,
      sessionToken: `token-${bucket}-${n}`,
      expiration: new Date(clock.now + 5 * MINUTE),
    };
  };
  return {
    create,
    calls,
    signals,
    failNext(count: number) {
      failNext = count;
    },
    holdUntil(promise: Promise<void> | undefined) {
      hold = promise;
    },
  };
}

/** Lets background refreshes settle. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('S3ExpressSessions', () => {
  it('creates one session per bucket, shared by concurrent callers', async () => {
    // Given a cache on a fake clock
    const clock = { now: 1_000_000 };
    const fake = fakeCreateSession(clock);
    const sessions = new S3ExpressSessions(fake.create, { now: () => clock.now });

    // When three requests for one bucket and one for another arrive at once
    const [a, b, c, other] = await Promise.all([
      sessions.session('bucket-a--use1-az4--x-s3'),
      sessions.session('bucket-a--use1-az4--x-s3'),
      sessions.session('bucket-a--use1-az4--x-s3'),
      sessions.session('bucket-b--use1-az4--x-s3'),
    ]);

    // Then CreateSession ran once per bucket and the callers of one bucket share its session
    expect(fake.calls).toEqual(['bucket-a--use1-az4--x-s3', 'bucket-b--use1-az4--x-s3']);
    expect(b).toBe(a);
    expect(c).toBe(a);
    expect(other.sessionToken).toBe('token-bucket-b--use1-az4--x-s3-2');
  });

  it('reuses a session until the refresh window, then refreshes it in the background once', async () => {
    // Given a session created at t0 (expires at t0 + 5 min; the window opens at t0 + 4 min)
    const clock = { now: 1_000_000 };
    const fake = fakeCreateSession(clock);
    const sessions = new S3ExpressSessions(fake.create, { now: () => clock.now });
    const first = await sessions.session('b');

    // When requests come until just before the window, Then no new session is made
    clock.now += 4 * MINUTE - 1;
    expect(await sessions.session('b')).toBe(first);
    expect(fake.calls).toHaveLength(1);

    // When requests come inside the window while CreateSession is slow, Then they still get the
    // old session at once, and one refresh runs for all of them
    let release!: () => void;
    fake.holdUntil(new Promise((resolve) => (release = resolve)));
    clock.now += 2;
    expect(await sessions.session('b')).toBe(first);
    expect(await sessions.session('b')).toBe(first);
    expect(fake.calls).toHaveLength(2);

    // When the refresh has landed, Then requests get the new session
    fake.holdUntil(undefined);
    release();
    await settle();
    const second = await sessions.session('b');
    expect(second).not.toBe(first);
    expect(second.sessionToken).toBe('token-b-2');
    expect(fake.calls).toHaveLength(2);
  });

  it('keeps serving the old session when a background refresh fails, and tries again later', async () => {
    // Given a session inside its refresh window, and a CreateSession that fails once
    const clock = { now: 1_000_000 };
    const fake = fakeCreateSession(clock);
    const sessions = new S3ExpressSessions(fake.create, { now: () => clock.now, retryDelayMs: 1_000 });
    const first = await sessions.session('b');
    clock.now += 4 * MINUTE + 1;
    fake.failNext(1);

    // When the refresh fails (no unhandled rejection: vitest would report it)
    expect(await sessions.session('b')).toBe(first);
    await settle();

    // Then the old session still serves, with no new attempt before the retry delay
    expect(await sessions.session('b')).toBe(first);
    expect(fake.calls).toHaveLength(2);

    // When the retry delay has passed, Then the next request starts a refresh that succeeds
    clock.now += 1_000;
    expect(await sessions.session('b')).toBe(first);
    expect(fake.calls).toHaveLength(3);
    await settle();
    expect((await sessions.session('b')).sessionToken).toBe('token-b-3');
  });

  it('waits for a new session when the old one has expired', async () => {
    // Given a session past its expiry (minus the margin)
    const clock = { now: 1_000_000 };
    const fake = fakeCreateSession(clock);
    const sessions = new S3ExpressSessions(fake.create, { now: () => clock.now, expiryMarginMs: 5_000 });
    const first = await sessions.session('b');
    clock.now += 5 * MINUTE - 5_000;

    // When a request comes, Then it gets a fresh session, never the expiring one
    const next = await sessions.session('b');
    expect(next).not.toBe(first);
    expect(next.expiration.getTime()).toBe(clock.now + 5 * MINUTE);
  });

  it('passes a failed first CreateSession to its callers, and the next call tries again', async () => {
    // Given a CreateSession that fails once
    const clock = { now: 1_000_000 };
    const fake = fakeCreateSession(clock);
    const sessions = new S3ExpressSessions(fake.create, { now: () => clock.now });
    fake.failNext(1);

    // When a session is asked for twice, Then the first call fails and the second succeeds
    await expect(sessions.session('b')).rejects.toMatchObject({ name: 'InternalError' });
    expect((await sessions.session('b')).sessionToken).toBe('token-b-2');
  });

  it("stops a caller's wait when its signal fires, and aborts CreateSession on close", async () => {
    // Given a CreateSession that does not answer
    const clock = { now: 1_000_000 };
    const fake = fakeCreateSession(clock);
    const sessions = new S3ExpressSessions(fake.create, { now: () => clock.now });
    fake.holdUntil(new Promise(() => undefined));
    const controller = new AbortController();

    // When the caller gives up, Then its wait ends with the signal's reason
    const waiting = sessions.session('b', controller.signal);
    controller.abort(new Error('deadline'));
    await expect(waiting).rejects.toThrow('deadline');

    // When the cache is closed, Then the CreateSession in flight sees its signal fire, and no
    // session is handed out any more
    sessions.close();
    expect(fake.signals[0]!.aborted).toBe(true);
    await expect(sessions.session('b')).rejects.toThrow('closed');
  });

  it('forgets a session S3 refused, so the next request creates one', async () => {
    // Given a cached session
    const clock = { now: 1_000_000 };
    const fake = fakeCreateSession(clock);
    const sessions = new S3ExpressSessions(fake.create, { now: () => clock.now });
    const first = await sessions.session('b');

    // When it is invalidated, Then the next request gets a new one
    sessions.invalidate('b', first);
    expect(await sessions.session('b')).not.toBe(first);
    expect(fake.calls).toHaveLength(2);
  });
});
