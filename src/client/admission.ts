/**
 * Whether a call may go ahead: decided here on a circuit the trusted local view shows
 * closed, asked of circuitlog otherwise, and of the local breaker while circuitlog is
 * unreachable. A refusal throws.
 */

import { circuitNameProblem } from '../domain/circuit-name.js';
import { THROTTLE_RETRY_AFTER_MS } from '../domain/throttle.js';
import { rampAdmits } from '../domain/outcome-kind.js';
import { coolAndRampFrom, rampShare } from './cool-down.js';
import {
  CircuitOpenError,
  CircuitRampingError,
  CircuitThrottledError,
  DependencyThrottledError,
  CircuitlogRequestError,
  CircuitlogUnavailableError,
} from './errors.js';
import type { KnownCircuit, LocalBreakers } from './local-breaker.js';
import type { LocalThrottles } from './local-throttle.js';
import { TransportError, type AllowedAnswer, type Transport } from './transport.js';
import {
  admitsLocally,
  effectiveState,
  forcedFrom,
  isolate,
  isolationIn,
  type CircuitView,
  type Link,
  type ViewEntry,
} from './view.js';

// How often a circuit's policy (which changes without a transition) is fetched again; sooner
// while circuitlog does not know the circuit yet (it is created by its first outcome).
const POLICY_REFRESH_MS = 60_000; // 60 s
const UNKNOWN_POLICY_REFRESH_MS = 1_000; // 1 s

export interface AdmissionDeps {
  readonly view: CircuitView;
  readonly local: LocalBreakers;
  readonly throttles: LocalThrottles;
  readonly transport: Transport;
  readonly link: Link;
  readonly clock: () => number;
  readonly failOpen: boolean;
  /** This client's caller id: named on every admission, and its own isolation honoured here (none while unknown). */
  readonly caller: string | undefined;
  /** Uniform numbers in [0, 1) for the ramp's and the soft throttle's draws. */
  readonly random: () => number;
}

export class Admission {
  readonly counts = { localDecisions: 0, serverChecks: 0, offlineDecisions: 0, throttledLocally: 0 };

  /** The `GET /allowed` in flight per circuit, resolved with its answer once learnt (null: none came). */
  private readonly lookups = new Map<string, Promise<AllowedAnswer | null>>();

  constructor(private readonly deps: AdmissionDeps) {}

  /** Decided here without asking (counted), refreshing the policy in the background when due if `refresh`. */
  admitsHere(name: string, refresh: boolean): boolean {
    const entry = this.deps.view.get(name);
    if (entry === undefined || !this.deps.link.trusts(entry) || !admitsLocally(entry)) return false;
    this.counts.localDecisions++;
    if (refresh && this.deps.clock() >= entry.policyDueAt) this.refreshPolicy(name, entry);
    return true;
  }

  /**
   * After `admitsHere`, on a circuit closed in the view (not forced): the dependency's cool-down,
   * the ramp's draw and the soft throttle, decided here: the refusal to throw, or null to run the call.
   */
  refusalHere(name: string): CircuitOpenError | null {
    const entry = this.deps.view.get(name);
    if (entry === undefined || entry.forced !== null) return null;
    if (entry.coolUntil !== 0) {
      const cooling = this.coolingHere(name, entry, true);
      if (cooling !== null) return cooling;
    }
    if (entry.json?.ramp != null) {
      const now = this.deps.clock();
      const ramp = rampShare(entry, now);
      if (ramp !== null && !rampAdmits(ramp.percent, this.deps.random())) {
        this.counts.throttledLocally++;
        return new CircuitRampingError(name, ramp.percent, ramp.until, now, { local: true });
      }
    }
    const decision = this.deps.throttles.decide(name, entry.json);
    if (!decision.throttled) return null;
    this.counts.throttledLocally++;
    return new CircuitThrottledError(name, decision.probability, this.deps.clock() + THROTTLE_RETRY_AFTER_MS, {
      local: true,
    });
  }

