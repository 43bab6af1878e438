import type { Circuit, Step } from '../../domain/circuit.js';
import { circuitToJson } from '../../domain/circuit-record.js';
import { AppError } from '../../domain/errors.js';
import type { CircuitCache, Versioned } from './redis-cache.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';
import { CAS_SCRIPT } from './scripts.js';
import { shardOf } from './shards.js';
import type { StoreEpoch } from './store-epoch.js';
import type { Malformed } from './stored-circuit.js';
import type { ReplicaAck } from './replica-ack.js';
import type { PublishTarget } from './publish-target.js';
import { detailText } from '../../domain/transition-detail.js';
import { callerDelta, versionedWithCallers } from './caller-hash.js';
import type { StoredEntry } from '../../domain/history.js';
import { historyArg, type HistorySettings } from './history-stream.js';

/**
 * Most attempts of one compare-and-set. An attempt fails only when another writer committed
 * to one of its circuits since it read, so with at most 64 concurrent writers a write fails
 * at most 63 times; within one process writes to a circuit are queued (see the store's
 * `apply`), so concurrent writers are per host, not per request.
 */
export const MAX_ATTEMPTS = 100;

/**
 * The steps to write to one circuit, in order; the last one's circuit is stored. No steps: the
 * circuit stays as read and only its history entries are appended (if it is still as read).
 */
export interface Write {
  readonly name: string;
  readonly steps: Step[];
  /** Its history entries (issue 31, `history-stream.ts`), appended in the same atomic run. */
  readonly history: StoredEntry[];
}

/** What one step came to: its result, or the error it threw. */
export type Answer = { readonly result: Step | null } | { readonly error: unknown };

/** Runs the steps on the states read and says what to write and what to answer each caller. */
export type Plan = (states: Map<string, Versioned>) => { writes: Write[]; answer: Answer[] };

/** What the loop works with, of the store (`redis-store.ts`). */
export interface CasStore {
  readonly redis: RedisCommands;
  readonly keys: RedisKeys;
  /** The publish command and channel of a shard's writes (the script's first two ARGV). */
  readonly publish: PublishTarget;
  readonly cache: CircuitCache;
  /** The store's life this host writes to (`store-epoch.ts`): the script refuses any other. */
  readonly epoch: StoreEpoch;
  readonly malformed: Malformed;
  readonly historySettings: HistorySettings;
}

/**
 * The optimistic loop: read the circuits (cache or Redis) with their versions, compute
 * the writes, and commit them with the Lua script only if no version changed; on a
 * conflict the script answers the current states and the steps run again on those.
 * Every circuit of one run belongs to one shard (`shards.ts`): the script runs on its slot.
 */
export class CompareAndSet {
  private readonly redis: RedisCommands;
  private readonly keys: RedisKeys;
  private readonly publish: PublishTarget;
  private readonly cache: CircuitCache;
  private readonly epoch: StoreEpoch;
  private readonly malformed: Malformed;
  private readonly history: HistorySettings;

  constructor(
    store: CasStore,
    /** A versioned read from Redis, for circuits the cache does not hold. */
    private readonly read: (name: string) => Promise<Versioned>,
    private readonly replicated: ReplicaAck,
  ) {
    ({ redis: this.redis, keys: this.keys, publish: this.publish, cache: this.cache } = store);
    ({ epoch: this.epoch, malformed: this.malformed, historySettings: this.history } = store);
  }

  async run(names: readonly string[], plan: Plan): Promise<Answer[]> {
    const shard = shardOf(names[0]!);
    if (names.some((n) => shardOf(n) !== shard)) throw new Error('one compare-and-set writes one shard');
    // Circuits not in the cache are read in parallel: one round trip for a whole batch.
    let states = new Map(
      await Promise.all(names.map(async (name) => [name, this.cache.get(name) ?? (await this.read(name))] as const)),
    );
    for (let attempt = 1; ; attempt++) {
      const { writes, answer } = plan(states);
      if (writes.length === 0) return answer;
      const reply = await this.send(shard, writes, states);
      if (reply[0] === 1) {
        const committed = this.committed(writes, reply, answer);
        await this.replicated.confirm(this.keys.shards[shard]!.epoch); // with replicas_ack: acknowledged only once that many replicas have it
        return committed;
      }
      if (reply[0] === -1) {
        // Not synced yet, or the store was emptied since: adopt its epoch, then read again from it.
        await this.epoch.sync();
        states = new Map(await Promise.all(names.map(async (name) => [name, await this.read(name)] as const)));
        if (attempt < MAX_ATTEMPTS) continue;
      }
      if (attempt >= MAX_ATTEMPTS) {
        throw new AppError(
          'STORAGE_BUSY',
          `Too many concurrent writes to ${writes.map((w) => `'${w.name}'`).join(', ')}; try again.`,
          {
            retryAfterSeconds: 1,
          },
        );
      }
      states = this.conflictStates(writes, reply, states);
    }
  }

