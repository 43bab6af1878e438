import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';
import { SYNC_SCRIPT } from './scripts.js';

const WATCH_MS = 1_000; // 1 s: an emptied store is noticed within this, even with no write

/** The highest figures this host has seen: the counters never go below them after a reset. */
export interface Floors {
  readonly seq: number;
  readonly version: number;
}

/**
 * Which life of the store this host works with. A FLUSHALL, or a Redis restarted without its
 * data, empties the store under running hosts: their caches would keep circuits that no longer
 * exist, and the counters (`version`, `seq`) would start again at 1, below what every cache
 * and event stream holds. The `epoch` key (written once into an empty store, `SYNC_SCRIPT`)
 * tells: every write checks it inside its script, and this host looks at it every second, at
 * start and after every resubscription. When it changed, `onReset` listeners rebuild what
 * they hold (the cache, the state-gauge mirror, declared circuits).
 */
export class StoreEpoch {
  private held: string | null = null;
  private syncing: Promise<string> | null = null;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: (() => void)[] = [];

  constructor(
    private readonly redis: RedisCommands,
    private readonly keys: RedisKeys,
    private readonly floors: () => Floors,
    private readonly logger: Logger,
  ) {}

  /** The epoch writes carry; `''` before the first sync (a write then syncs and retries). */
  get current(): string {
    return this.held ?? '';
  }

  /** Called after a reset was found, once per reset. Listeners must not throw or reject. */
  onReset(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Adopt the store's epoch (writing one into an empty store); one round trip at a time. */
  sync(): Promise<string> {
    this.syncing ??= this.run().finally(() => (this.syncing = null));
    return this.syncing;
  }

  /** `sync`, for background callers: a failure (Redis away) is left to the next check. */
  syncQuietly(): void {
    this.sync().catch(() => {});
  }

  /** Look at the epoch every second (a cheap GET) and sync when it is not the one held. */
  watch(): void {
    this.timer = setInterval(() => {
      if (this.syncing !== null) return;
      this.redis.command<string | null>(['GET', this.keys.epoch]).then(
        (stored) => {
          if (stored !== this.held) this.syncQuietly();
        },
        () => {}, // an outage: the connection's own handling reports it
      );
    }, WATCH_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async run(): Promise<string> {
    const { seq, version } = this.floors();
    const held = this.held;
    const epoch = await this.redis.eval<string>(SYNC_SCRIPT, [this.keys.epoch, this.keys.seq, this.keys.version], [held ?? '', randomUUID(), String(seq), String(version)]);
    this.held = epoch;
    if (held !== null && epoch !== held) {
      this.logger.warn(
        { event: 'redis_store_reset', epoch, previous: held },
        'the Redis store was emptied (FLUSHALL, or restarted without its data): every circuit starts again from nothing; rebuilding this host\'s copies',
      );
      for (const listener of this.listeners) {
        try {
          listener();
        } catch (error) {
          this.logger.error({ event: 'redis_reset_listener_failed', err: (error as Error).message }, 'a store-reset listener failed');
        }
      }
    }
    return epoch;
  }
}
