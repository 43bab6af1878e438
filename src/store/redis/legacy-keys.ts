import type { RedisCircuitStore } from './redis-store.js';
import { SHARDS } from './shards.js';

const PAGE = 200; // circuits moved per round

/**
 * Copy one circuit of the layout before shards into its shard, unless it is there already.
 * KEYS (the shard's): `c:<name>`, `e:<name>`, index, due, ids, version. ARGV: name, version,
 * new id, the circuit's JSON, the old id, `open_until` or `''`, then its transitions (newest
 * first). Raises the shard's `ids` to the old id (new ids are above every moved one) and its
 * `version` to the old version. Answers 1 when copied, 0 when the shard held it already.
 */
const MOVE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'id', ARGV[3], 'c', ARGV[4])
for i = 7, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[4], ARGV[6], ARGV[1]) end
for i, floor in ipairs({tonumber(ARGV[5]), tonumber(ARGV[2])}) do
  if (tonumber(redis.call('GET', KEYS[4 + i])) or 0) < floor then redis.call('SET', KEYS[4 + i], floor) end
end
return 1
`;

/**
 * At start: a store written by circuitlog before shards (`index`, `c:{name}`, `e:{name}` under
 * the prefix) is moved into the shards, a page of PAGE circuits at a time: every read of the
 * page at once, then every copy (MOVE_SCRIPT, on the shard's slot), then the old keys deleted,
 * so a page costs three round trips, not three per circuit. Idempotent: a host stopped half-way
 * moves the rest at its next start, and a circuit already copied is only deleted from the old
 * keys. Ids become `old id * 16 + shard` (the order of `GET /circuits` is kept). The old
 * `transitions` stream (the event stream's history) is left as it was: resumes from before the
 * upgrade get `event: reset`. Run it with every host of the old version stopped (docs/many-hosts.md).
 * A store without old keys costs one ZRANGE.
 */
export async function migrateLegacyKeys(store: RedisCircuitStore): Promise<number> {
  const { redis, keys } = store;
  const old: OldKeys = {
    index: `${keys.prefix}index`,
    due: `${keys.prefix}due`,
    circuit: (n: string) => `${keys.prefix}c:{${n}}`,
    events: (n: string) => `${keys.prefix}e:{${n}}`,
  };
  let moved = 0;
  for (;;) {
    const flat = await redis.command<string[]>(['ZRANGE', old.index, '0', String(PAGE - 1), 'WITHSCORES'], 'read');
    if (flat.length === 0) return moved;
    const page: [string, number][] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) page.push([flat[i]!, Number(flat[i + 1])]);
    const counts = await Promise.all(page.map(([name, oldId]) => moveOne(store, old, name, oldId)));
    moved += counts.reduce((a, b) => a + b, 0);
    await Promise.all(
      page.flatMap(([name]) => [
        redis.command(['DEL', old.circuit(name)]),
        redis.command(['DEL', old.events(name)]),
        redis.command(['ZREM', old.due, name]),
        redis.command(['ZREM', old.index, name]),
      ]),
    );
  }
}

interface OldKeys {
  readonly index: string;
  readonly due: string;
  circuit(name: string): string;
  events(name: string): string;
}

/** Copy one old circuit into its shard (1), or nothing when it is gone or there already (0). */
async function moveOne(store: RedisCircuitStore, old: OldKeys, name: string, oldId: number): Promise<number> {
  const { redis, keys } = store;
  const [[v, json], events, due] = await Promise.all([
    redis.command<(string | null)[]>(['HMGET', old.circuit(name), 'v', 'c'], 'read'),
    redis.command<string[]>(['LRANGE', old.events(name), '0', '-1'], 'read'),
    redis.command<string | null>(['ZSCORE', old.due, name], 'read'),
  ]);
  if (v == null || json == null) return 0;
  const k = keys.of(name);
  const args = [name, v, String(oldId * SHARDS + k.shard), json, String(oldId), due ?? '', ...events];
  return redis.eval<number>(MOVE_SCRIPT, [k.circuit(name), k.events(name), k.index, k.due, k.ids, k.version], args);
}
