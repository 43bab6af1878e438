import type { Circuit, CircuitState, Transition } from '../../domain/circuit.js';
import type { ListQuery } from '../circuit-store.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';
import { indexPage } from './index-page.js';
import { parseCallerHash, withCallers } from './caller-hash.js';
import { byShard, shardOfId } from './shards.js';
import { isState, parseCircuit, type Malformed } from './stored-circuit.js';
import { parseTransitionDetail } from '../../domain/transition-detail.js';

const LIST_SCAN_PAGE = 200; // circuits read per round trip when a list filters by state

/**
 * The `id` and `c` of each circuit hash named in KEYS (one shard's: one slot; `c:<name>` then
 * `k:<name>` per circuit) with its caller table, as `ok, id, c, callers` per circuit (`callers` the
 * `HGETALL` of `k:<name>`, empty when it is not a hash); `ok` 0 when the circuit's key is not a hash
 * (the listing skips it and logs it as malformed).
 */
const READ_ROWS_SCRIPT = `
local out = {}
for i = 1, #KEYS / 2 do
  local r = redis.pcall('HMGET', KEYS[2 * i - 1], 'id', 'c')
  local k = redis.pcall('HGETALL', KEYS[2 * i])
  if k.err then k = {} end
  if r.err then
    out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = 0, false, false, {}
  else
    out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = 1, r[1], r[2], k
  end
end
return out
`;

/**
 * `GET /circuits`: pages of the shards' `index`es in id order (merged: `indexPage`), filtered by the state a read at `now`
 * shows. A circuit whose hash is malformed (not JSON, a bad field, a key of another type) is
 * skipped and logged once, so one bad value never fails the listing (nor a host's start: the
 * state-gauge mirror loads through here).
 */
export async function listCircuits(
  redis: RedisCommands,
  keys: RedisKeys,
  query: ListQuery,
  malformed: Malformed,
): Promise<Circuit[]> {
  const out: Circuit[] = [];
  let after = query.afterId ?? 0;
  // Unfiltered, every circuit read is one answered: read no more than the page needs.
  const pageSize = query.state === undefined ? Math.min(LIST_SCAN_PAGE, query.limit) : LIST_SCAN_PAGE;
  for (;;) {
    const ids = await indexPage(redis, keys, after, pageSize);
    if (ids.length === 0) return out;
    after = ids.at(-1)![1];
    const page = ids.map(([name]) => name);
    const rows = await readRows(redis, keys, page, malformed);
    for (const circuit of rows) {
      if (circuit === null) continue; // deleted meanwhile, or malformed
      if (query.state === undefined || stateAt(circuit, query.now) === query.state) out.push(circuit);
      if (out.length >= query.limit) return out;
    }
    if (page.length < pageSize) return out;
  }
}

/**
 * The circuits named, in their order (null: deleted meanwhile, or malformed): one script per
 * shard holding any of them (READ_ROWS_SCRIPT), all sent at once, so a page is one round trip.
 */
async function readRows(
  redis: RedisCommands,
  keys: RedisKeys,
  names: readonly string[],
  malformed: Malformed,
): Promise<(Circuit | null)[]> {
  const found = new Map<string, Circuit | null>();
  await Promise.all(
    [...byShard(names, (n) => n).values()].map(async (group) => {
      const hashes = group.map((name) => keys.circuit(name));
      const tables = group.map((name) => keys.callers(name));
      const scriptKeys = group.flatMap((_, i) => [hashes[i]!, tables[i]!]);
      const flat = await redis.eval<unknown[]>(READ_ROWS_SCRIPT, scriptKeys, [], 'read');
      group.forEach((name, i) => {
        const [ok, id, json, callers] = flat.slice(4 * i, 4 * i + 4) as [number, string | null, string | null, unknown];
        const circuit = parseRow(name, hashes[i]!, ok, id, json, malformed);
        found.set(name, circuit === null ? null : attachCallers(circuit, tables[i]!, callers, malformed));
      });
    }),
  );
  return names.map((name) => found.get(name) ?? null);
}

function parseRow(
  name: string,
  key: string,
  ok: number,
  id: string | null,
  json: string | null,
  malformed: Malformed,
): Circuit | null {
  if (ok === 0) {
    malformed.report(key, 'the key is not a hash');
    return null;
  }
  if (id == null && json == null) return null; // deleted meanwhile
  const parsed = parseCircuit(name, id, json);
  if ('problem' in parsed) {
    malformed.report(key, parsed.problem);
    return null;
  }
  return parsed.circuit;
}

/** The circuit with the table its `k:<name>` hash holds (a legacy `c` that holds one keeps its own: `caller-hash.ts`). */
function attachCallers(circuit: Circuit, key: string, flat: unknown, malformed: Malformed): Circuit {
  if (circuit.callers !== undefined || !Array.isArray(flat) || flat.length === 0) return circuit;
  const { entries, problem } = parseCallerHash(flat);
  if (problem !== null) malformed.report(key, problem);
  return withCallers(circuit, entries);
}

/** `GET /circuits/{name}/events`: the circuit's newest transitions, newest first (malformed entries skipped, logged once). */
export async function circuitEvents(
  redis: RedisCommands,
  keys: RedisKeys,
  circuitId: number,
  limit: number,
  malformed: Malformed,
): Promise<Transition[]> {
  const shard = keys.shards[shardOfId(circuitId)]!;
  const [name] = await redis.command<string[]>(
    ['ZRANGE', shard.index, String(circuitId), String(circuitId), 'BYSCORE'],
    'read',
  );
  if (name === undefined) return [];
  const rows = await redis.command<string[]>(['LRANGE', keys.events(name), '0', String(limit - 1)], 'read');
  const out: Transition[] = [];
  for (const row of rows) {
    const transition = parseTransition(row);
    if (transition === null)
      malformed.report(keys.events(name), `an entry is not [from, to, reason, at]: ${row.slice(0, 100)}`);
    else out.push(transition);
  }
  return out;
}

function parseTransition(row: string): Transition | null {
  let raw: unknown;
  try {
    raw = JSON.parse(row);
  } catch {
    return null;
  }
  if (!Array.isArray(raw) || (raw.length !== 4 && raw.length !== 5)) return null;
  const [from, to, reason, at, detail] = raw as unknown[];
  if (!isState(from) || !isState(to) || typeof reason !== 'string' || typeof at !== 'number' || !Number.isFinite(at))
    return null;
  const t = { from, to, reason: reason as Transition['reason'], at };
  return typeof detail === 'string' ? { ...t, ...parseTransitionDetail(detail) } : t;
}

/** The state a read at `now` would show: an open circuit whose time has passed is half-open. */
function stateAt(c: Circuit, now: number | undefined): CircuitState {
  if (now !== undefined && c.state === 'open' && c.openUntil !== null && c.openUntil <= now) return 'half_open';
  return c.state;
}
