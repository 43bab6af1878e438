import type { Circuit, CircuitState, Transition } from '../../domain/circuit.js';
import type { ListQuery } from '../circuit-store.js';
import type { RedisCommands } from './redis-commands.js';
import { decodeCircuit, type RedisKeys } from './redis-keys.js';

const LIST_SCAN_PAGE = 200; // circuits read per round trip when a list filters by state

/** `GET /circuits`: pages of the `index` in id order, filtered by the state a read at `now` shows. */
export async function listCircuits(redis: RedisCommands, keys: RedisKeys, query: ListQuery): Promise<Circuit[]> {
  const out: Circuit[] = [];
  let after = query.afterId ?? 0;
  // Unfiltered, every circuit read is one answered: read no more than the page needs.
  const pageSize = query.state === undefined ? Math.min(LIST_SCAN_PAGE, query.limit) : LIST_SCAN_PAGE;
  for (;;) {
    const flat = await redis.command<string[]>(['ZRANGE', keys.index, `(${after}`, '+inf', 'BYSCORE', 'LIMIT', '0', String(pageSize), 'WITHSCORES']);
    const page = flat.filter((_, i) => i % 2 === 0);
    if (page.length === 0) return out;
    after = Number(flat.at(-1));
    const rows = await Promise.all(page.map((name) => redis.command<(string | null)[]>(['HMGET', keys.circuit(name), 'id', 'c'])));
    for (const [id, json] of rows) {
      if (id == null || json == null) continue; // deleted meanwhile
      const circuit = decodeCircuit(Number(id), json);
      if (query.state === undefined || stateAt(circuit, query.now) === query.state) out.push(circuit);
      if (out.length >= query.limit) return out;
    }
    if (page.length < pageSize) return out;
  }
}

/** `GET /circuits/{name}/events`: the circuit's newest transitions, newest first. */
export async function circuitEvents(redis: RedisCommands, keys: RedisKeys, circuitId: number, limit: number): Promise<Transition[]> {
  const [name] = await redis.command<string[]>(['ZRANGE', keys.index, String(circuitId), String(circuitId), 'BYSCORE']);
  if (name === undefined) return [];
  const rows = await redis.command<string[]>(['LRANGE', keys.events(name), '0', String(limit - 1)]);
  return rows.map((row) => {
    const [from, to, reason, at] = JSON.parse(row) as [CircuitState, CircuitState, Transition['reason'], number];
    return { from, to, reason, at };
  });
}

/** The state a read at `now` would show: an open circuit whose time has passed is half-open. */
function stateAt(c: Circuit, now: number | undefined): CircuitState {
  if (now !== undefined && c.state === 'open' && c.openUntil !== null && c.openUntil <= now) return 'half_open';
  return c.state;
}
