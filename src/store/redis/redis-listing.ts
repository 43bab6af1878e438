import type { Circuit, CircuitState, Transition } from '../../domain/circuit.js';
import type { ListQuery } from '../circuit-store.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';
import { shardOfId } from './shards.js';
import { isState, parseCircuit, type Malformed } from './stored-circuit.js';
import { parseTransitionDetail } from '../../domain/transition-detail.js';

const LIST_SCAN_PAGE = 200; // circuits read per round trip when a list filters by state

/**
 * Up to `limit` names with ids above `after`, in id order across every shard's `index`: each
 * shard's next `limit`, merged (ids are unique across shards, so the id is a stable cursor).
 * Answers the names with their ids.
 */
export async function indexPage(
  redis: RedisCommands,
  keys: RedisKeys,
  after: number,
  limit: number,
): Promise<[name: string, id: number][]> {
  const pages = await Promise.all(
    keys.shards.map((k) =>
      redis.command<string[]>(
        ['ZRANGE', k.index, `(${after}`, '+inf', 'BYSCORE', 'LIMIT', '0', String(limit), 'WITHSCORES'],
        'read',
      ),
    ),
  );
  const merged: [string, number][] = [];
  for (const flat of pages) for (let i = 0; i + 1 < flat.length; i += 2) merged.push([flat[i]!, Number(flat[i + 1])]);
  return merged.sort((a, b) => a[1] - b[1]).slice(0, limit);
}

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
    const rows = await Promise.all(page.map((name) => readRow(redis, keys, name, malformed)));
    for (const circuit of rows) {
      if (circuit === null) continue; // deleted meanwhile, or malformed
      if (query.state === undefined || stateAt(circuit, query.now) === query.state) out.push(circuit);
      if (out.length >= query.limit) return out;
    }
    if (page.length < pageSize) return out;
  }
}

async function readRow(
  redis: RedisCommands,
  keys: RedisKeys,
  name: string,
  malformed: Malformed,
): Promise<Circuit | null> {
  const key = keys.circuit(name);
  const [id, json] = await redis
    .command<(string | null)[]>(['HMGET', key, 'id', 'c'], 'read')
    .catch((error: unknown) => {
      const reply = String((error as { options?: { cause?: unknown } }).options?.cause ?? '');
      if (!reply.includes('WRONGTYPE')) throw error; // an outage: the whole listing answers 503
      malformed.report(key, 'the key is not a hash');
      return [null, null];
    });
  if (id == null && json == null) return null; // deleted meanwhile
  const parsed = parseCircuit(name, id, json);
  if ('problem' in parsed) {
    malformed.report(key, parsed.problem);
    return null;
  }
  return parsed.circuit;
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
