import type { Logger } from 'pino';
import type { BreakerService } from './breaker-service.js';

export interface DueTransitionsOptions {
  /** How often due transitions are looked for; a transition is published at most this late. */
  readonly intervalMs?: number;
  /** Circuits changed per round at most; more wait for the next round. */
  readonly batch?: number;
}

const INTERVAL_MS = 500; // 0.5 s: a due open -> half-open reaches every stream within a second
const BATCH = 500;
const WARN_EVERY_MS = 60_000; // 1 min: one warning a minute while the store fails

/**
 * Publishes due open -> half-open transitions on a timer, so the timeline and every local
 * view are true without traffic. Run it in exactly one process: alone, or while holding the
 * lease (`LeaderElection`); a second one would only find nothing left to do.
 */
export class DueTransitions {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private lastWarning = -Infinity;

  constructor(
    private readonly breaker: BreakerService,
    private readonly logger: Logger,
    private readonly options: DueTransitionsOptions = {},
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs ?? INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round; never rejects (a store outage is logged, the next round tries again). */
  async tick(): Promise<void> {
    if (this.running) return; // the previous round (a slow store) is still out
    this.running = true;
    try {
      await this.breaker.publishDue(this.options.batch ?? BATCH);
    } catch (error) {
      const now = this.breaker.now();
      if (now - this.lastWarning >= WARN_EVERY_MS) {
        this.lastWarning = now;
        this.logger.warn(
          { event: 'due_transitions_failed', err: error },
          'could not publish due transitions; retrying',
        );
      }
    } finally {
      this.running = false;
    }
  }
}
