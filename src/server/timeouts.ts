import type { ServerOptions } from 'node:http';
import type { ServerConfig } from '../config.js';

/**
 * How often node:http looks for connections past `headersTimeout`/`requestTimeout`. Node's
 * default is 30 s, on top of a 60 s headers timeout: a slowloris connection lingered 60-90 s.
 */
const CONNECTIONS_CHECK_INTERVAL_MS = 1_000; // 1 s

/** node:http server options for the configured timeouts (config key `server`). */
export function serverTimeoutOptions(config: ServerConfig): ServerOptions {
  return {
    headersTimeout: config.headers_timeout_ms,
    requestTimeout: config.request_timeout_ms,
    keepAliveTimeout: config.keep_alive_timeout_ms,
    connectionsCheckingInterval: CONNECTIONS_CHECK_INTERVAL_MS,
  };
}
