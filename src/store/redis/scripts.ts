import { SHARDS } from './shards.js';

/**
 * The Lua scripts of the Redis store. Redis runs a script atomically (nothing else runs
 * meanwhile: https://redis.io/docs/latest/develop/interact/programmability/eval-intro/),
 * which makes each one a compare-and-set over the circuits it names.
 *
 * Keys, under a prefix (default `circuitlog:`), per shard (`shards.ts`: 16 shards, each the
 * hash tag `{<tag>}` right after the prefix, so a shard's keys share one Cluster slot):
 * `{<tag>}:c:<name>` a hash (`v` version, `id`, `c` the circuit as JSON without its caller
 * table, `o` the caller table's order counter); `{<tag>}:k:<name>` its caller table (a hash:
 * caller -> `<order>:<entry>`, `caller-hash.ts`), written by the compare-and-set from a delta (only
 * the callers gone, changed and appended); `{<tag>}:e:<name>` its newest transitions (a list, trimmed); `{<tag>}:h:<name>` its outcome history (a capped stream, APPEND_HISTORY); `ids`, `version` and `seq` counters; `index` a
 * sorted set name -> id (listing in id order, merged across shards); `transitions` a stream of
 * the shard's transitions with ids `<seq>-0`, trimmed. A circuit's id is `n * 16 + shard`
 * (`n` from its shard's `ids`, see ID_EPOCH_SECONDS), so ids are unique across shards and name their shard. Versions
 * come from the shard's counter, so a circuit's version is never reused, not even after a
 * DELETE and a re-create. Every write publishes `<version>\n<id>\n<name>\n<json>\n<version
 * read>\n<caller delta>` (json empty and no last two: deleted; see CAS_SCRIPT) from inside the script, so a host sees a change only once it is committed,
 * with the command and channel it is given (`publish-target.ts`): `PUBLISH changes:<db>` on
 * one Redis or Sentinel (channels are not per database), `SPUBLISH {<tag>}:changes:0` on a
 * Cluster (the shard's own channel, in the shard's slot: only the shard's primary handles it).
 * Each INCR of a shard's `version` publishes exactly one message (CAS, DELETE, and the idle
 * deletion of housekeeping), so on a shard's channel versions follow one another; only a
 * store reset (SYNC_SCRIPT) and the one-off move of the layout before shards raise the
 * counter without a message. `epoch` names the shard's life (SYNC_SCRIPT): writes check it, so none lands in a
 * shard emptied since the writer last synced. `due` a sorted set name -> `open_until` of every
 * open circuit, so the lease holder finds the circuits due to half-open without a scan
 * (`RedisStore.dueOpen`).
 */

/**
 * A new circuit's id is `n * 16 + shard`, `n` the shard's `ids` raised to at least the time in
 * microseconds since 2023-11-14 (Redis's clock: `TIME`), so ids across shards still follow the
 * order circuits were created in (to 1 µs, on one clock: a Cluster's nodes' clocks may differ
 * by their skew) and `GET /circuits` lists them in that order, as before shards. Ids stay
 * below 2^53 (exact as JSON numbers) until 2041.
 */
const ID_EPOCH_SECONDS = 1_700_000_000;

/** Newest transitions kept per circuit for `GET /circuits/{name}/events` (its limit is at most 500). */
export const EVENTS_PER_CIRCUIT = 1_000;
/** Transitions kept in the `transitions` stream (approximately: `MAXLEN ~`). */
export const STREAM_MAX_LENGTH = 100_000;
/** How far `seq` and `version` jump past what a host saw when it finds the store emptied. */
export const RESET_SEQ_MARGIN = 1_000;
export const RESET_VERSION_MARGIN = 1_000_000;

/**
 * Apply a caller-table delta (`caller-hash.ts`) to `k:<name>` (`callers`), with the order counter
 * `o` in the circuit's hash (`key`): a changed entry keeps its order, an appended one takes the
 * next. A Lua function, spliced into the scripts that write circuits.
 */
