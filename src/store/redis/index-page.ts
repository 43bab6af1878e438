import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys, ShardKeys } from './redis-keys.js';
import { SHARDS } from './shards.js';

/** A shard that may hold more ids above `from` (its last page was full). */
interface Open {
  readonly keys: ShardKeys;
  readonly from: number;
}

/**
 * Ids one shard is asked for first: twice its share of the page (names spread over the shards
 * by hash) and a few more, so that one round usually settles the page; never more than the page.
 */
export const firstAsk = (limit: number): number => Math.min(limit, Math.ceil((2 * limit) / SHARDS) + 4);

/**
 * Up to `limit` names with ids above `after`, in id order across every shard's `index` (ids are
 * unique across shards, so the id is a stable cursor). Round 1 asks each shard for `firstAsk`
 * ids past the cursor, in one pipelined round trip. Every id up to the `frontier` (the lowest
 * last id of a shard whose answer was full) is then known; when fewer than `limit` are, round 2
 * asks only the full shards for the ids still missing, past what each answered. Two rounds
 * always settle it: the shard at the frontier alone brings the missing ids, all at or below the
 * new frontier. So a page costs O(limit) ids read, not `limit` per shard, wherever its cursor is
 * (a ZRANGE BYSCORE is O(log n) to the cursor). Answers the names with their ids.
 */
export async function indexPage(
  redis: RedisCommands,
  keys: RedisKeys,
  after: number,
  limit: number,
): Promise<[name: string, id: number][]> {
  const known: [string, number][] = [];
  let open: Open[] = keys.shards.map((k) => ({ keys: k, from: after }));
  let ask = firstAsk(limit);
  while (open.length > 0 && ask > 0) {
    const pages = await Promise.all(
      open.map(({ keys: k, from }) =>
        redis.command<string[]>(
          ['ZRANGE', k.index, `(${from}`, '+inf', 'BYSCORE', 'LIMIT', '0', String(ask), 'WITHSCORES'],
          'read',
        ),
      ),
    );
    const stillOpen: Open[] = [];
    pages.forEach((flat, i) => {
      for (let j = 0; j + 1 < flat.length; j += 2) known.push([flat[j]!, Number(flat[j + 1])]);
      if (flat.length >= 2 * ask) stillOpen.push({ keys: open[i]!.keys, from: Number(flat.at(-1)) });
    });
    known.sort((a, b) => a[1] - b[1]);
    const frontier = Math.min(...stillOpen.map((s) => s.from)); // Infinity: every shard answered all it has
    const settled = countUpTo(known, frontier);
    if (settled >= limit) return known.slice(0, limit);
    open = stillOpen;
    ask = limit - settled;
  }
  return known.slice(0, limit);
}

/** How many of the sorted `ids` are at or below `bound`. */
function countUpTo(ids: readonly [string, number][], bound: number): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ids[mid]![1] <= bound) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
