import type { Logger } from 'pino';
import type { Circuit, CircuitState, Step, Transition } from '../../domain/circuit.js';
import { AppError } from '../../domain/errors.js';
import type { BatchItem, CircuitStore, ListQuery } from '../circuit-store.js';
import type { MaybePromise } from '../maybe-promise.js';
import { CircuitCache, type Versioned } from './redis-cache.js';
import type { RedisConnection } from './connect.js';
import { RedisCommands } from './redis-commands.js';
import { CAS_SCRIPT, DELETE_SCRIPT } from './scripts.js';

export interface RedisStoreOptions {
  /** Key prefix; several services (or tests) can share one database with different ones. */
  readonly prefix?: string;
  /** The database number of the URL: Redis pub/sub channels are shared by all databases. */
  readonly db?: number;
  /** A command with no answer within this long fails with 503 STORAGE_UNAVAILABLE. */
  readonly timeoutMs?: number;
  readonly logger: Logger;
}

/**
 * Most attempts of one compare-and-set. An attempt fails only when another writer committed
 * to one of its circuits since it read, so with at most 64 concurrent writers a write fails
 * at most 63 times; within one process writes to a circuit are queued (see `apply`), so
 * concurrent writers are per host, not per request.
 */
export const MAX_ATTEMPTS = 100;
const DEFAULT_TIMEOUT_MS = 1_000; // 1 s
const LIST_SCAN_PAGE = 200; // circuits read per round trip when a list filters by state

interface Write {
  readonly name: string;
  readonly steps: Step[];
}

/** What one step came to: its result, or the error it threw. */
type Answer = { readonly result: Step | null } | { readonly error: unknown };

