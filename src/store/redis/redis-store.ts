import type { Circuit, Step, Transition } from '../../domain/circuit.js';
import type { HistoryHook, StoredEntry } from '../../domain/history.js';
import type { BatchItem, CircuitStore, HistoryQuery, ListQuery } from '../circuit-store.js';
import type { MaybePromise } from '../maybe-promise.js';
import { ChangeSubscription, type ChangeListener, type Subscriber } from './change-subscription.js';
import { publishTargets, type PublishTarget } from './publish-target.js';
import { CompareAndSet } from './compare-and-set.js';
import { countCircuits, dueOpenNames, queuedRound, shardRound, type Queued } from './store-rounds.js';
import { CircuitCache, type Versioned } from './redis-cache.js';
import { RedisCommands, type CommandLink } from './redis-commands.js';
import { RedisKeys } from './redis-keys.js';
import { circuitEvents, listCircuits } from './redis-listing.js';
import { DELETE_SCRIPT, READ_SCRIPT } from './scripts.js';
import { versionedWithCallers } from './caller-hash.js';
import { StoreEpoch } from './store-epoch.js';
import { Malformed } from './stored-circuit.js';
import { ReplicaAck } from './replica-ack.js';
import type { RedisStoreOptions } from './redis-store-options.js';
import { byShard } from './shards.js';
import type { ShardChannels } from './shard-watch.js';
import { historySettings, readHistory, stepEntries, type HistorySettings } from './history-stream.js';

export { MAX_ATTEMPTS } from './compare-and-set.js';

export type { RedisStoreOptions } from './redis-store-options.js';

const DEFAULT_TIMEOUT_MS = 1_000; // 1 s

/**
 * The Redis implementation of `CircuitStore`, for many hosts sharing one truth. Each write
 * is a versioned read (from this host's cache when it is current) plus a Lua compare-and-set,
 * retried on conflict (`compare-and-set.ts`); reads of a circuit this host already holds
 * answer from the cache without a round trip, kept current by the `changes` channel
 * (`change-subscription.ts`). Listing and per-circuit events are in `redis-listing.ts`.
 */
export class RedisCircuitStore implements CircuitStore {
  /** Key names and the `changes` channel; housekeeping (redis-housekeeping.ts) uses them too. */
  readonly keys: RedisKeys;
  readonly channel: string;
  /** The command and channel a shard's writes publish with (`publish-target.ts`). */
  readonly publish: PublishTarget;
  readonly cache = new CircuitCache();
  private readonly reads = new Map<string, Promise<Versioned>>();
  /** Per circuit: steps waiting while a write to it is on its way (`apply`). */
  private readonly queues = new Map<string, Queued[]>();
  private readonly changes: ChangeSubscription;
  private readonly cas: CompareAndSet;
  /** Commands with the timeout and the 503 mapping; the lease store uses them too. */
  readonly redis: RedisCommands;
  /** Which life of the store this host writes to (a FLUSHALL starts a new one). */
  readonly epoch: StoreEpoch;
  readonly malformed: Malformed;
  /** Config `history` (issue 31), defaults filled in: the compare-and-set writes the entries. */
  readonly historySettings: HistorySettings;
  private readonly replicated: ReplicaAck;
  /** The newest transition number of a shard this host has seen (the feed sets it): a floor after a reset. */
  seqSeen: (shard: number) => number = () => 0;

  constructor(client: CommandLink, subscriber: Subscriber | ShardChannels, options: RedisStoreOptions) {
    this.keys = new RedisKeys(options.prefix ?? 'circuitlog:');
    this.channel = `${this.keys.prefix}changes:${options.db ?? 0}`;
    this.redis = new RedisCommands(client, options.timeoutMs ?? DEFAULT_TIMEOUT_MS, options.logger);
    this.malformed = new Malformed(options.logger);
    this.historySettings = historySettings(options.history);
    const { publish, listen } = publishTargets(this.keys, this.channel, this.redis, subscriber);
    this.publish = publish;
    this.epoch = new StoreEpoch(
      this.redis,
      this.keys,
      () => ({ seq: (shard) => this.seqSeen(shard), version: (shard) => this.changes.versionSeen(shard) }),
      options.logger,
    );
    this.epoch.onReset(() => this.cache.reset());
    this.changes = new ChangeSubscription(listen, this.channel, this.cache, options.logger, this.malformed);
    // Back from an outage: the Redis may be another (restarted empty, failed over): sync again.
    this.changes.onResubscribed(() => this.epoch.syncQuietly());
    this.changes.onVersionJump(() => this.epoch.syncQuietly());
    this.replicated = new ReplicaAck(this.redis, options.replicasAck ?? 0, options.replicasAckTimeoutMs ?? 1_000);
    this.cas = new CompareAndSet(this, (name) => this.read(name), this.replicated);
  }

