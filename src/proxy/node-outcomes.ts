import type { Circuit, Step } from '../domain/circuit.js';
import type { BreakerService, RecordRules } from '../service/breaker-service.js';
import { capEjection, ejectionLimit, isEjected } from './guard-rails.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/** One upstream's ejection cap, made once: each node's rules for `record` (its peers, the guard over them). */
type EjectionCap = ReadonlyMap<string, RecordRules>;

const caps = new WeakMap<Upstream, EjectionCap | null>();

/** The upstream's cap, or null when `max_ejection_percent` lets every node be opened (today's rules). */
function ejectionCapOf(upstream: Upstream): EjectionCap | null {
  let cap = caps.get(upstream);
  if (cap !== undefined) return cap;
  const limit = ejectionLimit(upstream.nodes.length, upstream.config.max_ejection_percent);
  cap = null;
  if (limit < upstream.nodes.length) {
    const guard = (step: Step, before: Circuit | null, others: readonly (Circuit | null)[]) =>
      capEjection(step, before, others.filter(isEjected).length, limit);
    const { create } = upstream.recordOptions;
    cap = new Map(
      upstream.nodes.map((n) => {
        const peers = upstream.nodes.filter((p) => p !== n).map((p) => p.circuit);
        return [n.circuit, { create, among: { peers, guard } }];
      }),
    );
  }
  caps.set(upstream, cap);
  return cap;
}

/**
 * Record the outcome of one proxied request (HTTP or a WebSocket handshake) on its node,
 * under the upstream's ejection cap: an outcome that could open the node (a failure, or a
 * slow success where the window judges slow calls) is written together with a read of its
 * peers, and a trip past `max_ejection_percent` is withheld (guard-rails.ts). Health checks
 * never come here: a failing check takes a node out whatever the cap says.
 */
export function recordRequestOutcome(
  breaker: BreakerService,
  upstream: Upstream,
  node: ProxyNode,
  success: boolean,
  durationMs: number | undefined,
): void {
  const outcome = { success, durationMs, caller: upstream.recordOptions.caller };
  const cap = ejectionCapOf(upstream);
  if (cap === null || (success && upstream.settings.window?.slowCallDurationMs == null)) {
    void breaker.record(node.circuit, outcome, upstream.recordOptions);
    return;
  }
  void breaker.record(node.circuit, outcome, cap.get(node.circuit));
}