const APPLY_CALLERS = `
local function applyCallers(key, callers, delta)
  if delta == '' then return end
  local d = cjson.decode(delta)
  if d[1] == 1 then
    redis.call('DEL', callers)
    redis.call('HDEL', key, 'o')
  end
  for _, caller in ipairs(d[2]) do redis.call('HDEL', callers, caller) end
  for _, e in ipairs(d[3]) do
    local old = redis.call('HGET', callers, e[1])
    local order = old and string.match(old, '^(%d+):')
    if not order then order = redis.call('HINCRBY', key, 'o', 1) end
    redis.call('HSET', callers, e[1], order .. ':' .. e[2])
  end
  for _, e in ipairs(d[4]) do
    redis.call('HSET', callers, e[1], redis.call('HINCRBY', key, 'o', 1) .. ':' .. e[2])
  end
end
`;

/**
 * Append a write's history entries (issue 31) to the circuit's stream `h:<name>`: ARGV `entries`
 * is `''` or `<t>\n<text>\n` per entry (`t` a whole epoch ms; a text is JSON, which has no raw
 * newline), so neither side encodes the list again. Each entry's id is `<t>-*` (Redis numbers
 * entries of one millisecond), so `XRANGE` by time is `XRANGE` by id; an entry whose `t` is
 * behind the stream's newest id (another host's clock) takes that id's millisecond instead (ids
 * only grow), keeping its own `t` in the field. Then trimmed once per write to about `maxlen`
 * entries (`MAXLEN ~`: whole macro nodes, so a little more may stay) and to about the newest `t`
 * minus `maxAgeMs` (`MINID ~`).
 */
const APPEND_HISTORY = `
local function appendHistory(key, entries, maxlen, maxAgeMs)
  if entries == '' then return end
  local newest = 0
  for t, text in string.gmatch(entries, '(%d+)\\n([^\\n]*)\\n') do
    local added = redis.pcall('XADD', key, t .. '-*', 't', t, 'e', text)
    if type(added) == 'table' and added.err then
      -- t is behind the newest id (or the key is not a stream: untrusted, then it starts again)
      local last = redis.pcall('XREVRANGE', key, '+', '-', 'COUNT', 1)
      local ms = type(last) == 'table' and last[1] and string.match(last[1][1], '^(%d+)-')
      if not ms then
        redis.call('DEL', key)
        ms = t
      end
      redis.call('XADD', key, ms .. '-*', 't', t, 'e', text)
    end
    if tonumber(t) > newest then newest = tonumber(t) end
  end
  redis.call('XTRIM', key, 'MAXLEN', '~', maxlen)
  if maxAgeMs > 0 and newest > maxAgeMs then
    redis.call('XTRIM', key, 'MINID', '~', string.format('%.0f', newest - maxAgeMs))
  end
end
`;

