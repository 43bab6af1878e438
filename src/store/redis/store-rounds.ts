import type { Circuit, Step } from '../../domain/circuit.js';
import type { HistoryHook, StoredEntry } from '../../domain/history.js';
import type { BatchItem } from '../circuit-store.js';
import type { Answer, Write } from './compare-and-set.js';
import { stepEntries, type HistorySettings } from './history-stream.js';
import type { Versioned } from './redis-cache.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';

/** A step waiting while a write to its circuit is on its way (`RedisCircuitStore.apply`). */
export interface Queued {
  readonly step: (current: Circuit | null) => Step | null;
  /** Its history entry (issue 31), written even when the step leaves the circuit as it was. */
  readonly history?: HistoryHook;
  readonly resolve: (result: Step | null) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * One compare-and-set round of a circuit's queued steps, each seeing the one before; a step that
 * throws fails alone. A step that leaves the circuit as it was still writes its history entries.
 */
export function queuedRound(
  name: string,
  batch: readonly Queued[],
  states: ReadonlyMap<string, Versioned>,
  history: HistorySettings,
) {
  let current = states.get(name)!.circuit;
  const changed: Step[] = [];
  const entries: StoredEntry[] = [];
  const outcomes = batch.map((q): Answer => {
    try {
      const result = q.step(current);
      if (result !== null) entries.push(...stepEntries(history, q.history, current, result));
      if (result !== null && result.circuit !== current) {
        current = result.circuit;
        changed.push(result);
      }
      return { result };
    } catch (error) {
      return { error }; // this caller's step refused (e.g. a bad PATCH); the others go on
    }
  });
  const write = changed.length > 0 || entries.length > 0;
  return { writes: write ? [{ name, steps: changed, history: entries }] : [], answer: outcomes };
}

/** One compare-and-set round of a shard's part of a batch, in order (history entries as in `queuedRound`). */
export function shardRound(
  items: readonly BatchItem[],
  states: ReadonlyMap<string, Versioned>,
  history: HistorySettings,
) {
  const latest = new Map([...states].map(([n, v]) => [n, v.circuit]));
  const writes = new Map<string, Write>();
  const writeOf = (name: string) => {
    let w = writes.get(name);
    if (w === undefined) writes.set(name, (w = { name, steps: [], history: [] }));
    return w;
  };
  const answer = items.map(({ name, step, history: hook }) => {
    const current = latest.get(name) ?? null;
    const result = step(current);
    if (result === null) return result;
    const entries = stepEntries(history, hook, current, result);
    if (entries.length > 0) writeOf(name).history.push(...entries);
    if (result.circuit === current) return result;
    latest.set(name, result.circuit);
    writeOf(name).steps.push(result);
    return result;
  });
  return { writes: [...writes.values()], answer: answer.map((result) => ({ result })) };
}

/** Names of open circuits due by `now`, oldest first, from every shard's `due` set. */
export async function dueOpenNames(
  redis: RedisCommands,
  keys: RedisKeys,
  now: number,
  limit: number,
): Promise<string[]> {
  const pages = await Promise.all(
    keys.shards.map((k) =>
      redis.command<string[]>(
        ['ZRANGE', k.due, '-inf', String(now), 'BYSCORE', 'LIMIT', '0', String(limit), 'WITHSCORES'],
        'read',
      ),
    ),
  );
  const due: [string, number][] = [];
  for (const flat of pages) for (let i = 0; i + 1 < flat.length; i += 2) due.push([flat[i]!, Number(flat[i + 1])]);
  return due
    .sort((a, b) => a[1] - b[1])
    .slice(0, limit)
    .map(([name]) => name);
}

/** How many circuits exist: the sum of the shards' index sizes, O(shards). */
export async function countCircuits(redis: RedisCommands, keys: RedisKeys): Promise<number> {
  const sizes = await Promise.all(keys.shards.map((k) => redis.command<number>(['ZCARD', k.index], 'read')));
  return sizes.reduce((a, b) => a + b, 0);
}
