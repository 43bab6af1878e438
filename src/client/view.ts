/**
 * The client's local view of the circuits it uses: a snapshot per circuit (from its first
 * `GET /allowed`), kept current by `/events/stream`, and the link (is the stream open, does
 * circuitlog answer) that says whether the view may be trusted. An entry is trusted for local
 * decisions only while the stream that was open when it was taken is still open (same `generation`).
 */

import type { CircuitState } from '../domain/circuit.js';
import type { CircuitJson, TransitionEvent } from './transport.js';

export type ForcedState = 'open' | 'closed' | null;

export interface ViewEntry {
  state: CircuitState;
  forced: ForcedState;
  /** Last snapshot's JSON (the policy fields the local breaker needs), or null. */
  json: CircuitJson | null;
  /** Epoch ms after which the JSON is fetched again, off the call path. */
  policyDueAt: number;
  /** Stream generation the snapshot was taken under; -1: taken with no stream open. */
  generation: number;
  /** Bumped by every stream event for this circuit, so an older snapshot cannot overwrite it. */
  eventSeq: number;
  /** Epoch ms until which circuitlog's last refusal stands (0: none); any event clears it. */
  refusedUntil: number;
  retryAt: number;
  /**
   * This client's caller is isolated from the circuit (issue 17): calls are asked of circuitlog
   * (which refuses them until `isolatedUntil`, then grants one probe) until it is released.
   */
  isolated: boolean;
  /** Epoch ms until which the isolation refuses calls without asking (0: not isolated). */
  isolatedUntil: number;
  /** Epoch ms until which the dependency's cool-down refuses this client's calls (issue 29; 0: none known). */
  coolUntil: number;
  /** Whose cool-down `coolUntil` is: everyone's, or this client's caller's. */
  coolScope: 'circuit' | 'caller';
  /** Epoch ms when the circuit's ramp ends (null: none known); its share comes from the policy's `ramp`. */
  rampUntil: number | null;
}

const FORCED_BY_REASON: Readonly<Record<string, ForcedState>> = {
  forced_open: 'open',
  forced_closed: 'closed',
  force_cleared: null,
};

/**
 * At most `maxCircuits` entries: a service that names circuits dynamically must not grow
 * it without bound. The least recently used entry goes first (a Map keeps insertion order:
 * a use moves the entry to the end); a dropped circuit is simply unknown again, and its next
 * call takes a fresh snapshot.
 */
export class CircuitView {
  private readonly entries = new Map<string, ViewEntry>();
  /** The most recently used name: the Map's last key. */
  private newest: string | undefined;

  constructor(
    private readonly maxCircuits = 10_000,
    /** This client's caller id (a getter: learnt from GET /whoami at start): events naming it isolate or release it. */
    private readonly callerOf?: string | (() => string | undefined),
  ) {}

