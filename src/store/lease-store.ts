import type { MaybePromise } from './maybe-promise.js';

/** Leases on named singleton jobs (the health checks), shared by every process of the store. */
export interface LeaseStore {
  /** True when `owner` holds `name` until `now + ttlMs` after this call. */
  tryAcquire(name: string, owner: string, now: number, ttlMs: number): MaybePromise<boolean>;
  /** Give the lease up early (on shutdown) so another process need not wait for expiry. */
  release(name: string, owner: string): MaybePromise<void>;
}
