import type { Logger } from 'pino';
import type { Circuit } from '../../domain/circuit.js';
import type { CallerEntry } from '../../domain/caller-state.js';
import { applyCallerDelta, withCallers } from './caller-hash.js';
import type { CircuitCache, Versioned } from './redis-cache.js';
import { RESET_VERSION_MARGIN } from './scripts.js';
import { ShardWatch, type ShardChannels } from './shard-watch.js';
import { isWhole, parseCircuit, type Malformed } from './stored-circuit.js';

/** The connection the subscription of one channel lives on: a Redis client (one Redis, or the primary Sentinel names). */
export interface Subscriber {
  readonly isReady: boolean;
  on(event: 'ready' | 'end' | 'reconnecting' | 'error', listener: () => void): unknown;
  SUBSCRIBE(channel: string, listener: (message: string) => void): Promise<unknown>;
  UNSUBSCRIBE(channel: string): Promise<unknown>;
}

/** On a Cluster: one channel per shard, and the shard's `version` counter for the gap check (`shard-watch.ts`). */
export interface ShardedChanges {
  readonly channels: ShardChannels;
  readonly names: readonly string[];
  readonly counter: (shard: number) => Promise<number>;
}

/**
 * The `changes` messages every write publishes: they keep this host's cache current and tell
 * listeners (the mirror of all circuits) of every committed change of any host. On one Redis
 * (and Sentinel) one channel carries every shard's, on one connection: any sign of a lost
 * connection distrusts the whole cache, and a confirmed (re)subscription trusts it again,
 * starting empty. On a Cluster each shard has its own channel and subscription
 * (`shard-watch.ts`), and its part of the cache is trusted or not on its own.
 */
export class ChangeSubscription {
  private subscribed: Promise<void> | null = null;
  private readonly changeListeners: ChangeListener[] = [];
  private readonly resubscribeListeners: (() => void)[] = [];
  private readonly jumpListeners: (() => void)[] = [];
  private shards: ShardWatch | null = null;

  constructor(
    subscriber: Subscriber | ShardedChanges,
    private readonly channel: string,
    private readonly cache: CircuitCache,
    private readonly logger: Logger,
    private readonly malformed: Malformed,
  ) {
    if ('channels' in subscriber) {
      const { channels, names, counter } = subscriber;
      const deliver = (message: string, channel: string) => this.onMessage(message, channel);
      this.shards = new ShardWatch(channels, names, cache, counter, deliver, () => this.notifyResubscribed(), logger);
      this.subscribed = this.shards.ready;
      return;
    }
    subscriber.on('ready', () => {
      this.subscribed = this.subscribe(subscriber);
    });
    subscriber.on('end', () => this.cache.distrust());
    subscriber.on('reconnecting', () => this.cache.distrust());
    subscriber.on('error', () => this.cache.distrust());
    if (subscriber.isReady) this.subscribed = this.subscribe(subscriber);
  }

  /** The highest version of a shard this host has seen: per shard on a Cluster, of any on one channel. */
  versionSeen(shard: number): number {
    return this.shards?.seenOn(shard) ?? this.cache.highestVersion;
  }

  stop(): void {
    this.shards?.stop();
  }

  /** Resolves once the first subscription is live (the cache works from then on). */
  ready(): Promise<void> {
    return this.subscribed ?? Promise.resolve();
  }

  /** Every committed change of any host (a mirror of all circuits keeps itself current with it). */
  onChange(listener: ChangeListener): void {
    this.changeListeners.push(listener);
  }

  /** A message with a version far above any seen (the store was emptied, and another host noticed first). */
  onVersionJump(listener: () => void): void {
    this.jumpListeners.push(listener);
  }

  /** After the subscription came back: messages may have been missed meanwhile. */
  onResubscribed(listener: () => void): void {
    this.resubscribeListeners.push(listener);
  }

  /** (Re)subscribe; the cache is trusted from the moment the subscription is confirmed. */
  private async subscribe(subscriber: Subscriber): Promise<void> {
    try {
      // After a reconnect: one listener, not one more per reconnect (the client resubscribes on its own too).
      if (this.subscribed !== null) await subscriber.UNSUBSCRIBE(this.channel);
      const again = this.subscribed !== null;
      await subscriber.SUBSCRIBE(this.channel, (message: string) => this.onMessage(message));
      this.cache.trust();
      if (again) this.notifyResubscribed();
    } catch (error) {
      this.logger.warn(
        { event: 'redis_subscribe_failed', err: (error as Error).message },
        'subscribing to changes failed',
      );
    }
  }

  private notifyResubscribed(): void {
    for (const listener of this.resubscribeListeners) {
      try {
        listener();
      } catch (error) {
        this.logger.error(
          { event: 'redis_resubscribe_listener_failed', err: (error as Error).message },
          'a resubscription listener failed',
        );
      }
    }
  }