  /** Resolves once the first subscription is live (the cache works from then on). */
  ready(): Promise<void> {
    return this.changes.ready();
  }

  /** Stop the subscription's check (the connections are the opener's). */
  stop(): void {
    this.changes.stop();
  }

  /** Every committed change of any host (a mirror of all circuits keeps itself current with it). */
  onChange(listener: ChangeListener): void {
    this.changes.onChange(listener);
  }

  /**
   * After the subscription came back (messages may have been missed meanwhile): whoever keeps
   * a copy of the circuits reads them again. The listener must not throw or reject.
   */
  onRebuild(listener: () => void): void {
    this.changes.onResubscribed(listener);
    this.epoch.onReset(listener);
  }

  find(name: string): MaybePromise<Circuit | null> {
    const held = this.cache.get(name);
    if (held !== undefined) return held.circuit;
    return this.read(name).then((v) => v.circuit);
  }

  /** From the cache while no write to the circuit is queued (as `apply` answers at once), else undefined. */
  peek(name: string): Circuit | null | undefined {
    if (this.queues.has(name)) return undefined;
    return this.cache.get(name)?.circuit;
  }

  /** The stored circuit with its version; one read at a time per name. */
  private read(name: string): Promise<Versioned> {
    const running = this.reads.get(name);
    if (running) return running;
    const read = this.readNow(name).finally(() => this.reads.delete(name));
    this.reads.set(name, read);
    return read;
  }

  /**
   * The circuit as Redis holds it now, never joined to a read already under way (the state-gauge
   * mirror asks after a change whose caller table it could not follow: `circuit-mirror.ts`).
   */
  fetch(name: string): Promise<Circuit | null> {
    return this.readNow(name).then((v) => v.circuit);
  }

  /**
   * One read of the circuit, offered to the cache: `HMGET` as always, and for a circuit with a
   * quorum (only it has a caller table) READ_SCRIPT, which reads it again with its table atomically.
   */
  private readNow(name: string): Promise<Versioned> {
    const epoch = this.cache.currentEpoch;
    this.cache.startRead(name);
    const keys = { circuit: this.keys.circuit(name), callers: this.keys.callers(name) };
    return this.redis
      .command<(string | null)[]>(['HMGET', keys.circuit, 'v', 'id', 'c'], 'read')
      .then(async (fields) => {
        let table: unknown[] = [];
        if (fields[2]?.includes('"quorum":{')) {
          const [v, id, json, callers] = await this.redis.eval<
            [string | null, string | null, string | null, unknown[]]
          >(READ_SCRIPT, [keys.circuit, keys.callers], [], 'read');
          fields = [v, id, json];
          table = callers;
        }
        const value = versionedWithCallers(this.malformed, keys, name, fields, table);
        return value.corruptVersion === undefined ? this.cache.offer(name, value, epoch) : value; // a corrupt hash is never cached
      })
      .finally(() => this.cache.endRead(name));
  }

  /**
   * Steps that change nothing on the cached circuit and leave nothing in its history answer at
   * once, synchronously. Writes to one circuit from this process go one at a time: steps
   * arriving meanwhile wait and are then written together in one compare-and-set, each seeing
   * the one before. A step that changes nothing but has a history entry (an outcome) is written
   * too: its entry is appended only if the circuit is still as the step saw it (`scripts.ts`).
   */
  apply<S extends Step>(
    name: string,
    step: (current: Circuit | null) => S | null,
    history?: HistoryHook,
  ): MaybePromise<S | null> {
    const held = this.cache.get(name);
    if (held !== undefined && !this.queues.has(name)) {
      const result = step(held.circuit);
      if (result === null) return result;
      const unchanged = result.circuit === held.circuit;
      if (unchanged && stepEntries(this.historySettings, history, held.circuit, result).length === 0) return result;
    }
    return new Promise<S | null>((resolve, reject) => {
      const queued = { step, history, resolve: resolve as (r: Step | null) => void, reject };
      const queue = this.queues.get(name);
      if (queue) {
        queue.push(queued);
        return;
      }
      this.queues.set(name, [queued]);
      this.drain(name).catch((error: unknown) => {
        // drain() settles every caller itself; this is only a last guard against a bug there.
        for (const q of this.queues.get(name)?.splice(0) ?? []) q.reject(error);
        this.queues.delete(name);
      });
    });
  }

