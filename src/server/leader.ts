import type { Logger } from 'pino';
import type { LeaseStore } from '../store/lease-store.js';

export interface LeaderOptions {
  readonly lease: string;
  readonly owner: string;
  /** How often the holder renews, and others try to take over. */
  readonly renewMs: number;
  /** A holder that stops renewing loses the lease after this long. */
  readonly ttlMs: number;
  readonly onAcquire: () => void;
  readonly onLose: () => void;
}

/**
 * Runs a singleton job in exactly one of many processes sharing the database: whoever
 * holds the lease runs it; if that process dies, another takes over after `ttlMs`.
 */
export class LeaderElection {
  private timer: NodeJS.Timeout | undefined;
  private leading = false;
  private heldUntil = 0;
  private asking = false;
  private stopped = false;

  constructor(
    private readonly leases: LeaseStore,
    private readonly clock: () => number,
    private readonly logger: Logger,
    private readonly options: LeaderOptions,
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.tick();
    this.timer = setInterval(() => this.tick(), this.options.renewMs);
    this.timer.unref();
  }

  /**
   * Try to take or renew the lease once; start or stop the job on a change. The store answers
   * at once (SQLite) or later (Redis); either way the answer is taken as a promise here.
   */
  tick(): void {
    if (this.asking) return; // the previous round trip (Redis) is still out
    const now = this.clock();
    let held: Promise<boolean>;
    try {
      held = Promise.resolve(this.leases.tryAcquire(this.options.lease, this.options.owner, now, this.options.ttlMs));
    } catch (error) {
      held = Promise.reject(error);
    }
    this.asking = true;
    held.then(
      (h) => this.settle(now, h, null),
      (error: unknown) => this.settle(now, null, error),
    );
  }

  private settle(now: number, acquired: boolean | null, error: unknown): void {
    this.asking = false;
    if (this.stopped) return;
    let held: boolean;
    if (acquired === null) {
      // An unreachable store is no proof that someone else leads: keep the role until our own
      // lease would have expired, after which another process may have taken over.
      this.logger.warn({ event: 'lease_error', lease: this.options.lease, err: error }, 'lease renewal failed');
      held = this.leading && now < this.heldUntil;
    } else {
      held = acquired;
      if (held) this.heldUntil = now + this.options.ttlMs;
    }
    if (held && !this.leading) {
      this.leading = true;
      this.logger.info(
        { event: 'lease_acquired', lease: this.options.lease, owner: this.options.owner },
        `now running ${this.options.lease}`,
      );
      this.options.onAcquire();
    } else if (!held && this.leading) {
      this.leading = false;
      this.logger.warn(
        { event: 'lease_lost', lease: this.options.lease, owner: this.options.owner },
        `lost ${this.options.lease}`,
      );
      this.options.onLose();
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.leading) {
      this.leading = false;
      this.options.onLose();
      // Released now (SQLite) or by a round trip (Redis); it expires on its own anyway.
      try {
        Promise.resolve(this.leases.release(this.options.lease, this.options.owner)).catch(() => {});
      } catch {
        // the store is closing: the lease expires
      }
    }
  }
}
