import type { ProxyHooks } from './proxy-hooks.js';

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