  /**
   * `<version>\n<id>\n<name>\n<json>\n<version read>\n<caller delta>` (`scripts.ts`), json empty
   * when the circuit was deleted; a writer before the caller table's own hash sent no last two
   * (its json holds the table). Anything else on the channel (a stray PUBLISH) is skipped and
   * logged once: it came from no write, so the cache stays trusted. Nothing here may throw into
   * the client's message dispatch.
   */
  private onMessage(message: string, channel = this.channel): void {
    const [v, id, name, rest] = messageFields(message);
    if (!isWhole(v) || id === undefined || name === undefined || name === '') {
      this.malformed.report(
        channel,
        `a message is not <version>\\n<id>\\n<name>\\n<json>: ${JSON.stringify(message.slice(0, 100))}`,
      );
      return;
    }
    let circuit: Circuit | null = null;
    let callersKnown = true;
    const held = this.cache.get(name);
    if (held !== undefined && held.version === Number(v)) {
      circuit = held.circuit; // this host's own write (or a read of it): that version is held, parsed already
    } else if (rest !== '') {
      const { json, readVersion, delta } = deltaFields(rest);
      const parsed = parseCircuit(name, id, json);
      if ('problem' in parsed) {
        this.malformed.report(channel, `a message for '${name.slice(0, 100)}' is malformed: ${parsed.problem}`);
        return;
      }
      circuit = parsed.circuit;
      if (delta !== undefined) {
        const table = callersAfter(parsed.circuit, held, readVersion!, delta);
        if (table === 'malformed')
          this.malformed.report(channel, `a message for '${name.slice(0, 100)}' has a malformed caller delta`);
        if (typeof table === 'string') callersKnown = false;
        else circuit = withCallers(circuit, table);
      }
    }
    // A version far above any seen: another host found the store emptied and raised the counter.
    const highest = this.cache.highestVersion;
    if (highest > 0 && Number(v) > highest + RESET_VERSION_MARGIN / 2)
      for (const listener of this.jumpListeners) listener();
    // A caller table this host cannot follow (it does not hold the state the delta was made from):
    // the cached circuit is dropped, so the next read goes to Redis (unless it holds a newer one already).
    if (callersKnown) this.cache.onMessage(name, { version: Number(v), circuit });
    else if (held === undefined || held.version < Number(v)) this.cache.forget(name, Number(v));
    for (const listener of this.changeListeners) {
      try {
        listener(name, circuit, callersKnown);
      } catch (error) {
        this.logger.error(
          { event: 'redis_change_listener_failed', err: (error as Error).message },
          'a change listener failed',
        );
      }
    }
  }
}

/**
 * A committed change: the circuit (null: deleted) and whether its caller table is whole; when not
 * (a delta this host could not apply) the circuit carries no table and a listener that needs it reads it.
 */
export type ChangeListener = (name: string, circuit: Circuit | null, callersKnown: boolean) => void;

/** The circuit's table after a delta, or why it is not known: the state it was made from is not held, or it is malformed. */
function callersAfter(
  circuit: Circuit,
  held: Versioned | undefined,
  readVersion: string,
  delta: string,
): readonly CallerEntry[] | undefined | 'unknown' | 'malformed' {
  let from: readonly CallerEntry[] | undefined;
  if (delta.startsWith('[1,')) from = [];
  else if (held !== undefined && String(held.version) === readVersion) from = held.circuit?.callers ?? [];
  else if (delta === '' && circuit.quorum == null)
    return undefined; // no quorum: no caller table
  else return 'unknown';
  return applyCallerDelta(from, delta) ?? 'malformed';
}

/** The json of a message's rest, and the version read and caller delta after it (absent from a writer before them). */
export function deltaFields(rest: string): { json: string; readVersion?: string; delta?: string } {
  const a = rest.indexOf('\n');
  if (a === -1) return { json: rest };
  const b = rest.indexOf('\n', a + 1);
  if (b === -1) return { json: rest };
  return { json: rest.slice(0, a), readVersion: rest.slice(a + 1, b), delta: rest.slice(b + 1) };
}

/**
 * `<version>\n<id>\n<name>\n<json>` cut at its first three newlines (as `split('\n')` would,
 * the json being the rest joined back), without scanning the circuit's JSON for more of them.
 */
export function messageFields(message: string): [string, string | undefined, string | undefined, string] {
  const a = message.indexOf('\n');
  if (a === -1) return [message, undefined, undefined, ''];
  const b = message.indexOf('\n', a + 1);
  if (b === -1) return [message.slice(0, a), message.slice(a + 1), undefined, ''];
  const c = message.indexOf('\n', b + 1);
  const name = c === -1 ? message.slice(b + 1) : message.slice(b + 1, c);
  return [message.slice(0, a), message.slice(a + 1, b), name, c === -1 ? '' : message.slice(c + 1)];
}
