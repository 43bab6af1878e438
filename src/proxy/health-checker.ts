import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { UpstreamConfig } from '../config.js';
import type { BreakerService } from '../service/breaker-service.js';
import type { ProxyHooks } from './proxy-call.js';
import type { UpstreamClient } from './upstream-client.js';
import { buildUpstreams, type ProxyNode, type Upstream } from './upstreams.js';

/** Active health checks; main.ts starts them with the server and stops them on shutdown. */
export interface HealthChecker {
  start(): void;
  stop(): void;
  /** One round over every node of every upstream with checks enabled. */
  checkOnce(): Promise<void>;
}

export interface HealthCheckerDeps {
  readonly upstreams: Record<string, UpstreamConfig>;
  readonly localDc: string;
  /** Config `instance_id`: health-check outcomes are this proxy's too. */
  readonly instanceId?: string;
  readonly breaker: BreakerService;
  readonly client: UpstreamClient;
  readonly logger: Logger;
  readonly hooks?: ProxyHooks;
}

/** One `GET <node><path>` within the check's timeout: healthy on a 2xx. */
async function probe(deps: HealthCheckerDeps, upstream: Upstream, node: ProxyNode): Promise<boolean> {
  const hc = upstream.config.health_check;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), hc.timeout_ms);
  try {
    const res = await deps.client.request({
      origin: node.origin,
      path: node.basePath + hc.path,
      method: 'GET',
      headers: { 'user-agent': 'circuitlog-health-check', 'x-forwarded-dc': deps.localDc },
      body: null,
      signal: controller.signal,
      bodyTimeoutMs: hc.timeout_ms,
    });
    discardBody(res.body);
    return res.status >= 200 && res.status < 300;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The seed's active layer: `GET <node><path>` every `interval_ms`. A failure counts toward
 * the node's circuit, so a node that dies while idle opens before a client reaches it; a
 * healthy answer closes a half-open node, or an open one whose open time has passed.
 * A healthy answer leaves a closed node's failure count alone: only traffic resets it.
 */
export function createHealthChecker(deps: HealthCheckerDeps): HealthChecker {
  const upstreams = [...buildUpstreams(deps.upstreams, deps.localDc, deps.instanceId).values()].filter(
    (u) => u.config.health_check.enabled,
  );
  const checking = new Set<string>();
  const timers: NodeJS.Timeout[] = [];

  async function checkNode(upstream: Upstream, node: ProxyNode): Promise<void> {
    if (checking.has(node.circuit)) return; // the previous round's probe is still out
    checking.add(node.circuit);
    try {
      const circuit = await deps.breaker.get(node.circuit); // also turns an expired open into half-open
      if (circuit?.state === 'open') return; // inside its open time: leave it alone
      const healthy = await probe(deps, upstream, node);
      deps.hooks?.healthCheck(upstream.name, node.id, healthy ? 'success' : 'failure');
      const rules = upstream.recordOptions;
      if (!healthy) {
        deps.logger.info(
          { event: 'health_check_failed', upstream: upstream.name, node: node.id },
          `${node.circuit}: health check failed`,
        );
        deps.breaker.record(node.circuit, { success: false, caller: rules.caller }, rules);
      } else if (circuit !== null && circuit.state === 'half_open') {
        deps.breaker.record(node.circuit, { success: true, caller: rules.caller }, rules);
      }
    } catch (error) {
      deps.logger.error(
        { event: 'health_check_error', circuit: node.circuit, err: error },
        'health check bookkeeping failed',
      );
    } finally {
      checking.delete(node.circuit);
    }
  }

  const checkUpstream = (u: Upstream) => Promise.all(u.nodes.map((n) => checkNode(u, n))).then(() => {});

  return {
    start() {
      for (const u of upstreams) {
        void checkUpstream(u);
        const timer = setInterval(() => void checkUpstream(u), u.config.health_check.interval_ms);
        timer.unref();
        timers.push(timer);
      }
    },
    stop() {
      for (const timer of timers.splice(0)) clearInterval(timer);
    },
    async checkOnce() {
      await Promise.all(upstreams.map(checkUpstream));
    },
  };
}

/** Throw away a check's answer body, keeping the connection reusable. */
function discardBody(body: Readable): void {
  const dump = (body as { dump?: (opts?: { limit: number }) => Promise<void> }).dump;
  if (typeof dump === 'function')
    dump.call(body, { limit: 256 * 1024 }).catch(() => {}); // 256 KiB, then close the socket
  else body.resume();
}
