// A promise with its resolve and reject at hand: the WAL writer settles an object's tickets, and
// waits for its uploads, from outside the code that made the promise.

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

/** Promise.withResolvers needs Node 22; the project supports 20. */
export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
