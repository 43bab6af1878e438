import type { Circuit, Transition } from '../domain/circuit.js';
import type { ProxyHooks } from '../proxy/proxy-call.js';
import type { BreakerObserver } from '../service/breaker-observer.js';
import type { SnapshotReader } from '../store/snapshot-reader.js';
import type { TransitionReader } from '../store/transition-reader.js';
import { clusterCountersClient } from './cluster-metrics.js';
import { EventHub } from './event-hub.js';
import { Metrics } from './metrics.js';

/** What createApp needs for /metrics, /events/stream and /dashboard. */
export interface Observability {
  /** Absent with `metrics.enabled: false`: no /metrics, and no counting on the hot path. */
  readonly metrics?: Metrics;
  readonly hub: EventHub;
  readonly transitions: TransitionReader;
  /** For the breaker service: counts (when metrics are on) and wakes the event hub. */
  readonly observer: BreakerObserver;
  readonly proxyHooks?: ProxyHooks;
  /** Heartbeat of /events/stream; tests shorten it. */
  readonly heartbeatMs?: number;
  /** Unsent bytes one event stream may hold before it is destroyed (`events.max_stream_buffer_bytes`). */
  readonly maxStreamBufferBytes?: number;
}

export interface ObservabilityOptions {
  /** The store's readers (SQLite: `sqliteReaders`; Redis: its feed and mirror); `snapshot` is only called with metrics on. */
  readonly readers: { readonly transitions: TransitionReader; readonly snapshot: () => SnapshotReader };
  readonly clock: () => number;
  readonly metricsEnabled: boolean;
  readonly maxCircuits: number;
  readonly maxStreams: number;
  /** A node:cluster worker: counters are summed across workers by the primary. */
  readonly clustered?: boolean;
  /** Called on each transition this process records (a cluster worker tells its siblings). */
  readonly onTransition?: () => void;
  readonly heartbeatMs?: number;
  readonly maxStreamBufferBytes?: number;
  /** The event hub's read of the transitions table (`events.poll_ms`). */
  readonly pollMs?: number;
}

/** Build the metrics registry and the event hub over the store's readers. */
export function createObservability(options: ObservabilityOptions): Observability {
  const transitions = options.readers.transitions;
  const hub = new EventHub({ log: transitions, maxStreams: options.maxStreams, pollMs: options.pollMs });
  let metrics: Metrics | undefined;
  if (options.metricsEnabled) {
    const snapshot = options.readers.snapshot();
    metrics = new Metrics({ snapshot, maxCircuits: options.maxCircuits, clock: options.clock });
    if (options.clustered) metrics.clusterCounters = clusterCountersClient(metrics.counters);
  }
  const m = metrics;
  const observer: BreakerObserver = {
    transition(circuit: Circuit, t: Transition) {
      m?.transition(circuit, t);
      hub.nudge();
      options.onTransition?.();
    },
    outcome: m ? (c, success, durationMs, kind) => m.outcome(c, success, durationMs, kind) : () => {},
    rejected: m ? (c) => m.rejected(c) : () => {},
  };
  const { heartbeatMs, maxStreamBufferBytes } = options;
  return { metrics, hub, transitions, observer, proxyHooks: metrics, heartbeatMs, maxStreamBufferBytes };
}
