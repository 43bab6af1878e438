import { RedisClient, type RedisClientOptions } from '@redis/client';

type None = Record<string, never>;

/**
 * A plain connection as the store uses it (RESP2: plain arrays, strings and integers): only
 * the client's own methods (`sendCommand`, `SUBSCRIBE` and its kin, `connect`, `destroy`,
 * events), no per-command methods (`client.GET`), so the type checker refuses any.
 */
export type RedisConnection = RedisClient<None, None, None, 2, None>;

/** A connection's options, RESP aside (always 2). */
export type ConnectionOptions = Omit<RedisClientOptions<None, None, None, 2, None>, 'RESP'>;

/**
 * A connection, not connected yet, of @redis/client's base class rather than `createClient`'s:
 * `createClient` builds a class with its 800-odd command methods, and one for MULTI, for every
 * distinct configuration (it caches one, compared as JSON, `url` and `name` included), about
 * 20 MiB of short-lived heap each; the two connections a server opens at start lifted its peak
 * RSS by about 40 MiB (docs/operations.md "Limits"). The store sends every command with
 * `sendCommand`, so it needs none of them.
 */
export function newRedisClient(options: ConnectionOptions): RedisConnection {
  return new RedisClient<None, None, None, 2, None>({ ...options, RESP: 2 });
}
