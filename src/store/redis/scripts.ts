/**
 * The Lua scripts of the Redis store. Redis runs a script atomically (nothing else runs
 * meanwhile: https://redis.io/docs/latest/develop/interact/programmability/eval-intro/),
 * which makes each one a compare-and-set over the circuits it names.
 *
 * Keys, under a prefix (default `circuitlog:`): `c:{name}` a hash (`v` version, `id`, `c`
 * the circuit as JSON); `e:{name}` its newest transitions (a list, trimmed); `ids`, `version`
 * and `seq` counters; `index` a sorted set name -> id (listing in id order); `transitions`
 * a stream of every transition with ids `<seq>-0`, trimmed. Versions come from one counter
 * for all circuits, so a version is never reused, not even after a DELETE and a re-create.
 * Every write publishes `<version>\n<id>\n<name>\n<json>` (json empty: deleted) on
 * `changes:<db>` (channels are not per database), from inside the script: a host sees a change only once it is committed.
 */

/** Newest transitions kept per circuit for `GET /circuits/{name}/events` (its limit is at most 500). */
export const EVENTS_PER_CIRCUIT = 1_000;
/** Transitions kept in the `transitions` stream (approximately: `MAXLEN ~`). */
export const STREAM_MAX_LENGTH = 100_000;

/**
 * Write circuits if none changed since it was read. KEYS: ids, version, index, seq,
 * transitions, then per circuit `c:{name}` and `e:{name}`. ARGV: channel, then per
 * circuit: name, the version read (`0` = absent), the new JSON, its transitions as a
 * JSON array of `[from, to, reason, at]`.
 * Answers `{1, v1, id1, v2, id2, ...}`, or on a conflict `{0, v1, id1, json1, ...}`: the
 * stored state of every circuit named (`0`, `0`, `''` when absent), so a retry needs no read.
 */
export const CAS_SCRIPT = `
local n = (#ARGV - 1) / 4
for i = 1, n do
  local v = redis.call('HGET', KEYS[4 + 2 * i], 'v') or '0'
  if v ~= ARGV[2 + 4 * (i - 1) + 1] then
    local out = {0}
    for j = 1, n do
      local cur = redis.call('HMGET', KEYS[4 + 2 * j], 'v', 'id', 'c')
      out[#out + 1] = cur[1] or '0'
      out[#out + 1] = cur[2] or '0'
      out[#out + 1] = cur[3] or ''
    end
    return out
  end
end
local out = {1}
for i = 1, n do
  local base = 2 + 4 * (i - 1)
  local name, json = ARGV[base], ARGV[base + 2]
  local key, events = KEYS[4 + 2 * i], KEYS[5 + 2 * i]
  local id = redis.call('HGET', key, 'id')
  if not id then
    id = redis.call('INCR', KEYS[1])
    redis.call('ZADD', KEYS[3], id, name)
  end
  local v = redis.call('INCR', KEYS[2])
  redis.call('HSET', key, 'v', v, 'id', id, 'c', json)
  local transitions = cjson.decode(ARGV[base + 3])
  for _, t in ipairs(transitions) do
    local seq = redis.call('INCR', KEYS[4])
    redis.call('LPUSH', events, cjson.encode(t))
    redis.call('XADD', KEYS[5], 'MAXLEN', '~', ${STREAM_MAX_LENGTH}, seq .. '-0',
      'circuit', name, 'from', t[1], 'to', t[2], 'reason', t[3], 'at', t[4])
  end
  if #transitions > 0 then redis.call('LTRIM', events, 0, ${EVENTS_PER_CIRCUIT - 1}) end
  redis.call('PUBLISH', ARGV[1], v .. '\\n' .. id .. '\\n' .. name .. '\\n' .. json)
  out[#out + 1] = v
  out[#out + 1] = tonumber(id)
end
return out
`;

/**
 * Remove a circuit and its events. KEYS: `c:{name}`, `e:{name}`, index, version.
 * ARGV: channel, name. Answers the version of the deletion, or 0 if unknown.
 */
export const DELETE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local id = redis.call('HGET', KEYS[1], 'id')
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
local v = redis.call('INCR', KEYS[4])
redis.call('PUBLISH', ARGV[1], v .. '\\n' .. id .. '\\n' .. ARGV[2] .. '\\n')
return v
`;

/**
 * Take or renew a lease: set when free, expired (Redis expires it) or ours. KEYS: the
 * lease key. ARGV: owner, ttl in ms. Answers 1 when `owner` holds it afterwards.
 */
export const LEASE_SCRIPT = `
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`;

/** Give a lease up if we hold it. KEYS: the lease key. ARGV: owner. */
export const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;