  private send(shard: number, writes: Write[], states: Map<string, Versioned>): Promise<(string | number)[]> {
    const keys = this.keys.shards[shard]!;
    const scriptKeys = [keys.ids, keys.version, keys.index, keys.seq, keys.transitions, keys.epoch, keys.due];
    const { maxOutcomes, maxAgeMs } = this.history;
    const args = [...this.publish(shard), this.epoch.of(shard), String(shard), String(maxOutcomes), String(maxAgeMs)];
    for (const { name, steps, history } of writes) {
      const read = states.get(name)!;
      scriptKeys.push(keys.circuit(name), keys.events(name), keys.callers(name), keys.history(name));
      const version = read.corruptVersion ?? (read.circuit === null ? '0' : String(read.version));
      if (steps.length === 0) {
        args.push(name, version, '', '[]', '', '', historyArg(history)); // unchanged: its history only
        continue;
      }
      const final = steps.at(-1)!.circuit;
      // A fifth member, the detail's JSON text, only when the transition has one (scripts.ts).
      const transitions = steps.flatMap((s) =>
        s.transitions.map((t) => withDetail([t.from, t.to, t.reason, t.at], detailText(t))),
      );
      const due = dueTime(final);
      const dueAt = due === null ? '' : String(due);
      // Only what changed of the caller table; whole when nothing usable was read (new, corrupt, legacy).
      const whole = read.circuit === null || read.rewriteCallers === true;
      const delta = callerDelta(read.circuit?.callers, final.callers, whole);
      args.push(name, version, circuitToJson(final), JSON.stringify(transitions), dueAt, delta, historyArg(history));
    }
    return this.redis.eval<(string | number)[]>(CAS_SCRIPT, scriptKeys, args);
  }

  /** After a commit: ids into the results (a new circuit got its id in the script), versions into the cache. */
  private committed(writes: Write[], reply: (string | number)[], answer: Answer[]): Answer[] {
    const fixed = new Map<Circuit, Circuit>();
    writes.forEach(({ name, steps }, i) => {
      if (steps.length === 0) return; // unchanged, as the cache holds it
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

  /** After a conflict: the states the script answered, for the next attempt (and the cache). */
  private conflictStates(
    writes: { name: string }[],
    reply: (string | number | unknown[])[],
    previous: Map<string, Versioned>,
  ): Map<string, Versioned> {
    const states = new Map(previous);
    writes.forEach(({ name }, i) => {
      const [v, id, json] = [reply[1 + 4 * i], reply[2 + 4 * i], reply[3 + 4 * i]].map(String) as [
        string,
        string,
        string,
      ];
      const callers = reply[4 + 4 * i] as unknown as unknown[];
      const absent = v === '0' && id === '0' && json === '';
      const keys = { circuit: this.keys.circuit(name), callers: this.keys.callers(name) };
      const value: Versioned = absent
        ? { version: 0, circuit: null }
        : versionedWithCallers(this.malformed, keys, name, [v, id, json === '' ? null : json], callers);
      states.set(name, value);
      if (value.corruptVersion === undefined) this.cache.offer(name, value);
    });
    return states;
  }
}

function withDetail(t: (string | number)[], detail: string | null): (string | number)[] {
  if (detail !== null) t.push(detail);
  return t;
}

/** When a circuit has a step due by time alone: its open time's end, or a cool-down's (issue 29); null: none. */
function dueTime(c: Circuit): number | null {
  const open = c.state === 'open' ? c.openUntil : null;
  const cool = c.coolDueAt ?? null;
  if (open === null || cool === null) return open ?? cool;
  return Math.min(open, cool);
}
