import type { UpstreamConfig } from '../config.js';
import { nodeCircuitName } from '../domain/circuit-name.js';
import { AppError } from '../domain/errors.js';
import { configure, newCircuit, type Admission, type CircuitPolicy } from '../domain/circuit.js';
import { policyFromWire } from '../policy-schema.js';
import type { BreakerService } from '../service/breaker-service.js';
import type { CircuitStore } from '../store/circuit-store.js';
import { isPromise, type MaybePromise } from '../store/maybe-promise.js';
import { credentialFields } from './cache-rules.js';
import { Coalescer } from './coalesce.js';
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
  /** `{ create: settings }`, made once: passed to every `breaker.record` of a node. */
  readonly recordOptions: { readonly create: CircuitPolicy };
  readonly nodes: readonly ProxyNode[];
  /** Local DC first, then the other DCs in the order they first appear in the config. */
  readonly groups: readonly (readonly ProxyNode[])[];
  readonly failureStatuses: ReadonlySet<number>;
  readonly stale: StaleCache | null;
  /** With `coalesce.enabled`: the calls identical concurrent reads wait on. */
  readonly coalescer: Coalescer | null;
  /** Round-robin position per group. */
  readonly cursors: number[];
  inFlight: number;
}

/** Build the run-time upstreams from the parsed config. */
export function buildUpstreams(upstreams: Record<string, UpstreamConfig>, localDc: string): Map<string, Upstream> {
  const out = new Map<string, Upstream>();
  for (const [name, config] of Object.entries(upstreams)) {
    const nodes = config.nodes.map((n): ProxyNode => {
      const url = new URL(n.url);
      return { id: n.id, dc: n.dc, circuit: nodeCircuitName(name, n.id), origin: url.origin, basePath: url.pathname.replace(/\/+$/, ''), local: n.dc === localDc };
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
      recordOptions: { create: settings },
      nodes,
      groups,
      failureStatuses: new Set(config.failure_statuses),
      stale: fb?.stale_seconds === undefined ? null : new StaleCache({
        maxAgeMs: fb.stale_seconds * 1000,
        maxEntryBytes: fb.stale_max_body_bytes,
        maxTotalBytes: fb.stale_max_total_bytes,
        credentials,
      }),
      coalescer: config.coalesce.enabled ? new Coalescer({ maxWaiters: config.coalesce.max_waiters, maxBodyBytes: config.coalesce.max_body_bytes, credentials }) : null,
      cursors: groups.map(() => 0),
      inFlight: 0,
    });
  }
  return out;
}

/** The policy fields of an upstream block; those it leaves out take the built-in defaults. */
function upstreamPolicy(u: UpstreamConfig): CircuitPolicy {
  return policyFromWire({
    failure_threshold: u.failure_threshold,
    timeout_seconds: u.timeout_seconds,
    half_open_max_calls: u.half_open_max_calls,
    success_threshold: u.success_threshold ?? 1,
    window: u.window ?? null,
    backoff: u.backoff ?? null,
    forced_state: u.forced_state ?? null,
  });
}

/**
 * Create every node circuit that does not exist yet, and bring the policy of existing
 * ones in line with the config; state (open, failure count) is kept across restarts.
 */
export function ensureNodeCircuits(store: CircuitStore, upstreams: Iterable<Upstream>, now: number): MaybePromise<void> {
  const pending: Promise<unknown>[] = [];
  for (const u of upstreams) {
    const s = u.settings;
    for (const node of u.nodes) {
      const done = store.apply(node.circuit, (c) => {
        if (c === null) return { circuit: newCircuit(node.circuit, s, now), transitions: [] };
        return configure(c, s, now);
      });
      if (isPromise(done)) pending.push(done);
    }
  }
  if (pending.length > 0) return Promise.all(pending).then(() => {});
}

export type Pick = { readonly node: ProxyNode } | { readonly node: null; readonly retryAt: number | null };

/**
 * The next node to try: the first group (local DC first) with a node whose circuit
 * admits a call, round-robin inside the group, skipping `tried`. Only the chosen node's
 * circuit is admitted, so a half-open node's probe slot is taken only when it is used.
 */
export function pickNode(upstream: Upstream, breaker: BreakerService, tried: ReadonlySet<ProxyNode> | null, failOpen = true): MaybePromise<Pick> {
  let retryAt = Infinity;
  for (let g = 0; g < upstream.groups.length; g++) {
    const group = upstream.groups[g]!;
    const start = upstream.cursors[g]!;
    upstream.cursors[g] = (start + 1) % group.length;
    for (let k = 0; k < group.length; k++) {
      const node = group[(start + k) % group.length]!;
      if (tried?.has(node)) continue;
      const admission = breaker.check(node.circuit);
      // A check that needs the shared store (Redis: a probe slot, a cache miss) goes on asynchronously.
      if (isPromise(admission)) return pickNodeLater(upstream, breaker, tried, { g, k, start, retryAt, failOpen }, admission);
      if (admission === null || admission.verdict.allowed) return { node };
      retryAt = Math.min(retryAt, admission.verdict.retryAt);
    }
  }
  return { node: null, retryAt: Number.isFinite(retryAt) ? retryAt : null };
}

/** `pickNode` from node `k` of group `g` on, awaiting each check. */
async function pickNodeLater(
  upstream: Upstream,
  breaker: BreakerService,
  tried: ReadonlySet<ProxyNode> | null,
  from: { g: number; k: number; start: number; retryAt: number; failOpen: boolean },
  first: Promise<Admission | null>,
): Promise<Pick> {
  const { g: g0, k: k0, start: start0, failOpen } = from;
  let retryAt = from.retryAt;
  let pending: Promise<Admission | null> | null = first;
  for (let g = g0; g < upstream.groups.length; g++) {
    const group = upstream.groups[g]!;
    let start = start0;
    if (g !== g0) {
      start = upstream.cursors[g]!;
      upstream.cursors[g] = (start + 1) % group.length;
    }
    for (let k = g === g0 ? k0 : 0; k < group.length; k++) {
      const node = group[(start + k) % group.length]!;
      if (pending === null && tried?.has(node)) continue;
      let admission: Admission | null;
      try {
        admission = await (pending ?? breaker.check(node.circuit));
      } catch (error) {
        // The store is unreachable (STORAGE_UNAVAILABLE): fail open to a local node, or refuse.
        if (failOpen && node.local && error instanceof AppError && error.code === 'STORAGE_UNAVAILABLE') return { node };
        throw error;
      } finally {
        pending = null;
      }
      if (admission === null || admission.verdict.allowed) return { node };
      retryAt = Math.min(retryAt, admission.verdict.retryAt);
    }
  }
  return { node: null, retryAt: Number.isFinite(retryAt) ? retryAt : null };
}