/**
 * Write circuits of one shard if none changed since it was read. KEYS (the shard's): ids,
 * version, index, seq, transitions, epoch, due, then per circuit `c:<name>`, `e:<name>`, `k:<name>`
 * and `h:<name>`.
 * ARGV: the publish command and channel, the writer's epoch of the shard, the shard's number,
 * the history's `max_outcomes` and maximum age in ms, then per circuit: name, the version read (`0` = absent), the new JSON
 * (without its caller table; `''`: the circuit is unchanged, only its history entries are
 * appended, if its version is still the one read), its transitions as a JSON array of `[from, to, reason, at]` (plus the detail's JSON text as a
 * fifth member when it has one: transition-detail.ts), its `open_until` while
 * open (`''` otherwise: the circuit leaves `due`), the change of its caller table (`caller-hash.ts`; `''`: none)
 * and its history entries (APPEND_HISTORY; `''`: none). The entries are appended only when the
 * whole write commits, in the same atomic run: a write that loses the compare-and-set appends
 * nothing, and its retry appends the entries of the steps as they ran again. A circuit created
 * by the write starts with an empty history (a stream left by a build that did not delete it is dropped).
 * Answers `{1, v1, id1, v2, id2, ...}`, or on a conflict `{0, v1, id1, json1, callers1, ...}`: the
 * stored state of every circuit named (`0`, `0`, `''` when absent; `callers` the `HGETALL` of its
 * caller table), so a retry needs no read;
 * or `{-1}` when the store's epoch is not the writer's (emptied since: see SYNC_SCRIPT).
 * A stored `id` that is not a number (a corrupt hash) is replaced by a new one.
 * The message published carries the version read and the caller delta after the JSON:
 * `<version>\n<id>\n<name>\n<json>\n<version read>\n<delta>` (JSON has no raw newline); an
 * unchanged circuit publishes nothing and keeps its version.
 * Circuits leave `due` last, in one ZREM: a ZREM that empties the set deletes it, and in a
 * Cluster slot that is migrating a later ZADD to the deleted key would be refused mid-script
 * ("non local key"), after part of the script ran.
 */
export const CAS_SCRIPT = `${APPLY_CALLERS}${APPEND_HISTORY}
if redis.call('GET', KEYS[6]) ~= ARGV[3] then return {-1} end
local maxlen, maxAgeMs = ARGV[5], tonumber(ARGV[6])
local n = (#ARGV - 6) / 7
for i = 1, n do
  local v = redis.call('HGET', KEYS[4 + 4 * i], 'v') or '0'
  if v ~= ARGV[7 + 7 * (i - 1) + 1] then
    local out = {0}
    for j = 1, n do
      local cur = redis.call('HMGET', KEYS[4 + 4 * j], 'v', 'id', 'c')
      out[#out + 1] = cur[1] or '0'
      out[#out + 1] = cur[2] or '0'
      out[#out + 1] = cur[3] or ''
      out[#out + 1] = redis.call('HGETALL', KEYS[6 + 4 * j])
    end
    return out
  end
end
local out = {1}
local leaving = {}
for i = 1, n do
  local base = 7 + 7 * (i - 1)
  local name, json = ARGV[base], ARGV[base + 2]
  local key, events, history = KEYS[4 + 4 * i], KEYS[5 + 4 * i], KEYS[7 + 4 * i]
  if json == '' then
    local cur = redis.call('HMGET', key, 'v', 'id')
    appendHistory(history, ARGV[base + 6], maxlen, maxAgeMs)
    out[#out + 1] = cur[1]
    out[#out + 1] = cur[2]
  else
    local id = redis.call('HGET', key, 'id')
    if not tonumber(id) then
      local now = redis.call('TIME')
      local n = math.max((tonumber(redis.call('GET', KEYS[1])) or 0) + 1, (tonumber(now[1]) - ${ID_EPOCH_SECONDS}) * 1000000 + tonumber(now[2]))
      redis.call('SET', KEYS[1], string.format('%.0f', n))
      id = string.format('%.0f', n * ${SHARDS} + tonumber(ARGV[4])) -- never tostring: it keeps 14 digits only
      redis.call('ZADD', KEYS[3], id, name)
    end
    if ARGV[base + 1] == '0' then redis.call('DEL', history) end
    appendHistory(history, ARGV[base + 6], maxlen, maxAgeMs)
    local v = redis.call('INCR', KEYS[2])
    redis.call('HSET', key, 'v', v, 'id', id, 'c', json)
    applyCallers(key, KEYS[6 + 4 * i], ARGV[base + 5])
    if ARGV[base + 4] ~= '' then redis.call('ZADD', KEYS[7], ARGV[base + 4], name) else leaving[#leaving + 1] = name end
    local transitions = cjson.decode(ARGV[base + 3])
    for _, t in ipairs(transitions) do
      local seq = redis.call('INCR', KEYS[4])
      redis.call('LPUSH', events, cjson.encode(t))
      if t[5] then
        redis.call('XADD', KEYS[5], 'MAXLEN', '~', ${STREAM_MAX_LENGTH}, seq .. '-0',
          'circuit', name, 'from', t[1], 'to', t[2], 'reason', t[3], 'at', t[4], 'detail', t[5])
      else
        redis.call('XADD', KEYS[5], 'MAXLEN', '~', ${STREAM_MAX_LENGTH}, seq .. '-0',
          'circuit', name, 'from', t[1], 'to', t[2], 'reason', t[3], 'at', t[4])
      end
    end
    if #transitions > 0 then redis.call('LTRIM', events, 0, ${EVENTS_PER_CIRCUIT - 1}) end
    redis.call(ARGV[1], ARGV[2], v .. '\\n' .. id .. '\\n' .. name .. '\\n' .. json .. '\\n' .. ARGV[base + 1] .. '\\n' .. ARGV[base + 5])
    out[#out + 1] = v
    out[#out + 1] = id
  end
end
if #leaving > 0 then redis.call('ZREM', KEYS[7], unpack(leaving)) end
return out
`;

