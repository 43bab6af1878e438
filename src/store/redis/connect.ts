import tls from 'node:tls';
import { createClient, type RedisClientType } from '@redis/client';
import type { Logger } from 'pino';
import { permanentStartFailure, speaksPlainRedis } from './start-errors.js';

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
  /** Behind Sentinel's loopback port: the primary's host name, which its TLS certificate must name. */
  readonly tlsHost?: () => string;
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
  const url = new URL(options.url);
  let connected = false;
  let lastError: unknown;
  /** Set at start when retrying cannot help (bad credentials, DNS, TLS): stop at once, saying why. */
  let permanent: string | null = null;
  let probedTls = false;
  const client = createClient({
    url: options.url,
    RESP: 2,
    name: options.name,
    disableOfflineQueue: options.failFastOffline,
    socket: {
      connectTimeout: Math.min(CONNECT_TIMEOUT_MS, options.startTimeoutMs),
      ...(options.tlsHost === undefined
        ? {}
        : {
            checkServerIdentity: (_host: string, cert: tls.PeerCertificate) =>
              tls.checkServerIdentity(options.tlsHost!(), cert),
          }),
      reconnectStrategy: (retries: number, cause: Error) => {
        lastError = cause;
        if (!connected) {
          permanent ??= permanentStartFailure(cause, url);
          if (permanent !== null || Date.now() + 250 >= deadline) return cause;
        }
        return Math.min(50 * 2 ** Math.min(retries, 5), RECONNECT_MAX_DELAY_MS);
      },
    },
  }) as unknown as RedisConnection;
  let reported = false;
  client.on('error', (error: Error) => {
    // Without a listener an 'error' event would crash the process; log each outage once.
    lastError = error;
    if (!connected) permanent ??= permanentStartFailure(error, url);
    if (!connected && !probedTls && url.protocol === 'rediss:' && error.constructor.name === 'ConnectionTimeoutError') {
      probedTls = true; // a TLS handshake with no answer: is it a plain-text Redis?
      void speaksPlainRedis(url.hostname, Number(url.port || 6379), 1_000).then((plain) => {
        if (!plain || connected) return;
        permanent ??=
          'the TLS handshake got no answer, and the port answers in plain text: this Redis does not speak TLS there (use redis://, or its TLS port)';
        client.destroy(); // stop retrying now: connect() rejects, with this reason
      });
    }
    if (!connected || reported) return;
    reported = true;
    options.logger.error(
      { event: 'redis_error', connection: options.name, err: error.message },
      'Redis connection failed; retrying',
    );
  });
  client.on('ready', () => {
    if (reported) options.logger.info({ event: 'redis_ready', connection: options.name }, 'Redis connection back');
    reported = false;
  });
  try {
    await client.connect();
  } catch (error) {
    client.destroy();
    if (permanent !== null) throw new RedisStartError(permanent, error);
    throw new Error(String((error as Error).message || lastError), { cause: error });
  }
  connected = true;
  return client;
}

/** A start that can never succeed as configured: its message says why, for the operator. */
export class RedisStartError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'RedisStartError';
  }
}
