/**
 * A value now, or later. The SQLite store answers synchronously and the Redis store answers
 * from its cache synchronously when it can; only work that needs a round trip is a Promise.
 * Callers chain with `chain` below (never an export named `then`: a module namespace with one is a thenable), so a synchronous answer never waits for a microtask: the
 * hot path (`GET /allowed` on a closed circuit, the proxy's breaker check) stays synchronous.
 */
export type MaybePromise<T> = T | Promise<T>;

export function isPromise<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/** `f(value)` at once when the value is here, else once it arrives. */
export function chain<T, U>(value: MaybePromise<T>, f: (value: T) => MaybePromise<U>): MaybePromise<U> {
  return isPromise(value) ? value.then(f) : f(value);
}
