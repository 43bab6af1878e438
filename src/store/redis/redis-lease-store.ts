import type { LeaseStore } from '../lease-store.js';
import type { RedisCircuitStore } from './redis-store.js';
import { LEASE_SCRIPT, RELEASE_SCRIPT } from './scripts.js';

/**
 * Leases on named singleton jobs shared by every host on the Redis (the health checks run
 * in one process across all hosts). Expiry is Redis's own (`SET ... PX`), so it does not
 * depend on the hosts' clocks agreeing.
 */
export class RedisLeaseStore implements LeaseStore {
  constructor(
    private readonly store: RedisCircuitStore,
    private readonly prefix = 'circuitlog:',
  ) {}

  tryAcquire(name: string, owner: string, _now: number, ttlMs: number): Promise<boolean> {
    return this.store.redis
      .eval<number>(LEASE_SCRIPT, [`${this.prefix}lease:${name}`], [owner, String(ttlMs)])
      .then((n) => n === 1);
  }

  release(name: string, owner: string): Promise<void> {
    return this.store.redis.eval<number>(RELEASE_SCRIPT, [`${this.prefix}lease:${name}`], [owner]).then(() => {});
  }
}
