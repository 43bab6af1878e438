import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';
import { SYNC_SCRIPT } from './scripts.js';
import { ALL_SHARDS } from './shards.js';

const WATCH_MS = 1_000; // 1 s: an emptied shard is noticed within this, even with no write

/** The highest figures this host has seen: the counters never go below them after a reset. */
export interface Floors {
  /** The newest transition number of a shard this host has seen. */
  readonly seq: (shard: number) => number;
  /** The highest version of a shard this host has seen (on one Redis: of any shard, as the shards share one channel). */
  readonly version: (shard: number) => number;
}

/**
 * Which life of each shard this host works with. A FLUSHALL, or a Redis (or a Cluster
 * primary) restarted without its data, empties shards under running hosts: their caches would
 * keep circuits that no longer exist, and the shard's counters (`version`, `seq`) would start
 * again at 1, below what every cache and event stream holds. Each shard's `epoch` key (written
 * once into an empty shard, `SYNC_SCRIPT`) tells: every write checks it inside its script, and
 * this host looks at every shard's every second, at start and after every resubscription.
 * When one changed, `onReset` listeners rebuild what they hold (the cache, the state-gauge
 * mirror, declared circuits).
 */
export class StoreEpoch {
  private readonly held: (string | null)[] = ALL_SHARDS.map(() => null);
  private syncing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: (() => void)[] = [];

  constructor(
    private readonly redis: RedisCommands,
    private readonly keys: RedisKeys,
    private readonly floors: () => Floors,
    private readonly logger: Logger,
  ) {}

  /** The epoch writes to the shard carry; `''` before the first sync (a write then syncs and retries). */
  of(shard: number): string {
    return this.held[shard] ?? '';
  }

  /** Called after a reset was found, once per sync that found one. Listeners must not throw or reject. */
  onReset(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Adopt every shard's epoch (writing one into an empty shard); one round of syncs at a time. */
  sync(): Promise<void> {
    this.syncing ??= this.run().finally(() => (this.syncing = null));
    return this.syncing;
  }

  /** `sync`, for background callers: a failure (Redis away) is left to the next check. */
  syncQuietly(): void {
    this.sync().catch(() => {});
  }

  /** Look at the epochs every second (cheap GETs) and sync when one is not the one held. */
  watch(): void {
    this.timer = setInterval(() => {
      if (this.syncing !== null) return;
      Promise.all(this.keys.shards.map((k) => this.redis.command<string | null>(['GET', k.epoch]))).then(
        (stored) => {
          if (stored.some((e, shard) => e !== this.held[shard])) this.syncQuietly();
        },
        () => {}, // an outage: the connection's own handling reports it
      );
    }, WATCH_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async run(): Promise<void> {
    const floors = this.floors();
    const reset = await Promise.all(
      this.keys.shards.map(async (k) => {
        const held = this.held[k.shard] ?? null;
        const args = [held ?? '', randomUUID(), String(floors.seq(k.shard)), String(floors.version(k.shard))];
        const epoch = await this.redis.eval<string>(SYNC_SCRIPT, [k.epoch, k.seq, k.version], args);
        this.held[k.shard] = epoch;
        return held !== null && epoch !== held ? k.shard : -1;
      }),
    );
    const shards = reset.filter((s) => s >= 0);
    if (shards.length === 0) return;
    this.logger.warn(
      { event: 'redis_store_reset', shards },
      "the Redis store was emptied (FLUSHALL, or restarted without its data): its circuits start again from nothing; rebuilding this host's copies",
    );
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (error) {
        this.logger.error(
          { event: 'redis_reset_listener_failed', err: (error as Error).message },
          'a store-reset listener failed',
        );
      }
    }
  }
}
