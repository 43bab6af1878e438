import type { Logger } from 'pino';
import type { CircuitCache } from './redis-cache.js';
import { ALL_SHARDS, SHARDS } from './shards.js';

/** What a subscription of one channel per shard tells of each (`cluster-subscriber.ts`). */
export interface ShardHandlers {
  message(shard: number, message: string): void;
  /** The shard's subscription is gone or moving: its messages may be missed from now on. */
  lost(shard: number): void;
  /** The shard's subscription was answered (SSUBSCRIBE): its messages arrive from now on. */
  confirmed(shard: number): void;
}

/** A subscription of one channel per shard: a Cluster's SSUBSCRIBE on the primary of each shard's slot. */
export interface ShardChannels {
  readonly sharded: true;
  /** Subscribe shard k's channel `channels[k]`, and keep it subscribed, following its slot. */
  start(channels: readonly string[], handlers: ShardHandlers): void;
  /** Drop the shard's subscription and make it again (at its slot's primary as the layout is read now). */
  resubscribe(shard: number): void;
}

export const isSharded = (subscriber: object): subscriber is ShardChannels =>
  (subscriber as Partial<ShardChannels>).sharded === true;

/** How often each shard's `version` counter is compared with the messages delivered. */
export const CHECK_MS = 1_000;

/**
 * Per shard trust on a Cluster, where each shard's messages come on a subscription of their
 * own (its primary's) and one can be lost while the others go on. A shard's part of the cache
 * is distrusted (emptied, reads go to Redis) from the moment its subscription is lost until it
 * is confirmed again. As a backstop for a loss nobody announced, versions are checked: each
 * INCR of a shard's `version` publishes exactly one message (scripts.ts), so once the counter
 * is read after a confirmation (the baseline), every later message must carry the next number.
 * A message that skips ahead, or a counter that stays above the last message delivered for
 * longer than CHECK_MS (read every CHECK_MS), is a gap: the shard is resubscribed (distrusted
 * until confirmed), and `resubscribed` tells whoever keeps copies to read them again.
 */
export class ShardWatch {
  /** Per shard: the newest version known delivered without a gap; null until the baseline is read. */
  private readonly last: (number | null)[] = ALL_SHARDS.map(() => null);
  /** Per shard: the newest version seen on its channel (the floor after a reset: store-epoch.ts). */
  private readonly seen: number[] = ALL_SHARDS.map(() => 0);
  /** Per shard: confirmed and not lost since (messages arrive). */
  private readonly live: boolean[] = ALL_SHARDS.map(() => false);
  private readonly confirmedBefore: boolean[] = ALL_SHARDS.map(() => false);
  /** Per shard: the counter read at the last check when it was above `last` (a gap unless delivered by the next). */
  private readonly suspect: (number | null)[] = ALL_SHARDS.map(() => null);
  /** Per shard: bumped on every loss and confirmation, so a late answer of before is ignored. */
  private readonly turn: number[] = ALL_SHARDS.map(() => 0);
  private pending = SHARDS;
  private resolveReady!: () => void;
  /** Resolves once every shard's subscription was confirmed once. */
  readonly ready = new Promise<void>((resolve) => (this.resolveReady = resolve));
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly channels: ShardChannels,
    private readonly names: readonly string[],
    private readonly cache: CircuitCache,
    /** The shard's `version` counter as Redis holds it now. */
    private readonly counter: (shard: number) => Promise<number>,
    /** A message of a shard's channel, for the cache and the change listeners. */
    private readonly deliver: (message: string, channel: string) => void,
    /** A shard's subscription is back after a loss or a gap: copies must be read again. */
    private readonly resubscribed: () => void,
    private readonly logger: Logger,
  ) {
    channels.start(names, {
      message: (shard, message) => this.message(shard, message),
      lost: (shard) => this.lost(shard),
      confirmed: (shard) => this.confirmed(shard),
    });
    this.timer = setInterval(() => this.check(), CHECK_MS);
    this.timer.unref();
  }

  /** The newest version this host saw on the shard's channel. */
  seenOn(shard: number): number {
    return this.seen[shard]!;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private message(shard: number, message: string): void {
    const newline = message.indexOf('\n');
    const version = newline > 0 ? Number(message.slice(0, newline)) : Number.NaN;
    if (Number.isSafeInteger(version)) this.sequence(shard, version);
    this.deliver(message, this.names[shard]!);
  }

  private sequence(shard: number, version: number): void {
    if (version > this.seen[shard]!) this.seen[shard] = version;
    const last = this.last[shard] ?? null;
    if (last === null || version <= last) return;
    if (version === last + 1) this.last[shard] = version;
    else this.gap(shard, last, version);
  }

  private gap(shard: number, last: number, next: number): void {
    this.logger.warn(
      { event: 'redis_changes_gap', shard, channel: this.names[shard], after: last, next },
      "a shard's changes skipped versions (messages were lost): its cache is emptied and its subscription made again",
    );
    this.lost(shard);
    this.channels.resubscribe(shard);
  }

  private lost(shard: number): void {
    this.turn[shard]!++;
    this.live[shard] = false;
    this.last[shard] = null;
    this.suspect[shard] = null;
    this.cache.distrust([shard]);
  }

  private confirmed(shard: number): void {
    this.turn[shard]!++;
    this.live[shard] = true;
    this.last[shard] = null;
    this.suspect[shard] = null;
    this.cache.trust([shard]);
    this.baseline(shard);
    if (this.confirmedBefore[shard]) {
      this.resubscribed();
      return;
    }
    this.confirmedBefore[shard] = true;
    if (--this.pending === 0) this.resolveReady();
  }

  /** Read the counter: every version up to it was before the subscription or is delivered on it. */
  private baseline(shard: number): void {
    const turn = this.turn[shard];
    const seenBefore = this.seen[shard]!;
    this.counter(shard).then(
      (version) => {
        // Messages that came meanwhile are at most the counter, or after it and in order.
        const since = this.seen[shard]! > seenBefore ? this.seen[shard]! : 0;
        if (this.turn[shard] === turn) this.last[shard] = Math.max(version, since);
      },
      () => {}, // Redis away: the next check reads it again
    );
  }

  /** Every CHECK_MS: a counter above the last delivered message at two checks in a row is a loss. */
  private check(): void {
    for (const shard of ALL_SHARDS) {
      if (!this.live[shard]) continue;
      if (this.last[shard] === null) {
        this.baseline(shard);
        continue;
      }
      const turn = this.turn[shard];
      this.counter(shard).then(
        (version) => {
          const last = this.last[shard] ?? null;
          if (this.turn[shard] !== turn || last === null) return;
          const suspect = this.suspect[shard] ?? null;
          if (suspect !== null && last < suspect) this.gap(shard, last, suspect);
          else this.suspect[shard] = version > last ? version : null;
        },
        () => {},
      );
    }
  }
}
