import type { HeaderRecord } from './upstream-client.js';
import type { Upstream } from './upstreams.js';

export interface FallbackAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: Buffer;
}

/**
 * Methods that get a fallback: only reads. A stale or static answer stands in for data the
 * caller asked to see; to a POST/PUT/PATCH/DELETE it would claim (with a configured 2xx) a
 * change that never happened, so those get the problem document (502/503/504) instead.
 */
const FALLBACK_METHODS = new Set(['GET', 'HEAD']);

/**
 * What to answer when no node can serve a GET or HEAD: the last good GET answer for the same
 * key (Host, path and query, Vary'd fields) if it may still be served (seed 003: stale data
 * beats a spreading failure; RFC 9111 section 4.2.4 says when it may not), else the
 * configured static response, else null (the caller gets the problem document). HEAD gets
 * the head only.
 */
export function fallbackResponse(
  upstream: Upstream,
  method: string,
  key: string,
  requestHeaders: HeaderRecord,
  now: number,
): FallbackAnswer | null {
  if (!FALLBACK_METHODS.has(method)) return null;
  const entry = upstream.stale?.get(key, requestHeaders, now);
  if (entry) {
    const ageOnArrival = Number(entry.headers.age ?? 0) || 0;
    return {
      status: entry.status,
      headers: {
        ...entry.headers,
        'content-length': String(entry.body.length),
        age: String(ageOnArrival + Math.max(0, Math.floor((now - entry.storedAt) / 1000))), // RFC 9111 section 5.1
        'x-degraded': 'true',
        'x-fallback': 'stale',
      },
      body: entry.body,
    };
  }
  const fixed = upstream.config.fallback?.static;
  if (fixed === undefined) return null;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(fixed.headers)) headers[name.toLowerCase()] = value;
  const body = Buffer.from(fixed.body);
  return {
    status: fixed.status,
    headers: { ...headers, 'content-length': String(body.length), 'x-degraded': 'true', 'x-fallback': 'static' },
    body,
  };
}
