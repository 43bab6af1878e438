import tls from 'node:tls';
import type { Logger } from 'pino';
import { permanentStartFailure, RedisStartError, speaksPlainRedis } from './start-errors.js';
import type { TlsSocket } from './tls-options.js';
import { newRedisClient, type RedisConnection } from './redis-client.js';

export type { RedisConnection } from './redis-client.js';

export interface ConnectOptions {
  readonly url: string;
  /** Give up connecting at start after this long (the library would retry forever). */
  readonly startTimeoutMs: number;
  /** Fail commands at once while disconnected instead of queueing them (a fast 503). */
  readonly failFastOffline: boolean;
  readonly logger: Logger;
  readonly name: string;
  /** With `rediss://`: the CA, client certificate and server name (`tls-options.ts`); Node's defaults without. */
  readonly tls?: TlsSocket;
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
  const state: StartState = {
    connected: false,
    lastError: undefined,
    permanent: null,
    probedTls: false,
    reported: false,
  };
  const bare = new URL(options.url);
  bare.search = ''; // the tls_* options: in `options.tls`
  const client = newRedisClient({
    url: bare.toString(),
    name: options.name,
    disableOfflineQueue: options.failFastOffline,
    socket: {
      connectTimeout: Math.min(CONNECT_TIMEOUT_MS, options.startTimeoutMs),
      ...(url.protocol === 'rediss:' ? (options.tls ?? { tls: true as const }) : {}),
      ...(options.tlsHost === undefined
        ? {}
        : {
            checkServerIdentity: (_host: string, cert: tls.PeerCertificate) =>
              tls.checkServerIdentity(options.tlsHost!(), cert),
          }),
      reconnectStrategy: (retries: number, cause: Error) => {
        state.lastError = cause;
        if (!state.connected) {
          state.permanent ??= permanentStartFailure(cause, url);
          if (state.permanent !== null || Date.now() + 250 >= deadline) return cause;
        }
        return Math.min(50 * 2 ** Math.min(retries, 5), RECONNECT_MAX_DELAY_MS);
      },
    },
  });
  client.on('error', (error: Error) => onClientError(client, state, url, options, error));
  client.on('ready', () => {
    if (state.reported)
      options.logger.info({ event: 'redis_ready', connection: options.name }, 'Redis connection back');
    state.reported = false;
  });
  try {
    await client.connect();
  } catch (error) {
    client.destroy();
    if (state.permanent !== null) throw new RedisStartError(state.permanent, error);
    throw new Error(String((error as Error).message || state.lastError), { cause: error });
  }
  state.connected = true;
  return client;
}

/** What `connectRedis` knows of its connection so far (shared by its handlers). */
interface StartState {
  connected: boolean;
  lastError: unknown;
  /** Set at start when retrying cannot help (bad credentials, DNS, TLS): stop at once, saying why. */
  permanent: string | null;
  probedTls: boolean;
  reported: boolean;
}

/** The client's 'error' listener: classify start failures, probe a silent TLS port, log each outage once. */
function onClientError(
  client: RedisConnection,
  state: StartState,
  url: URL,
  options: ConnectOptions,
  error: Error,
): void {
  // Without a listener an 'error' event would crash the process; log each outage once.
  state.lastError = error;
  if (!state.connected) state.permanent ??= permanentStartFailure(error, url);
  if (
    !state.connected &&
    !state.probedTls &&
    url.protocol === 'rediss:' &&
    error.constructor.name === 'ConnectionTimeoutError'
  ) {
    state.probedTls = true; // a TLS handshake with no answer: is it a plain-text Redis?
    void speaksPlainRedis(url.hostname, Number(url.port || 6379), 1_000).then((plain) => {
      if (!plain || state.connected) return;
      state.permanent ??=
        'the TLS handshake got no answer, and the port answers in plain text: this Redis does not speak TLS there (use redis://, or its TLS port)';
      client.destroy(); // stop retrying now: connect() rejects, with this reason
    });
  }
  if (!state.connected || state.reported) return;
  state.reported = true;
  options.logger.error(
    { event: 'redis_error', connection: options.name, err: error.message },
    'Redis connection failed; retrying',
  );
}
