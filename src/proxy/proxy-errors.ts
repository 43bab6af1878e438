/**
 * The proxy's errors, each with its stable code (rendered as a problem document by the HTTP
 * layer: `src/http/problem.ts`). Every error text of `/proxy` lives here once.
 */
import { AppError } from '../domain/errors.js';
import type { ShedReason } from './overload/concurrency-gate.js';
import type { Upstream } from './upstreams.js';

/** Methods the proxy forwards; TRACE and CONNECT are refused (RFC 9110 sections 9.3.6 and 9.3.8). */
export const FORWARDED_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'];

/** The reason an attempt is cancelled when the caller hung up (never counted against a node). */
export const CALLER_GONE = Object.assign(new Error('the caller hung up'), { code: 'CIRCUITLOG_CALLER_GONE' });
/** The reason a detached leader's body is stopped: nobody reads it any more. */
export const NOBODY_READS = Object.assign(new Error('the leader left and no follower waits'), {
  code: 'CIRCUITLOG_CALLER_GONE',
});

export function methodNotForwarded(method: string): AppError {
  return new AppError('METHOD_NOT_ALLOWED', `${method} is not forwarded.`, {
    headers: { allow: FORWARDED_METHODS.join(', ') },
  });
}

export function bulkheadFull(upstream: Upstream, max: number): AppError {
  return new AppError('BULKHEAD_FULL', `'${upstream.name}' already has ${max} requests in flight.`, {
    retryAfterSeconds: 1,
  });
}

/** 503 CONCURRENCY_LIMITED: over the upstream's `concurrency` limit (docs/proxy.md#overload-control-concurrency-limits-and-the-retry-budget). */
export function concurrencyLimited(upstream: Upstream, reason: ShedReason): AppError {
  const limit = upstream.overload.gate?.limit ?? 0;
  const why =
    reason === 'limit'
      ? `already has ${limit} requests in flight, its concurrency limit now`
      : reason === 'queue_full'
        ? `has ${limit} requests in flight and its queue is full`
        : `had no free slot within queue_ms (${upstream.overload.gate?.settings.queueMs ?? 0} ms)`;
  return new AppError('CONCURRENCY_LIMITED', `'${upstream.name}' ${why}; no node was contacted.`, {
    retryAfterSeconds: 1,
    extensions: { limit, reason },
  });
}

export function noNodeAvailable(upstream: Upstream, retryAt: number | null): AppError {
  const detail = `Every node of '${upstream.name}' has an open circuit; no node was contacted.`;
  return new AppError('NO_NODE_AVAILABLE', detail, retryAt === null ? { retryAfterSeconds: 1 } : { retryAt });
}

export function upstreamTimeout(upstream: Upstream): AppError {
  return new AppError(
    'UPSTREAM_TIMEOUT',
    `No node of '${upstream.name}' answered within ${upstream.config.request_timeout_ms} ms.`,
  );
}

export function upstreamUnreachable(upstream: Upstream): AppError {
  return new AppError('UPSTREAM_UNREACHABLE', `No node of '${upstream.name}' could be reached.`);
}

/** The caller fell silent mid-upload: nginx's 408, and the connection closes. */
export function requestBodyTimeout(upstream: Upstream): AppError {
  return new AppError(
    'REQUEST_BODY_TIMEOUT',
    `The request body stopped arriving for ${upstream.config.client_body_timeout_ms} ms; nothing was counted against '${upstream.name}'.`,
    {
      headers: { connection: 'close' },
    },
  );
}

export function upgradeNotSupported(upgrade: string): AppError {
  return new AppError(
    'UPGRADE_NOT_SUPPORTED',
    `Only 'Upgrade: websocket' GET requests under /proxy/<upstream>/ are switched; got '${upgrade.slice(0, 40)}'.`,
  );
}

/** At most this many configured names are listed in a 404 (the detail and the `upstreams` member). */
const LISTED_NAMES = 20;
const NAME_CHARS = 64; // of each listed name

/**
 * The 404 for `/proxy/<name>/…` when no upstream has that name: the detail and the problem's
 * `upstreams` member list the configured names (the first 20, each cut to 64 characters), and
 * with none configured the detail says how to configure one.
 */
export function unknownUpstream(name: string, upstreams: ReadonlyMap<string, unknown>): AppError {
  const names = [...upstreams.keys()].slice(0, LISTED_NAMES).map((n) => n.slice(0, NAME_CHARS));
  const more = upstreams.size > names.length ? ` and ${upstreams.size - names.length} more` : '';
  const asked = `No upstream named '${name.slice(0, 100)}'.`;
  const detail =
    names.length === 0
      ? `${asked} No upstreams are configured: point CIRCUITLOG_CONFIG at a YAML file with an 'upstreams' block (see docs/proxy.md).`
      : `${asked} Configured: ${names.join(', ')}${more}.`;
  return new AppError('UPSTREAM_NOT_FOUND', detail, { extensions: { upstreams: names } });
}
