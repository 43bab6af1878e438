import { isIdleCircuit } from '../../domain/idle.js';
import type { HousekeepingStore, IdleProgress, TrimProgress } from '../housekeeping-store.js';
import { indexPage } from './index-page.js';
import type { RedisCircuitStore } from './redis-store.js';
import { byShard } from './shards.js';
import { isWhole, parseCircuit } from './stored-circuit.js';
import { parseCallerHash, withCallers } from './caller-hash.js';

/**
 * Trim circuits' event lists (`e:{name}`, newest first): to `ARGV[1]` entries (0: no bound),
 * then drop the tail older than `ARGV[2]` (epoch ms; 0: none), found by binary search since
 * a list's times fall from head to tail. KEYS: the lists. Answers the entries removed.
 */
const TRIM_LISTS_SCRIPT = `
local max, before, removed = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
local function at(key, i)
  local ok, t = pcall(cjson.decode, redis.call('LINDEX', key, i))
  if ok and type(t) == 'table' and tonumber(t[4]) then return tonumber(t[4]) end
  return math.huge
end
for _, key in ipairs(KEYS) do
  local len = redis.call('LLEN', key)
  if max > 0 and len > max then
    redis.call('LTRIM', key, 0, max - 1)
    removed = removed + len - max
    len = max
  end
  if before > 0 and len > 0 and at(key, len - 1) < before then
    local lo, hi = 0, len - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if at(key, mid) < before then hi = mid else lo = mid + 1 end
    end
    if lo == 0 then redis.call('DEL', key) else redis.call('LTRIM', key, 0, lo - 1) end
    removed = removed + len - lo
  end
end
return removed
`;

/**
 * Each named circuit's `v`, `id` and `c` fields and its caller table (`HGETALL` of `k:<name>`), in
 * order (KEYS: `c:<name>` and `k:<name>` per circuit, one shard's).
 */
const READ_CIRCUITS_SCRIPT = `
local out = {}
for i = 1, #KEYS / 2 do
  local row = redis.call('HMGET', KEYS[2 * i - 1], 'v', 'id', 'c')
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1] = row[1] or '', row[2] or '', row[3] or ''
  out[4 * i] = redis.call('HGETALL', KEYS[2 * i])
end
return out
`;

/**
 * Delete the named circuits whose version `v` is still the one judged idle (a compare-and-delete:
 * any write since, to the circuit or its caller table, raised it), with their events, caller
 * table and history, as DELETE_SCRIPT does (same publish, so every host's cache forgets them). KEYS (one
 * shard's): index, version, then per name `c:<name>`, `e:<name>`, `k:<name>` and `h:<name>`. ARGV: the publish
 * command and channel, then per name its name and the version judged. Answers the names deleted.
 */
const DELETE_IDLE_SCRIPT = `
local out = {}
for j = 1, (#ARGV - 2) / 2 do
  local name, judged = ARGV[1 + 2 * j], ARGV[2 + 2 * j]
  local key, events, callers, history = KEYS[4 * j - 1], KEYS[4 * j], KEYS[4 * j + 1], KEYS[4 * j + 2]
  if redis.call('HGET', key, 'v') == judged then
    local id = redis.call('HGET', key, 'id')
    redis.call('DEL', key, events, callers, history)
    redis.call('ZREM', KEYS[1], name)
    local v = redis.call('INCR', KEYS[2])
    redis.call(ARGV[1], ARGV[2], v .. '\\n' .. id .. '\\n' .. name .. '\\n')
    out[#out + 1] = name
  end
end
return out
`;

type StreamEntry = [id: string, fields: string[]];

/**
 * Housekeeping on Redis: each shard's `transitions` stream trimmed by age with XTRIM MINID
 * (its ids are `<seq>-0`, so the cut is the first entry young enough to keep), each circuit's
 * event list trimmed in batches of circuits taken from the indexes in id order, and idle
 * circuits deleted by a script that re-checks them atomically (one script per shard a batch
 * touches: a script runs on one slot).
 */
export class RedisHousekeeping implements HousekeepingStore {
  constructor(private readonly store: RedisCircuitStore) {}

