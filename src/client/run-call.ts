/** Running the protected function: its deadline, and what its outcome counts as. */

import { CallTimeoutError } from './errors.js';

/** Run `fn` with a deadline: past it, abort its signal and fail; its late finish is ignored. */
export function withTimeout<T>(name: string, fn: (signal: AbortSignal) => T, timeoutMs: number): Promise<Awaited<T>> {
  const controller = new AbortController();
  return new Promise<Awaited<T>>((resolve, reject) => {
    const timer = setTimeout(() => {
      const error = new CallTimeoutError(name, timeoutMs);
      controller.abort(error);
      reject(error);
    }, timeoutMs);
    (async (): Promise<Awaited<T>> => await fn(controller.signal))().then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

export function classify<T>(
  thrown: { error: unknown } | null,
  result: T | undefined,
  isFailure: ((error: unknown, result: T | undefined) => boolean) | undefined,
): { failed: boolean; classifierError?: unknown } {
  if (thrown !== null && thrown.error instanceof CallTimeoutError) return { failed: true }; // always a failure
  if (isFailure === undefined) return { failed: thrown !== null };
  try {
    return { failed: thrown === null ? isFailure(undefined, result) : isFailure(thrown.error, undefined) };
  } catch (classifierError) {
    return { failed: true, classifierError };
  }
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
