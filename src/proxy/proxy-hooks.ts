import type { ShedReason } from './overload/concurrency-gate.js';

/**
 * What the proxy reports as it works (metrics count these). Optional in the proxy's deps;
 * a node is `null` when no node answered.
 */
export interface ProxyHooks {
  /** One proxied request finished its head: the status sent to the caller and who answered. */
  proxyRequest(
    upstream: string,
    node: { readonly id: string; readonly dc: string; readonly local: boolean } | null,
    status: number,
    durationMs: number,
  ): void;
  /** A proxied request ended in a problem document (`error` is what was thrown). */
  proxyError(upstream: string, error: unknown, durationMs: number): void;
  /** A fallback answer was served instead of a node's. */
  proxyFallback(upstream: string, kind: 'stale' | 'static'): void;
  /** An upstream entered (`true`) or left panic (`panic_threshold_percent`); optional. */
  proxyPanic?(upstream: string, panic: boolean): void;
  /** One active health check of a node. */
  healthCheck(upstream: string, node: string, result: 'success' | 'failure'): void;
  /** A request refused a concurrency slot (`circuitlog_proxy_shed_total{upstream, reason}`). */
  proxyShed?(upstream: string, reason: ShedReason): void;
  /** A retry on another node, sent or refused by the budget (`circuitlog_proxy_retries_total{upstream, result}`). */
  proxyRetry?(upstream: string, result: 'sent' | 'budget_exhausted'): void;
  /** A caller that stopped reading was cut off after `send_timeout_ms` (`circuitlog_proxy_send_timeouts_total{upstream}`). */
  proxySendTimeout?(upstream: string): void;
  /** Called once with a reader of every limited upstream's limit and requests in flight (for the gauges). */
  proxyConcurrency?(read: () => readonly UpstreamConcurrency[]): void;
}

/** One upstream's concurrency now: its limit (null: none) and its requests (and tunnels) holding a slot. */
export interface UpstreamConcurrency {
  readonly upstream: string;
  readonly kind: 'fixed' | 'adaptive' | null;
  readonly limit: number | null;
  readonly inFlight: number;
}

/** A node as the hooks see it. */
export type ReportedNode = { readonly id: string; readonly dc: string; readonly local: boolean };

/** For the hooks: which upstream a request was for, who answered and with what status. */
export interface Report {
  upstream?: string;
  node: ReportedNode | null;
  status: number;
}

/** Note who answered and with what status (a no-op without hooks). */
export function report(r: Report | null, node: ReportedNode | null, status: number): void {
  if (r === null) return;
  r.node = node;
  r.status = status;
}

/**
 * Run one proxied request (HTTP or WebSocket) under the hooks: `proxyRequest` with the status
 * sent (or `statusOf` the result), `proxyError` with what was thrown; only once the upstream is known.
 */
export async function reported<T>(
  hooks: ProxyHooks,
  run: (r: Report) => Promise<T>,
  statusOf: (result: T) => number,
): Promise<T> {
  const started = performance.now();
  const r: Report = { node: null, status: 0 };
  try {
    const result = await run(r);
    if (r.upstream !== undefined)
      hooks.proxyRequest(r.upstream, r.node, r.status || statusOf(result), performance.now() - started);
    return result;
  } catch (error) {
    if (r.upstream !== undefined) hooks.proxyError(r.upstream, error, performance.now() - started);
    throw error;
  }
}