  async trimByAge(before: number, batch: number): Promise<number> {
    const trimmed = await Promise.all(this.store.keys.shards.map((k) => this.trimStream(k.transitions, before, batch)));
    return trimmed.reduce((a, b) => a + b, 0);
  }

  private async trimStream(stream: string, before: number, batch: number): Promise<number> {
    const { redis } = this.store;
    const entries = await redis.command<StreamEntry[]>(['XRANGE', stream, '-', '+', 'COUNT', String(batch)]);
    let old = 0;
    while (old < entries.length && atOf(entries[old]!) < before) old++;
    if (old === 0) return 0;
    const last = entries[old - 1]![0];
    const minId = old < entries.length ? entries[old]![0] : `${Number(last.split('-')[0]) + 1}-0`;
    return redis.command<number>(['XTRIM', stream, 'MINID', minId]);
  }

  async trimPerCircuit(max: number, before: number, cursor: number, batch: number): Promise<TrimProgress> {
    const { names, next } = await this.page(cursor, batch);
    if (names.length === 0) return { deleted: 0, cursor: 0, done: true };
    let deleted = 0;
    for (const group of byShard(names, (n) => n).values()) {
      const lists = group.map((n) => this.store.keys.events(n));
      deleted += await this.store.redis.eval<number>(TRIM_LISTS_SCRIPT, lists, [String(max), String(before)]);
    }
    const done = names.length < batch;
    return { deleted, cursor: done ? 0 : next, done }; // every sweep passes over every circuit's list
  }

  /**
   * Each shard's candidates are read, judged by the domain's rule (domain/idle.ts; a malformed
   * circuit is kept) and deleted by a script that deletes only what is unchanged since.
   */
  async deleteIdle(
    before: number,
    now: number,
    keep: (name: string) => boolean,
    cursor: number,
    batch: number,
  ): Promise<IdleProgress> {
    const { names, next } = await this.page(cursor, batch);
    const candidates = names.filter((n) => !keep(n));
    const { keys, redis } = this.store;
    const deleted: string[] = [];
    for (const [shard, group] of byShard(candidates, (n) => n)) {
      const k = keys.shards[shard]!;
      const read = await redis.eval<unknown[]>(
        READ_CIRCUITS_SCRIPT,
        group.flatMap((n) => [k.circuit(n), k.callers(n)]),
        [],
      );
      const idle = group.flatMap((name, i) => {
        const [v, id, json, callers] = read.slice(4 * i, 4 * i + 4) as [string, string, string, unknown[]];
        const parsed = parseCircuit(name, id, json);
        if (!('circuit' in parsed) || !isWhole(v)) return [];
        const { entries } = parseCallerHash(Array.isArray(callers) ? callers : []);
        const legacy = parsed.circuit.callers !== undefined; // a legacy c keeps its own (caller-hash.ts)
        const circuit = legacy || entries.length === 0 ? parsed.circuit : withCallers(parsed.circuit, entries);
        return isIdleCircuit(circuit, before, now) ? [[name, v] as const] : [];
      });
      if (idle.length === 0) continue;
      const scriptKeys = [
        k.index,
        k.version,
        ...idle.flatMap(([n]) => [k.circuit(n), k.events(n), k.callers(n), k.history(n)]),
      ];
      const args = [...this.store.publish(shard), ...idle.flat()];
      deleted.push(...(await redis.eval<string[]>(DELETE_IDLE_SCRIPT, scriptKeys, args)));
    }
    return { deleted, cursor: next, done: names.length < batch };
  }

  /** Up to `batch` circuit names with ids above `cursor`, in id order across the shards, and the last id. */
  private async page(cursor: number, batch: number): Promise<{ names: string[]; next: number }> {
    const page = await indexPage(this.store.redis, this.store.keys, cursor, batch);
    return { names: page.map(([name]) => name), next: page.at(-1)?.[1] ?? cursor };
  }
}

/** A stream entry's `at`; a malformed one counts as young (kept, and it stops the trim). */
function atOf([, fields]: StreamEntry): number {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'at') return Number(fields[i + 1]) || Infinity;
  return Infinity;
}