  private get caller(): string | undefined {
    return typeof this.callerOf === 'function' ? this.callerOf() : this.callerOf;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The entry, now the most recently used. */
  get(name: string): ViewEntry | undefined {
    const entry = this.entries.get(name);
    if (entry !== undefined && name !== this.newest) {
      this.entries.delete(name);
      this.entries.set(name, entry);
      this.newest = name; // a call path that uses one circuit again and again moves nothing
    }
    return entry;
  }

  getOrCreate(name: string): ViewEntry {
    let entry = this.get(name);
    if (entry === undefined) {
      entry = {
        state: 'closed',
        forced: null,
        json: null,
        policyDueAt: 0,
        generation: -1,
        eventSeq: 0,
        refusedUntil: 0,
        retryAt: 0,
        isolated: false,
        isolatedUntil: 0,
        coolUntil: 0,
        coolScope: 'circuit',
        rampUntil: null,
      };
      this.entries.set(name, entry);
      this.newest = name;
      if (this.entries.size > this.maxCircuits) this.entries.delete(this.entries.keys().next().value!);
    }
    return entry;
  }

  /**
   * A stream event: the circuit is now in `to`, and any refusal on record is stale. A shadow
   * policy's event (issue 31) changes nothing here: the circuit itself did not change.
   */
  apply(event: TransitionEvent): void {
    if (event.shadow === true) return;
    const entry = this.entries.get(event.circuit);
    if (entry === undefined) return;
    entry.state = event.to;
    entry.eventSeq++;
    entry.refusedUntil = 0;
    if (event.reason in FORCED_BY_REASON) entry.forced = FORCED_BY_REASON[event.reason] ?? null;
    if (this.caller !== undefined && event.callers?.includes(this.caller)) {
      if (event.reason === 'caller_isolated') isolate(entry, event.until === undefined ? 0 : Date.parse(event.until));
      else if (event.reason === 'caller_released') isolate(entry, null);
    }
    this.coolOrRamp(entry, event);
  }

  /** Issue 29's events: a cool-down for everyone or this caller begins or ends; a ramp begins. */
  private coolOrRamp(entry: ViewEntry, event: TransitionEvent): void {
    const mine =
      event.scope === 'circuit' || (this.caller !== undefined && event.callers?.includes(this.caller) === true);
    if (event.reason === 'cool_down' && mine && event.until !== undefined) {
      const until = Date.parse(event.until);
      if (Number.isFinite(until)) {
        entry.coolUntil = until;
        entry.coolScope = event.scope === 'caller' ? 'caller' : 'circuit';
      }
    } else if (event.reason === 'cool_down_ended' && mine) entry.coolUntil = 0;
    else if (event.reason === 'manual_reset') {
      // An operator reset ends every cool-down and the ramp at circuitlog (domain `reset`).
      entry.coolUntil = 0;
      entry.rampUntil = null;
    }
    if (event.rampUntil !== undefined && (event.reason === 'cool_down_ended' ? mine : event.to === 'closed')) {
      const until = Date.parse(event.rampUntil);
      if (Number.isFinite(until)) entry.rampUntil = until;
    }
  }
}

/** Mark the entry isolated until `until` (epoch ms), or released (null). */
export function isolate(entry: ViewEntry, until: number | null): void {
  entry.isolated = until !== null;
  entry.isolatedUntil = until === null || !Number.isFinite(until) ? 0 : until;
}

/** This caller's isolation as a circuit's JSON lists it (`isolated_callers`): its open_until, or null when not listed. */
export function isolationIn(json: CircuitJson | null, caller: string | undefined): number | null {
  const listed = json?.isolated_callers;
  if (caller === undefined || !Array.isArray(listed)) return null;
  for (const item of listed as unknown[]) {
    const i = item as { caller?: unknown; open_until?: unknown } | null;
    if (i?.caller === caller) return typeof i.open_until === 'string' ? Date.parse(i.open_until) : 0;
  }
  return null;
}

/** May a call on this circuit be decided here, without asking circuitlog? */
export function admitsLocally(entry: ViewEntry): boolean {
  return entry.forced === 'closed' || (entry.forced === null && entry.state === 'closed' && !entry.isolated);
}

/** The state a call sees: a forced state wins over the counted one. */
export function effectiveState(entry: ViewEntry): CircuitState {
  return entry.forced ?? entry.state;
}

export function forcedFrom(json: CircuitJson | null): ForcedState {
  const forced = json?.forced_state;
  return forced === 'open' || forced === 'closed' ? forced : null;
}

/** `connected`: stream open, closed circuits decided locally; `syncing`: every call asks circuitlog; `offline`: local breakers. */
export type ConnectionState = 'connected' | 'syncing' | 'offline';

/** Whether the event stream is open and circuitlog answers, and the connection state the two make. */
export class Link {
  streamUp = false;
  reachable = true; // until a request fails, assume circuitlog answers
  /** Bumped at every stream open and reset: each snapshot taken before is re-taken on its next use. */
  generation = 0;

  constructor(private readonly onChange: (before: ConnectionState, after: ConnectionState, error?: Error) => void) {}

  get connection(): ConnectionState {
    return !this.reachable ? 'offline' : this.streamUp ? 'connected' : 'syncing';
  }

  /** May this entry decide a call locally? Only under the open stream it was taken under. */
  trusts(entry: ViewEntry): boolean {
    return this.streamUp && this.reachable && entry.generation === this.generation;
  }

  /** Record both; report a change of the connection state. */
  set(streamUp: boolean, reachable: boolean, error?: Error): void {
    const before = this.connection;
    this.streamUp = streamUp;
    this.reachable = reachable;
    const after = this.connection;
    if (after !== before) this.onChange(before, after, error);
  }

  /** circuitlog answered (or failed to): the stream's state is unchanged. */
  setReachable(reachable: boolean, error?: Error): void {
    this.set(this.streamUp, reachable, error);
  }
}
