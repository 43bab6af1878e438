/**
 * Every built-in default of a circuit's policy, once, with its unit. The config file
 * (`circuit_defaults`, `upstreams.*`), the HTTP API (merge patches, the wire mapping) and
 * the client's local breakers all read them here. See docs/api.md "Policy fields".
 */
// No type import here: `policy.ts` imports this file, and checks there that `circuit` is a whole `CircuitPolicy`.
export const POLICY_DEFAULTS = Object.freeze({
  /** A circuit's policy when nothing sets a field (the config's `circuit_defaults`). */
  circuit: Object.freeze({
    failureThreshold: 5, // consecutive failures
    timeoutSeconds: 30, // 30 s open time
    halfOpenMaxCalls: 1, // probes in flight at once
    successThreshold: 1, // successful probes in a row
    window: null,
    backoff: null,
    forcedState: null,
    throttle: null, // soft throttling off
  }),
  /** A proxy node's circuit (`upstreams.<name>.failure_threshold`); its other fields as `circuit`. */
  upstreamFailureThreshold: 3, // consecutive failures
  /** How long an admitted half-open probe holds its slot without reporting. */
  probeLeaseSeconds: 10, // 10 s
  /** Members a `window` leaves out. */
  window: Object.freeze({
    /** A time window's minimum calls; a count window's is its size. */
    timeMinimumCalls: 10, // outcomes
    failureRateThreshold: 50, // percent
    slowCallRateThreshold: 100, // percent
  }),
  /**
   * Members a `throttle` leaves out: the SRE book's K = 2; 60 s of history (the book keeps
   * two minutes, gRPC's throttler 30 s; see `throttle.ts`).
   */
  throttle: Object.freeze({
    k: 2, // requests may reach k times the accepts
    windowSeconds: 60, // 60 s
  }),
  /** Members a `quorum` leaves out (issue 17). */
  quorum: Object.freeze({
    windowSeconds: 60, // 60 s: how far back a caller's last failure counts
    maxCallers: 1_000, // callers remembered per circuit
  }),
  /** The outcome kinds' rules when a policy sets none (issue 29, docs/api.md "Outcome kinds"). */
  kinds: Object.freeze({
    countAs: Object.freeze({}),
    minDeadlineMs: 1_000 as number | null, // 1 s: a caller's deadline this long gave the dependency a fair chance
    maxRetryAfterSeconds: 300, // 5 min: the longest cool-down a dependency may ask for
    throttleScope: null as 'circuit' | 'caller' | null, // by the quorum: caller with one, circuit without
  }),
  /** Members a `ramp` leaves out (issue 29). */
  ramp: Object.freeze({
    startPercent: 10, // percent of calls admitted when the ramp begins
  }),
  /** Members a `backoff` leaves out: doubling, capped at 300 s (APISIX's `max_breaker_sec` default) or the base open time if longer. */
  backoff: Object.freeze({
    multiplier: 2, // times the previous open time
    maxTimeoutSeconds: 300, // 300 s
  }),
});