interface Queued {
  readonly step: (current: Circuit | null) => Step | null;
  readonly resolve: (result: Step | null) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The Redis implementation of `CircuitStore`, for many hosts sharing one truth. Each write
 * is a versioned read (from this host's cache when it is current) plus a Lua compare-and-set,
 * retried on conflict; reads of a circuit this host already holds answer from the cache
 * without a round trip, kept current by the `changes` channel (`subscriber`).
 */
export class RedisCircuitStore implements CircuitStore {
  private readonly prefix: string;
  private readonly channel: string;
  private readonly timeoutMs: number;
  readonly cache = new CircuitCache();
  private readonly reads = new Map<string, Promise<Versioned>>();
  /** Per circuit: steps waiting while a write to it is on its way (`apply`). */
  private readonly queues = new Map<string, Queued[]>();
  private readonly logger: Logger;
  /** Commands with the timeout and the 503 mapping; the lease store uses them too. */
  readonly redis: RedisCommands;

  constructor(
    client: RedisConnection,
    subscriber: RedisConnection,
    options: RedisStoreOptions,
  ) {
    this.prefix = options.prefix ?? 'circuitlog:';
    this.channel = `${this.prefix}changes:${options.db ?? 0}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.logger = options.logger;
    this.redis = new RedisCommands(client, this.timeoutMs, options.logger);
    subscriber.on('ready', () => {
      this.subscribed = this.subscribe(subscriber);
    });
    subscriber.on('end', () => this.cache.distrust());
    subscriber.on('reconnecting', () => this.cache.distrust());
    subscriber.on('error', () => this.cache.distrust());
    if (subscriber.isReady) this.subscribed = this.subscribe(subscriber);
  }

  private subscribed: Promise<void> | null = null;

  /** Resolves once the first subscription is live (the cache works from then on). */
  ready(): Promise<void> {
    return this.subscribed ?? Promise.resolve();
  }

  /** (Re)subscribe; the cache is trusted from the moment the subscription is confirmed. */
  private async subscribe(subscriber: RedisConnection): Promise<void> {
    try {
      // After a reconnect: one listener, not one more per reconnect (the client resubscribes on its own too).
      if (this.subscribed !== null) await subscriber.UNSUBSCRIBE(this.channel);
      const again = this.subscribed !== null;
      await subscriber.SUBSCRIBE(this.channel, (message: string) => this.onMessage(message));
      this.cache.trust();
      if (again) for (const listener of this.resubscribeListeners) listener();
    } catch (error) {
      this.logger.warn({ event: 'redis_subscribe_failed', err: (error as Error).message }, 'subscribing to changes failed');
    }
  }

  private onMessage(message: string): void {
    const [v, id, name, ...rest] = message.split('\n');
    const json = rest.join('\n');
    const circuit = json === '' ? null : this.decode(Number(id), json);
    this.cache.onMessage(name!, { version: Number(v), circuit });
    for (const listener of this.changeListeners) listener(name!, circuit);
  }

  private readonly changeListeners: ((name: string, circuit: Circuit | null) => void)[] = [];
  private readonly resubscribeListeners: (() => void)[] = [];

  /** Every committed change of any host (a mirror of all circuits keeps itself current with it). */
  onChange(listener: (name: string, circuit: Circuit | null) => void): void {
    this.changeListeners.push(listener);
  }

  /** After the subscription came back: messages may have been missed meanwhile. */
  onResubscribed(listener: () => void): void {
    this.resubscribeListeners.push(listener);
  }

  private key(name: string): string {
    return `${this.prefix}c:{${name}}`;
  }

  private eventsKey(name: string): string {
    return `${this.prefix}e:{${name}}`;
  }

  private decode(id: number, json: string): Circuit {
    const circuit = JSON.parse(json) as Circuit;
    return circuit.id === id ? circuit : { ...circuit, id };
  }

  find(name: string): MaybePromise<Circuit | null> {
    const held = this.cache.get(name);
    if (held !== undefined) return held.circuit;
    return this.read(name).then((v) => v.circuit);
  }

  /** The stored circuit with its version; one read at a time per name. */
  private read(name: string): Promise<Versioned> {
    const running = this.reads.get(name);
    if (running) return running;
    const epoch = this.cache.currentEpoch;
    this.cache.startRead(name);
    const read = this.redis.command<(string | null)[]>(['HMGET', this.key(name), 'v', 'id', 'c'])
      .then(([v, id, json]) => {
        const value: Versioned = v === null ? { version: 0, circuit: null } : { version: Number(v), circuit: this.decode(Number(id), json!) };
        return this.cache.offer(name, value, epoch);
      })
      .finally(() => {
        this.cache.endRead(name);
        this.reads.delete(name);
      });
    this.reads.set(name, read);
    return read;
  }

  /**
   * Steps that change nothing on the cached circuit answer at once, synchronously. Writes
   * to one circuit from this process go one at a time: steps arriving meanwhile wait and
   * are then written together in one compare-and-set, each seeing the one before.
   */
  apply<S extends Step>(name: string, step: (current: Circuit | null) => S | null): MaybePromise<S | null> {
    const held = this.cache.get(name);
    if (held !== undefined && !this.queues.has(name)) {
      const result = step(held.circuit);
      if (result === null || result.circuit === held.circuit) return result;
    }
    return new Promise<S | null>((resolve, reject) => {
      const queued = { step, resolve: resolve as (r: Step | null) => void, reject };
      const queue = this.queues.get(name);
      if (queue) {
        queue.push(queued);
        return;
      }
      this.queues.set(name, [queued]);
      void this.drain(name);
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
        const results = await this.compareAndSet([name], (states) => {
          let current = states.get(name)!.circuit;
          const changed: Step[] = [];
          const outcomes = batch.map((q): Answer => {
            try {
              const result = q.step(current);
              if (result !== null && result.circuit !== current) {
                current = result.circuit;
                changed.push(result);
              }
              return { result };
            } catch (error) {
              return { error }; // this caller's step refused (e.g. a bad PATCH); the others go on
            }
          });
          return { writes: changed.length === 0 ? [] : [{ name, steps: changed }], answer: outcomes };
        });
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

  applyBatch(items: readonly BatchItem[]): MaybePromise<(Step | null)[]> {
    if (items.length === 0) return [];
    const names = [...new Set(items.map((i) => i.name))];
    return this.compareAndSet(names, (states) => {
      const latest = new Map([...states].map(([n, v]) => [n, v.circuit]));
      const steps = new Map<string, Step[]>();
      const answer = items.map(({ name, step }) => {
        const current = latest.get(name) ?? null;
        const result = step(current);
        if (result === null || result.circuit === current) return result;
        latest.set(name, result.circuit);
        steps.set(name, [...(steps.get(name) ?? []), result]);
        return result;
      });
      return { writes: [...steps].map(([name, s]) => ({ name, steps: s })), answer: answer.map((result) => ({ result })) };
    }).then((answers) => answers.map((a) => (a as { result: Step | null }).result));
  }

  /**
   * The optimistic loop: read the circuits (cache or Redis) with their versions, compute
   * the writes, and commit them only if no version changed; on a conflict the script
   * answers the current states and the steps run again on those.
   */
  private async compareAndSet(
    names: readonly string[],
    plan: (states: Map<string, Versioned>) => { writes: Write[]; answer: Answer[] },
  ): Promise<Answer[]> {
    // Circuits not in the cache are read in parallel: one round trip for a whole batch.
    let states = new Map(await Promise.all(names.map(async (name) => [name, this.cache.get(name) ?? (await this.read(name))] as const)));
    for (let attempt = 1; ; attempt++) {
      const { writes, answer } = plan(states);
      if (writes.length === 0) return answer;
      const reply = await this.runCas(writes, states);
      if (reply[0] === 1) return this.committed(writes, reply, answer);
      if (attempt >= MAX_ATTEMPTS) {
        throw new AppError('STORAGE_BUSY', `Too many concurrent writes to ${writes.map((w) => `'${w.name}'`).join(', ')}; try again.`, {
          retryAfterSeconds: 1,
        });
      }
      states = this.conflictStates(writes, reply, states);
    }
  }

  private runCas(writes: Write[], states: Map<string, Versioned>): Promise<(string | number)[]> {
    const keys = [`${this.prefix}ids`, `${this.prefix}version`, `${this.prefix}index`, `${this.prefix}seq`, `${this.prefix}transitions`];
    const args = [this.channel];
    for (const { name, steps } of writes) {
      const read = states.get(name)!;
      const final = steps.at(-1)!.circuit;
      const transitions = steps.flatMap((s) => s.transitions.map((t) => [t.from, t.to, t.reason, t.at]));
      keys.push(this.key(name), this.eventsKey(name));
      args.push(name, read.circuit === null ? '0' : String(read.version), JSON.stringify(final), JSON.stringify(transitions));
    }
    return this.redis.eval<(string | number)[]>(CAS_SCRIPT, keys, args);
  }

  /** After a commit: ids into the results (a new circuit got its id in the script), versions into the cache. */
  private committed(writes: Write[], reply: (string | number)[], answer: Answer[]): Answer[] {
    const fixed = new Map<Circuit, Circuit>();
    writes.forEach(({ name, steps }, i) => {
      const version = Number(reply[1 + 2 * i]);
      const id = Number(reply[2 + 2 * i]);
      for (const s of steps) if (s.circuit.id !== id) fixed.set(s.circuit, { ...s.circuit, id });
      const final = steps.at(-1)!.circuit;
      this.cache.offer(name, { version, circuit: fixed.get(final) ?? final });
    });
    if (fixed.size === 0) return answer;
    return answer.map((a) => {
      const circuit = 'result' in a && a.result !== null ? fixed.get(a.result.circuit) : undefined;
      return circuit === undefined ? a : { result: { ...(a as { result: Step }).result, circuit } };
    });
  }

  private conflictStates(writes: { name: string }[], reply: (string | number)[], previous: Map<string, Versioned>): Map<string, Versioned> {
    const states = new Map(previous);
    writes.forEach(({ name }, i) => {
      const [v, id, json] = [reply[1 + 3 * i], reply[2 + 3 * i], reply[3 + 3 * i]];
      const value: Versioned = json === '' ? { version: 0, circuit: null } : { version: Number(v), circuit: this.decode(Number(id), String(json)) };
      states.set(name, value);
      this.cache.offer(name, value);
    });
    return states;
  }

  delete(name: string): MaybePromise<boolean> {
    const keys = [this.key(name), this.eventsKey(name), `${this.prefix}index`, `${this.prefix}version`];
    return this.redis.eval<number>(DELETE_SCRIPT, keys, [this.channel, name]).then((version) => {
      if (version === 0) return false;
      this.cache.offer(name, { version, circuit: null }); // this host reads its own delete at once
      return true;
    });
  }

  async list(query: ListQuery): Promise<Circuit[]> {
    const out: Circuit[] = [];
    let after = query.afterId ?? 0;
    for (;;) {
      const flat = await this.redis.command<string[]>(['ZRANGE', `${this.prefix}index`, `(${after}`, '+inf', 'BYSCORE', 'LIMIT', '0', String(LIST_SCAN_PAGE), 'WITHSCORES']);
      const page = flat.filter((_, i) => i % 2 === 0);
      if (page.length === 0) return out;
      after = Number(flat.at(-1));
      const rows = await Promise.all(page.map((name) => this.redis.command<(string | null)[]>(['HMGET', this.key(name), 'id', 'c'])));
      for (const [id, json] of rows) {
        if (id == null || json == null) continue; // deleted meanwhile
        const circuit = this.decode(Number(id), json);
        if (query.state === undefined || stateAt(circuit, query.now) === query.state) out.push(circuit);
        if (out.length >= query.limit) return out;
      }
      if (page.length < LIST_SCAN_PAGE) return out;
    }
  }

  async events(circuitId: number, limit: number): Promise<Transition[]> {
    const [name] = await this.redis.command<string[]>(['ZRANGE', `${this.prefix}index`, String(circuitId), String(circuitId), 'BYSCORE']);
    if (name === undefined) return [];
    const rows = await this.redis.command<string[]>(['LRANGE', this.eventsKey(name), '0', String(limit - 1)]);
    return rows.map((row) => {
      const [from, to, reason, at] = JSON.parse(row) as [CircuitState, CircuitState, Transition['reason'], number];
      return { from, to, reason, at };
    });
  }

  ping(): Promise<boolean> {
    return this.redis.command<string>(['PING']).then(
      (pong) => pong === 'PONG',
      () => false,
    );
  }

}

/** The state a read at `now` would show: an open circuit whose time has passed is half-open. */
function stateAt(c: Circuit, now: number | undefined): CircuitState {
  if (now !== undefined && c.state === 'open' && c.openUntil !== null && c.openUntil <= now) return 'half_open';
  return c.state;
}
