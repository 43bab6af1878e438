/** Running the protected function: its deadline, and what its outcome counts as. */

import { setMaxListeners } from 'node:events';
import { CallTimeoutError } from './errors.js';

/** fn's signal when neither `timeoutMs` nor the caller's `signal` can abort the call. */
export const NEVER_ABORTED = new AbortController().signal;
// fetch (undici) adds an abort listener to the signal it is given and drops it only when its
// request is garbage collected: on this one shared signal Node's limit of listeners would be
// passed by a busy client and warn on every further fetch. It never aborts, so its listeners
// never run; they go with their requests.
setMaxListeners(0, NEVER_ABORTED);

/**
 * Run `fn` under the client's `timeoutMs` and the caller's own `signal`: past the deadline its
 * signal is aborted and the call fails with `CallTimeoutError`; when the caller's signal aborts,
 * `fn`'s aborts with the same reason and the call throws it at once. A late finish is ignored.
 */
export function runFn<T>(
  name: string,
  fn: (signal: AbortSignal) => T,
  timeoutMs: number | undefined,
  signal: AbortSignal | undefined,
): Promise<Awaited<T>> {
  if (timeoutMs === undefined && signal === undefined)
    return (async (): Promise<Awaited<T>> => await fn(NEVER_ABORTED))();
  const controller = new AbortController();
  return new Promise<Awaited<T>>((resolve, reject) => {
    const fail = (error: unknown) => {
      controller.abort(error);
      reject(error);
    };
    const timer =
      timeoutMs === undefined ? undefined : setTimeout(() => fail(new CallTimeoutError(name, timeoutMs)), timeoutMs);
    const onAbort = () => fail(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const settle = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    (async (): Promise<Awaited<T>> => await fn(controller.signal))().then(
      (value) => {
        settle();
        resolve(value);
      },
      (error: unknown) => {
        settle();
        reject(error);
      },
    );
  });
}

/** Calls (and records) under way; `close()` waits for them to end before it drains the queue. */
export class InFlight {
  private count = 0;
  private waiters: (() => void)[] = [];

  enter(): void {
    this.count++;
  }

  leave(): void {
    if (--this.count === 0) for (const resolve of this.waiters.splice(0)) resolve();
  }

  get busy(): boolean {
    return this.count > 0;
  }

  /** Resolves once none is under way (call while `busy`). */
  idle(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

let lastIso = { ms: Number.NaN, iso: '' };

/** Epoch `ms` as RFC 3339; many calls end in the same millisecond, so the last answer is kept. */
export function isoTime(ms: number): string {
  if (ms !== lastIso.ms) lastIso = { ms, iso: new Date(ms).toISOString() };
  return lastIso.iso;
}