  /** The cool-down in force for this client (the circuit's, or its caller's), as the error to throw; else null. */
  private coolingHere(name: string, entry: ViewEntry, local: boolean): DependencyThrottledError | null {
    const now = this.deps.clock();
    if (entry.coolUntil <= now || entry.forced !== null) return null;
    if (local) this.counts.throttledLocally++;
    return new DependencyThrottledError(name, entry.coolUntil, now, {
      scope: entry.coolScope,
      caller: this.deps.caller,
      local,
      state: effectiveState(entry),
    });
  }

  /** Ask circuitlog (or, while it is unreachable, the local breaker); throws on refusal. */
  async admitRemotely(name: string): Promise<void> {
    const { view, link, transport } = this.deps;
    if (view.get(name) === undefined) checkName(name);
    const known = view.get(name);
    // A cool-down the view knows stands without asking, even while circuitlog is unreachable.
    const cooling = known === undefined ? null : this.coolingHere(name, known, !link.reachable);
    if (cooling !== null) throw cooling;
    if (!link.reachable) return this.admitOffline(name);
    const before = view.getOrCreate(name);
    if (link.trusts(before) && before.refusedUntil > this.deps.clock()) {
      throw new CircuitOpenError(name, before.state, before.retryAt, { forced: before.forced === 'open' });
    }
    // Isolated by circuitlog (this caller alone): refused here until its open time ends, then asked (one probe).
    if (before.isolated && before.isolatedUntil > this.deps.clock() && before.forced === null) {
      throw new CircuitOpenError(name, before.state, before.isolatedUntil, { caller: this.deps.caller });
    }
    // Concurrent lookups of one circuit share one request. A closed answer admits every call
    // that waited for it; anything else is asked again: a refusal is then kept (and thrown above),
    // while a probe lease or a throttle verdict belongs to one call only.
    const inFlight = this.lookups.get(name);
    if (inFlight !== undefined) {
      const shared = await inFlight;
      if (shared?.allowed === true && shared.state === 'closed') {
        this.counts.serverChecks++; // decided by circuitlog's answer, shared
        return;
      }
      return this.admitRemotely(name);
    }
    const generation = link.streamUp ? link.generation : -1;
    const seq = before.eventSeq;
    let share: (answer: AllowedAnswer | null) => void = () => undefined;
    this.lookups.set(name, new Promise((resolve) => (share = resolve)));
    let answer: AllowedAnswer;
    try {
      answer = await transport.allowed(name, this.deps.caller);
    } catch (error) {
      this.lookups.delete(name);
      share(null);
      if (!(error instanceof TransportError)) throw error;
      if (error.kind === 'rejected') throw new CircuitlogRequestError(error.status ?? 0, error.problem);
      link.setReachable(false, error);
      return this.admitOffline(name);
    }
    this.lookups.delete(name);
    this.counts.serverChecks++;
    link.setReachable(true);
    try {
      this.learn(view.getOrCreate(name), answer, seq, generation);
    } finally {
      share(answer);
    }
    if (answer.allowed) return;
    const now = this.deps.clock();
    if (answer.coolDown !== undefined)
      throw new DependencyThrottledError(name, answer.coolDown.until, now, {
        scope: answer.coolDown.scope,
        caller: this.deps.caller,
        state: answer.state,
      });
    if (answer.ramping !== undefined)
      throw new CircuitRampingError(name, answer.ramping.percent, answer.ramping.rampUntil, now);
    if (answer.throttled !== undefined)
      throw new CircuitThrottledError(name, answer.throttled.probability, answer.retryAt);
    if (answer.scope === 'caller')
      throw new CircuitOpenError(name, answer.state, answer.retryAt, { caller: this.deps.caller });
    throw new CircuitOpenError(name, answer.state, answer.retryAt, { forced: answer.forced });
  }

  /** What the client last knew of a circuit, for the local breaker. */
  known(name: string): KnownCircuit | undefined {
    const entry = this.deps.view.get(name);
    return entry === undefined ? undefined : { state: effectiveState(entry), json: entry.json };
  }

