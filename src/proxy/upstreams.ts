import { upstreamPolicy, type UpstreamConfig } from '../config.js';
import { configure, newCircuit, type CircuitPolicy } from '../domain/circuit.js';
import { nodeCircuitName } from '../domain/circuit-name.js';
import type { CircuitStore } from '../store/circuit-store.js';
import { configureHistory } from '../service/breaker-service.js';
import { credentialFields } from './cache-rules.js';
import { Coalescer } from './coalesce.js';
import { concurrencySettings, retryBudgetSettings } from './overload/overload-settings.js';
import { UpstreamOverload } from './overload/upstream-overload.js';
import { StaleCache } from './stale-cache.js';

/** A configured node with its circuit name and where to send requests. */
export interface ProxyNode {
  readonly id: string;
  readonly dc: string;
  /** `<upstream>/<node-id>`. */
  readonly circuit: string;
  readonly origin: string;
  /** The node URL's path without a trailing slash ('' for the root). */
  readonly basePath: string;
  readonly local: boolean;
}

/** An upstream group at run time: nodes in DC groups (local first), counters, caches. */
export interface Upstream {
  readonly name: string;
  readonly config: UpstreamConfig;
  /** The policy of its node circuits, from the upstream's config block. */
  readonly settings: CircuitPolicy;
  /** `{ create: settings, caller }`, made once: passed to every `breaker.record` of a node. */
  readonly recordOptions: { readonly create: CircuitPolicy; readonly caller?: string };
  readonly nodes: readonly ProxyNode[];
  /** Local DC first, then the other DCs in the order they first appear in the config. */
  readonly groups: readonly (readonly ProxyNode[])[];
  /** Config `failure_statuses`: when set, the only statuses that are failures; null: the table decides (`answerKind`, failover.ts). */
  readonly failureStatuses: ReadonlySet<number> | null;
  readonly stale: StaleCache | null;
  /** With `coalesce.enabled`: the calls identical concurrent reads wait on. */
  readonly coalescer: Coalescer | null;
  /** Round-robin position per group. */
  readonly cursors: number[];
  /** Calls (and WebSocket tunnels) holding a concurrency slot. */
  inFlight: number;
  /** Its concurrency limit (fixed or adaptive) and retry budget. */
  readonly overload: UpstreamOverload;
  /** A caller was cut off by `send_timeout_ms` (counted: circuitlog_proxy_send_timeouts_total). */
  sendTimedOut: () => void;
}

/** Build the run-time upstreams from the parsed config; `caller` (config `instance_id`) names this proxy on its node outcomes. */
export function buildUpstreams(
  upstreams: Record<string, UpstreamConfig>,
  localDc: string,
  caller?: string,
  clock: () => number = Date.now,
): Map<string, Upstream> {
  const out = new Map<string, Upstream>();
  for (const [name, config] of Object.entries(upstreams)) {
    const nodes = config.nodes.map((n): ProxyNode => {
      const url = new URL(n.url);
      return {
        id: n.id,
        dc: n.dc,
        circuit: nodeCircuitName(name, n.id),
        origin: url.origin,
        basePath: url.pathname.replace(/\/+$/, ''),
        local: n.dc === localDc,
      };
    });
    const dcs = [...new Set(nodes.map((n) => n.dc))].sort((a, b) => Number(b === localDc) - Number(a === localDc));
    const groups = dcs.map((dc) => nodes.filter((n) => n.dc === dc));
    const fb = config.fallback;
    const settings = upstreamPolicy(config);
    const credentials = credentialFields(config.credential_headers);
    out.set(name, {
      name,
      config,
      settings,
      recordOptions: caller === undefined ? { create: settings } : { create: settings, caller },
      nodes,
      groups,
      failureStatuses: config.failure_statuses === undefined ? null : new Set(config.failure_statuses),
      stale:
        fb?.stale_seconds === undefined
          ? null
          : new StaleCache({
              maxAgeMs: fb.stale_seconds * 1000,
              maxEntryBytes: fb.stale_max_body_bytes,
              maxTotalBytes: fb.stale_max_total_bytes,
              credentials,
            }),
      coalescer: config.coalesce.enabled
        ? new Coalescer({
            maxWaiters: config.coalesce.max_waiters,
            maxBodyBytes: config.coalesce.max_body_bytes,
            credentials,
          })
        : null,
      cursors: groups.map(() => 0),
      inFlight: 0,
      overload: new UpstreamOverload(
        name,
        concurrencySettings(config),
        retryBudgetSettings(config.retry_budget),
        clock,
      ),
      sendTimedOut: () => {},
    });
  }
  return out;
}

/**
 * Create every node circuit that does not exist yet, and bring the policy of existing
 * ones in line with the config; state (open, failure count) is kept across restarts. A change
 * is a `configure` entry in the circuit's history (issue 31), as a PATCH's is.
 */
export function ensureNodeCircuits(store: CircuitStore, upstreams: Iterable<Upstream>, now: number): Promise<void> {
  const written: unknown[] = []; // SQLite writes here and now (and throws here); an asynchronous store's writes are awaited together
  for (const u of upstreams) {
    const s = u.settings;
    for (const node of u.nodes) {
      written.push(
        store.apply(
          node.circuit,
          (c) => {
            if (c === null) return { circuit: newCircuit(node.circuit, s, now), transitions: [] };
            return configure(c, s, now);
          },
          configureHistory(now, undefined),
        ),
      );
    }
  }
  return Promise.all(written).then(() => {});
}
