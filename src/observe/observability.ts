import type Database from 'better-sqlite3';
import type { Circuit, Transition } from '../domain/circuit.js';
import type { ProxyHooks } from '../proxy/proxy-hooks.js';
import type { BreakerObserver } from '../service/breaker-observer.js';
import { CircuitSnapshot } from '../store/circuit-snapshot.js';
import { TransitionLog } from '../store/transition-log.js';
import { clusterCountersClient } from './cluster-metrics.js';
import { EventHub } from './event-hub.js';
import { Metrics } from './metrics.js';

/** What createApp needs for /metrics, /events/stream and /dashboard. */
export interface Observability {
  /** Absent with `metrics.enabled: false`: no /metrics, and no counting on the hot path. */
  readonly metrics?: Metrics;
  readonly hub: EventHub;
  readonly transitions: TransitionLog;
  /** For the breaker service: counts (when metrics are on) and wakes the event hub. */
  readonly observer: BreakerObserver;
  readonly proxyHooks?: ProxyHooks;
  /** Heartbeat of /events/stream; tests shorten it. */
  readonly heartbeatMs?: number;
  /** Writes queued for one stream before it is cut off; tests lower it. */
  readonly maxQueuedWrites?: number;
}

export interface ObservabilityOptions {
  readonly db: Database.Database;
  readonly clock: () => number;
  readonly metricsEnabled: boolean;
  readonly maxCircuits: number;
  readonly maxStreams: number;
  /** A node:cluster worker: counters are summed across workers by the primary. */
  readonly clustered?: boolean;
  readonly heartbeatMs?: number;
  readonly maxQueuedWrites?: number;
}

/** Build the metrics registry and the event hub over one database connection. */
export function createObservability(options: ObservabilityOptions): Observability {
  const transitions = new TransitionLog(options.db);
  const hub = new EventHub({ log: transitions, maxStreams: options.maxStreams });
  let metrics: Metrics | undefined;
  if (options.metricsEnabled) {
    metrics = new Metrics({ snapshot: new CircuitSnapshot(options.db), maxCircuits: options.maxCircuits, clock: options.clock });
    if (options.clustered) metrics.clusterCounters = clusterCountersClient(metrics.counters);
  }
  const m = metrics;
  const observer: BreakerObserver = {
    transition(circuit: Circuit, t: Transition) {
      m?.transition(circuit, t);
      hub.nudge();
    },
    outcome: m ? (c, success, durationMs) => m.outcome(c, success, durationMs) : () => {},
    rejected: m ? (c) => m.rejected(c) : () => {},
  };
  const { heartbeatMs, maxQueuedWrites } = options;
  return { metrics, hub, transitions, observer, proxyHooks: metrics, heartbeatMs, maxQueuedWrites };
}
