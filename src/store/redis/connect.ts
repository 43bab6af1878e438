import { createClient, type RedisClientType } from '@redis/client';
import type { Logger } from 'pino';

/** A Redis connection as the store uses it (RESP2: plain arrays, strings and integers). */
export type RedisConnection = RedisClientType<Record<string, never>, Record<string, never>, Record<string, never>, 2>;

export interface ConnectOptions {
  readonly url: string;
  /** Give up connecting at start after this long (the library would retry forever). */
  readonly startTimeoutMs: number;
  /** Fail commands at once while disconnected instead of queueing them (a fast 503). */
  readonly failFastOffline: boolean;
  readonly logger: Logger;
  readonly name: string;
}

const RECONNECT_MAX_DELAY_MS = 1_000; // 1 s: back within a second of Redis returning
const CONNECT_TIMEOUT_MS = 2_000; // 2 s per attempt

/**
 * Open a connection. At start, attempts are bounded by `startTimeoutMs` (the promise
 * rejects); once connected, it reconnects forever, backing off to 1 s between attempts,
 * so the service resumes without a restart when Redis comes back.
 */
export async function connectRedis(options: ConnectOptions): Promise<RedisConnection> {
  const deadline = Date.now() + options.startTimeoutMs;
  let connected = false;
  let lastError: unknown;
  const client = createClient({
    url: options.url,
    RESP: 2,
    name: options.name,
    disableOfflineQueue: options.failFastOffline,
    socket: {
      connectTimeout: Math.min(CONNECT_TIMEOUT_MS, options.startTimeoutMs),
      reconnectStrategy: (retries: number, cause: Error) => {
        lastError = cause;
        if (!connected && Date.now() + 250 >= deadline) return cause;
        return Math.min(50 * 2 ** Math.min(retries, 5), RECONNECT_MAX_DELAY_MS);
      },
    },
  }) as unknown as RedisConnection;
  let reported = false;
  client.on('error', (error: Error) => {
    // Without a listener an 'error' event would crash the process; log each outage once.
    lastError = error;
    if (!connected || reported) return;
    reported = true;
    options.logger.error({ event: 'redis_error', connection: options.name, err: error.message }, 'Redis connection failed; retrying');
  });
  client.on('ready', () => {
    if (reported) options.logger.info({ event: 'redis_ready', connection: options.name }, 'Redis connection back');
    reported = false;
  });
  try {
    await client.connect();
  } catch (error) {
    client.destroy();
    throw new Error(String((error as Error).message || lastError), { cause: error });
  }
  connected = true;
  return client;
}