  /** Write the queued steps of one circuit, round after round, until none is left. */
  private async drain(name: string): Promise<void> {
    for (;;) {
      const queue = this.queues.get(name)!;
      if (queue.length === 0) {
        this.queues.delete(name);
        return;
      }
      const batch = queue.splice(0, queue.length);
      try {
        const results = await this.cas.run([name], (states) => queuedRound(name, batch, states, this.historySettings));
        batch.forEach((q, i) => {
          const outcome = results[i]!;
          if ('error' in outcome) q.reject(outcome.error);
          else q.resolve(outcome.result);
        });
      } catch (error) {
        for (const q of batch) q.reject(error);
      }
    }
  }

  /** One compare-and-set per shard the batch touches (in parallel); each shard's part is atomic. */
  applyBatch(items: readonly BatchItem[]): MaybePromise<(Step | null)[]> {
    if (items.length === 0) return [];
    const indexed = items.map((item, i) => ({ item, i }));
    const out: (Step | null)[] = new Array(items.length).fill(null);
    const parts = [...byShard(indexed, (x) => x.item.name).values()].map((part) =>
      this.applyShard(part.map((x) => x.item)).then((results) => {
        part.forEach((x, j) => {
          out[x.i] = results[j]!;
        });
      }),
    );
    return Promise.all(parts).then(() => out);
  }

  private applyShard(items: readonly BatchItem[]): Promise<(Step | null)[]> {
    const names = [...new Set(items.map((i) => i.name))];
    return this.cas
      .run(names, (states) => shardRound(items, states, this.historySettings))
      .then((answers) => answers.map((a) => (a as { result: Step | null }).result));
  }

  async delete(name: string): Promise<boolean> {
    const shard = this.keys.of(name);
    const keys = [
      shard.circuit(name),
      shard.events(name),
      shard.index,
      shard.version,
      shard.epoch,
      shard.due,
      shard.callers(name),
      shard.history(name),
    ];
    const args = () => [...this.publish(shard.shard), name, this.epoch.of(shard.shard)];
    let version = await this.redis.eval<number>(DELETE_SCRIPT, keys, args());
    if (version === -1) {
      await this.epoch.sync(); // not synced yet, or the shard was emptied since
      version = await this.redis.eval<number>(DELETE_SCRIPT, keys, args());
    }
    if (version <= 0) return false;
    this.cache.offer(name, { version, circuit: null }); // this host reads its own delete at once
    await this.replicated.confirm(shard.epoch);
    return true;
  }

  /**
   * The circuit's history (issue 31) from its stream, oldest first (`history-stream.ts`); null
   * when the circuit is unknown. Its `from`/`to` go by the stream's ids, whose milliseconds are
   * the entries' `t` except for an entry written behind the newest (see APPEND_HISTORY).
   */
  async history(name: string, query: HistoryQuery): Promise<StoredEntry[] | null> {
    if ((await this.find(name)) === null) return null;
    return readHistory(this.redis, this.keys.history(name), query);
  }

  list(query: ListQuery): Promise<Circuit[]> {
    return listCircuits(this.redis, this.keys, query, this.malformed);
  }

  events(circuitId: number, limit: number): Promise<Transition[]> {
    return circuitEvents(this.redis, this.keys, circuitId, limit, this.malformed);
  }

  /** How many circuits exist: the sum of the shards' index sizes, O(shards) (`limits.max_circuits`). */
  count(): Promise<number> {
    return countCircuits(this.redis, this.keys);
  }

  /**
   * Open circuits whose `open_until` has passed, oldest first: one read of the `due` set that
   * every write keeps (see CAS_SCRIPT), never a scan of the circuits. A circuit opened before
   * the set existed is not in it and half-opens on its next call, as it always did.
   */
  dueOpen(now: number, limit: number): Promise<string[]> {
    return dueOpenNames(this.redis, this.keys, now, limit);
  }

  ping(): Promise<boolean> {
    return this.redis.command<string>(['PING'], 'read').then(
      (pong) => pong === 'PONG',
      () => false,
    );
  }
}
