import { SchemaTooNewError } from '../schema-version.js';
import { RedisStartError } from './start-errors.js';
import type { RedisCommands } from './redis-commands.js';

/**
 * The Redis store's schema version, kept in the key `<prefix>schema`: 1 was the layout before
 * shards (moved at start, `legacy-keys.ts`), 2 is the sharded layout (docs/many-hosts.md), 3 keeps
 * a circuit's caller table in a hash of its own (`caller-hash.ts`; a build of 2 would read circuits
 * without it). A change of the layout (the number of shards, a key's meaning) raises it.
 */
export const REDIS_SCHEMA_VERSION = 3;

/**
 * KEYS: the schema key. ARGV: this build's version. Writes it when the key is missing or holds
 * a lower whole number; answers what the key held (or ARGV[1] when it held nothing).
 */
const CLAIM_SCRIPT = `
local held = redis.call('GET', KEYS[1])
if not held then redis.call('SET', KEYS[1], ARGV[1]) return ARGV[1] end
if string.match(held, '^%d+$') and tonumber(held) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return held
`;

/**
 * At start, before anything else is written: a store a newer build marked is refused
 * (SchemaTooNewError), one that holds no version or an older one is marked with this build's.
 * Answers the store's schema version now. A key that holds no whole number is refused too
 * (Redis' answers are untrusted input).
 */
export async function claimSchema(redis: RedisCommands, prefix: string): Promise<number> {
  const key = `${prefix}schema`;
  const held = await redis.eval<unknown>(CLAIM_SCRIPT, [key], [String(REDIS_SCHEMA_VERSION)]);
  const text = String(held);
  if (typeof held !== 'string' || !/^\d{1,9}$/.test(text))
    throw new RedisStartError(
      `the key '${key}' holds '${text.slice(0, 40)}', not a schema version (a whole number); was it written by another program?`,
      null,
    );
  const found = Number(text);
  if (found > REDIS_SCHEMA_VERSION) throw new SchemaTooNewError(found, REDIS_SCHEMA_VERSION);
  return REDIS_SCHEMA_VERSION;
}
