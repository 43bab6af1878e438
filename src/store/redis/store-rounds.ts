import type { Circuit, Step } from '../../domain/circuit.js';
import type { BatchItem } from '../circuit-store.js';
import type { Answer } from './compare-and-set.js';
import type { Versioned } from './redis-cache.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';

/** A step waiting while a write to its circuit is on its way (`RedisCircuitStore.apply`). */
export interface Queued {
  readonly step: (current: Circuit | null) => Step | null;
  readonly resolve: (result: Step | null) => void;
  readonly reject: (error: unknown) => void;
}

/** One compare-and-set round of a circuit's queued steps, each seeing the one before; a step that throws fails alone. */
export function queuedRound(name: string, batch: readonly Queued[], states: ReadonlyMap<string, Versioned>) {
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
}

/** One compare-and-set round of a shard's part of a batch, in order. */
export function shardRound(items: readonly BatchItem[], states: ReadonlyMap<string, Versioned>) {
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
  return {
    writes: [...steps].map(([name, s]) => ({ name, steps: s })),
    answer: answer.map((result) => ({ result })),
  };
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
