import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context, Hono } from 'hono';
import type { Logger } from 'pino';
import type { UpstreamConfig } from '../config.js';
import type { BreakerService, Clock } from '../service/breaker-service.js';
import type { CircuitStore } from '../store/circuit-store.js';
import { contextRequestId } from '../request-id.js';
import { createProxyHandler, type ProxyHandler } from './proxy-handler.js';
import { parseProxyTarget, type ProxyHooks, type UpstreamConcurrency } from './proxy-call.js';
import { createUpgradeHandler, type UpgradeHandler } from './upgrade.js';
import type { UpstreamClient } from './upstream-client.js';
import { buildUpstreams, ensureNodeCircuits, type Upstream } from './upstreams.js';
import { PanicWatches, reportPanic } from './node-picker.js';
import { unknownUpstream } from './proxy-errors.js';

/** What createApp needs to serve /proxy. */
export interface ProxyOptions {
  readonly localDc: string;
  readonly upstreams: Record<string, UpstreamConfig>;
  /** Config `instance_id`: the caller this proxy names on its node outcomes. */
  readonly instanceId?: string;
  readonly client: UpstreamClient;
  /** Counter hook: one call per follower answered from a coalesced call (`circuitlog_proxy_coalesced_total{upstream}`). */
  readonly onCoalesced?: (upstream: string) => void;
}

export interface ProxyRouteDeps {
  readonly proxy: ProxyOptions;
  readonly breaker: BreakerService;
  readonly store: CircuitStore;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly proxyOnStorageOutage?: 'fail_open' | 'refuse';
  readonly hooks?: ProxyHooks;
}

export interface ProxyRoutes {
  readonly handler: ProxyHandler;
  readonly upgrade: UpgradeHandler;
  /** Resolves once the node circuits are stored (at once on SQLite); the server listens after it. */
  readonly ready: Promise<void>;
  /** Every upstream's concurrency limit and requests in flight now (the dashboard). */
  readonly concurrency: () => UpstreamConcurrency[];
}

/**
 * Mount `/proxy/:upstream/*` for every method. No bearer token and no body limit: this is
 * the data plane, and callers' Authorization headers belong to the upstream.
 */
export function registerProxyRoutes<E extends object>(app: Hono<E>, deps: ProxyRouteDeps): ProxyRoutes {
  const upstreams = buildUpstreams(deps.proxy.upstreams, deps.proxy.localDc, deps.proxy.instanceId, deps.clock);
  watchOverload(upstreams, deps.hooks);
  const ready = ensureNodeCircuits(deps.store, upstreams.values(), deps.clock());
  const panics = new PanicWatches(
    upstreams.values(),
    deps.breaker,
    deps.clock,
    reportPanic(deps.logger, deps.hooks, upstreams.values()),
  );
  const handler = createProxyHandler({
    panics,
    upstreams,
    breaker: deps.breaker,
    client: deps.proxy.client,
    clock: deps.clock,
    logger: deps.logger,
    localDc: deps.proxy.localDc,
    failOpen: deps.proxyOnStorageOutage !== 'refuse',
    hooks: deps.hooks,
    onCoalesced: deps.proxy.onCoalesced,
  });
  // One wildcard: the handler reads the upstream from the raw target itself, so a target
  // that URL normalisation moved (`/proxy/users/..` -> `/proxy/`) still reaches the check.
  // The server sends `/proxy/…` to the raw listener; this route takes the rest (`/proxy`, an
  // absolute-form target), on Node's request and response like it: the proxy has one output path.
  app.all('/proxy/*', (c) => {
    const { incoming, outgoing } = nodeBindings(c);
    if (incoming === undefined || outgoing === undefined)
      throw new Error('the proxy answers on a node:http server only');
    return handler({ method: c.req.method, requestId: contextRequestId(c), incoming, outgoing });
  });
  const upgrade = createUpgradeHandler({
    upstreams,
    breaker: deps.breaker,
    clock: deps.clock,
    logger: deps.logger,
    localDc: deps.proxy.localDc,
    failOpen: deps.proxyOnStorageOutage !== 'refuse',
    hooks: deps.hooks,
    panics,
  });
  return { handler, upgrade, ready, concurrency: () => concurrencyOf(upstreams) };
}

/** Overload control reports to the hooks: refusals, retries and send timeouts counted, limits and in-flight read at scrape time. */
function watchOverload(upstreams: ReadonlyMap<string, Upstream>, hooks: ProxyHooks | undefined): void {
  if (hooks === undefined) return;
  for (const u of upstreams.values()) {
    u.overload.hooks = {
      shed: (name, reason) => hooks.proxyShed?.(name, reason),
      retry: (name, result) => hooks.proxyRetry?.(name, result),
    };
    u.sendTimedOut = () => hooks.proxySendTimeout?.(u.name);
  }
  hooks.proxyConcurrency?.(() => concurrencyOf(upstreams));
}

/** Every upstream's limit and requests in flight now (the gauges and the dashboard). */
export function concurrencyOf(upstreams: ReadonlyMap<string, Upstream>): UpstreamConcurrency[] {
  return [...upstreams.values()].map((u) => ({
    upstream: u.name,
    kind: u.overload.gate?.settings.limit ?? null,
    limit: u.overload.gate?.limit ?? null,
    inFlight: u.inFlight,
  }));
}

/**
 * Without any upstream configured, `/proxy/<name>/…` is still answered as an unknown
 * upstream, with the hint to set CIRCUITLOG_CONFIG (a new user's first proxied request).
 */
export function registerUnconfiguredProxy<E extends object>(app: Hono<E>): void {
  app.all('/proxy/*', (c) => {
    throw unknownUpstream(parseProxyTarget(c.req.path).upstream, new Map());
  });
}

/** What @hono/node-server passes as `c.env`; absent under `app.request()`. */
function nodeBindings(c: Context): { readonly incoming?: IncomingMessage; readonly outgoing?: ServerResponse } {
  return c.env ?? {};
}