  /** The view entry after circuitlog's answer (asked with the entry at `seq`, under stream `generation`). */
  private learn(entry: ViewEntry, answer: AllowedAnswer, seq: number, generation: number): void {
    const { link, clock } = this.deps;
    if (entry.eventSeq === seq) {
      entry.state = answer.state; // no stream event since we asked: this answer is the newest
      entry.forced = answer.allowed ? forcedFrom(answer.circuit) : answer.forced ? 'open' : null;
    }
    if (answer.allowed) {
      if (answer.circuit !== null) entry.json = answer.circuit;
      // Still listed while its probe runs; released by the caller_released event (or the next snapshot).
      if (answer.circuit !== null) isolate(entry, isolationIn(answer.circuit, this.deps.caller));
      if (answer.circuit !== null) coolAndRampFrom(entry, answer.circuit, this.deps.caller);
      entry.policyDueAt = clock() + (entry.json === null ? UNKNOWN_POLICY_REFRESH_MS : POLICY_REFRESH_MS);
    }
    entry.generation = link.streamUp && link.generation === generation ? generation : -1;
    if (!answer.allowed && answer.coolDown !== undefined) {
      entry.coolUntil = answer.coolDown.until; // refused here until then, without asking
      entry.coolScope = answer.coolDown.scope;
      return;
    }
    if (!answer.allowed && answer.ramping?.rampUntil != null) entry.rampUntil = answer.ramping.rampUntil;
    // A throttled or ramping call is refused alone: the next one may be admitted, so nothing is kept.
    if (answer.allowed || answer.throttled !== undefined || answer.ramping !== undefined) return;
    if (answer.scope === 'caller') {
      // Kept until its open_until, by this host's clock at most Retry-After from now (hosts' clocks differ).
      isolate(entry, Math.min(answer.retryAt, clock() + answer.retryAfterMs));
      return;
    }
    entry.retryAt = answer.retryAt;
    // Kept until retryAt, by this host's clock at most Retry-After from now (hosts' clocks differ).
    entry.refusedUntil = answer.forced ? Infinity : Math.min(answer.retryAt, clock() + answer.retryAfterMs);
  }

  /** Fetch a circuit's policy in the background, for the local breaker should circuitlog become unreachable. */
  private refreshPolicy(name: string, entry: ViewEntry): void {
    const { clock } = this.deps;
    entry.policyDueAt = clock() + UNKNOWN_POLICY_REFRESH_MS; // no second fetch while this one runs
    this.deps.transport.circuit(name).then(
      (json) => {
        if (json !== null) {
          entry.json = json;
          coolAndRampFrom(entry, json, this.deps.caller);
        }
        entry.policyDueAt = clock() + (json === null ? UNKNOWN_POLICY_REFRESH_MS : POLICY_REFRESH_MS);
      },
      () => undefined, // a failed refresh keeps the policy known so far; calls are not affected
    );
  }

  private admitOffline(name: string): void {
    if (!this.deps.failOpen)
      throw new CircuitlogUnavailableError(
        `circuitlog is unreachable and failOpen is false: call on '${name}' refused`,
      );
    this.counts.offlineDecisions++;
    const verdict = this.deps.local.admit(name, this.known(name));
    if (verdict.allowed) return;
    if (verdict.throttled !== undefined)
      throw new CircuitThrottledError(name, verdict.throttled.probability, verdict.retryAt, { local: true });
    throw new CircuitOpenError(name, this.deps.local.state(name) ?? 'open', verdict.retryAt, { local: true });
  }
}

/** A TypeError for a name circuitlog would refuse (checked before its outcomes are queued). */
export function checkName(name: string): void {
  const problem = typeof name === 'string' ? circuitNameProblem(name) : 'must be a string';
  if (problem !== null) throw new TypeError(`Invalid circuit name '${String(name)}': ${problem}`);
}

/** A refusal (open circuit, or circuitlog unreachable with failOpen false), which a fallback answers. */
export function isRefusal(error: unknown): boolean {
  return error instanceof CircuitOpenError || error instanceof CircuitlogUnavailableError;
}