/**
 * One circuit as a write reads it, atomically: `{v, id, c, callers}` (`callers` the `HGETALL` of
 * its caller table). KEYS: `c:<name>`, `k:<name>`.
 */
export const READ_SCRIPT = `
local cur = redis.call('HMGET', KEYS[1], 'v', 'id', 'c')
return {cur[1] or false, cur[2] or false, cur[3] or false, redis.call('HGETALL', KEYS[2])}
`;

/**
 * Remove a circuit, its events, its caller table and its history. KEYS (its shard's): `c:<name>`, `e:<name>`, index, version, epoch, due, `k:<name>`, `h:<name>`.
 * ARGV: the publish command and channel, name, the writer's epoch. Answers the version of the deletion, 0 if
 * unknown, -1 when the store's epoch is not the writer's.
 */
export const DELETE_SCRIPT = `
if redis.call('GET', KEYS[5]) ~= ARGV[4] then return -1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local id = redis.call('HGET', KEYS[1], 'id') or '0'
redis.call('DEL', KEYS[1], KEYS[2], KEYS[7], KEYS[8])
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('ZREM', KEYS[6], ARGV[3])
local v = redis.call('INCR', KEYS[4])
redis.call(ARGV[1], ARGV[2], v .. '\\n' .. id .. '\\n' .. ARGV[3] .. '\\n')
return v
`;

/**
 * A shard's epoch: a random id written once into an empty shard, so a host can tell that
 * the store it writes to is still the one it read (a FLUSHALL, or a Redis restarted without
 * its data, removes it). KEYS: epoch, seq, version. ARGV: the epoch the host holds (`''` at
 * start), a new random epoch, the highest transition number of the shard and the highest
 * version the host has seen.
 * Adopts the stored epoch, or writes the new one when there is none; then raises `seq` and
 * `version` to at least the host's figures, plus a margin of 1,000 transitions and 1,000,000
 * versions when the epoch is not the one the host held (the store was emptied), so transition
 * numbers keep increasing for every event stream and versions for every host's cache, even
 * when other hosts saw a little more than this one. Answers the epoch in force.
 */
export const SYNC_SCRIPT = `
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  epoch = ARGV[2]
  redis.call('SET', KEYS[1], epoch)
end
local seqFloor, versionFloor = tonumber(ARGV[3]), tonumber(ARGV[4])
if ARGV[1] ~= '' and epoch ~= ARGV[1] then
  seqFloor, versionFloor = seqFloor + ${RESET_SEQ_MARGIN}, versionFloor + ${RESET_VERSION_MARGIN}
end
for i, floor in ipairs({seqFloor, versionFloor}) do
  if (tonumber(redis.call('GET', KEYS[i + 1])) or 0) < floor then redis.call('SET', KEYS[i + 1], floor) end
end
return epoch
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
