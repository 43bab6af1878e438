/**
 * What the client needs from circuitlog, as a port: the HTTP implementation is
 * `http-transport.ts`; unit tests pass a fake.
 */

import type { CircuitState } from '../domain/circuit.js';
import type { OutcomeKind } from '../domain/outcome-kind.js';

/** A circuit as circuitlog's JSON shows it (snake_case, as in docs/api.md). */
export type CircuitJson = Readonly<Record<string, unknown>> & { readonly state?: CircuitState };

export type AllowedAnswer =
  | { readonly allowed: true; readonly state: CircuitState; readonly circuit: CircuitJson | null }
  | {
      readonly allowed: false;
      readonly state: CircuitState;
      /** Epoch ms: `open_until` when open, else now + `Retry-After`. */
      readonly retryAt: number;
      /** `Retry-After`, in ms: unlike `retryAt`, free of any clock difference between hosts. */
      readonly retryAfterMs: number;
      readonly forced: boolean;
      /** The soft throttle refused this call (`CIRCUIT_THROTTLED`): the probability it was drawn against. */
      readonly throttled?: { readonly probability: number };
      /** `caller`: only this client's caller is refused (isolated by failures of its own). */
      readonly scope?: 'caller';
      /** The dependency asked for less load (`DEPENDENCY_THROTTLED`): the cool-down in force, epoch ms. */
      readonly coolDown?: { readonly until: number; readonly scope: 'circuit' | 'caller' };
      /** Above a ramping circuit's share (`CIRCUIT_RAMPING`): the share, and the ramp's end (epoch ms) if named. */
      readonly ramping?: { readonly percent: number; readonly rampUntil: number | null };
    };

/** One item of `POST /outcomes`: `success`, or (issue 29) a `kind` with its detail. */
export interface OutcomeItem {
  readonly circuit: string;
  readonly success?: boolean;
  /** Why the call ended, when it was neither a plain success nor a plain failure (then `success` is left out). */
  readonly kind?: OutcomeKind;
  /** With kind `throttled`: the seconds the dependency asked for. */
  readonly retry_after_seconds?: number;
  /** With kind `caller_deadline`: the caller's deadline, in ms. */
  readonly deadline_ms?: number;
  readonly duration_ms?: number;
  /** When the call ended (RFC 3339); circuitlog applies an outcome older than the circuit's last state change as a late one. */
  readonly at?: string;
  /** The client's caller id (issue 17). */
  readonly caller?: string;
  /** Its number from the batch's `source` (issue 32: the edge agent numbers what it relays). */
  readonly seq?: number;
}

/** One `event: transition` of `/events/stream`, with its `id:`. */
export interface TransitionEvent {
  readonly id: string;
  readonly circuit: string;
  readonly from: CircuitState;
  readonly to: CircuitState;
  readonly reason: string;
  /** ISO 8601, as the server sent it. */
  readonly at: string;
  /** The callers an event names (caller_isolated, caller_released, trip_withheld), when it names any. */
  readonly callers?: readonly string[];
  /** caller_isolated: when the caller's open time ends; cool_down: when the cool-down ends (ISO 8601). */
  readonly until?: string;
  /** cool_down, cool_down_ended: whose cool-down (`circuit`: everyone's; `caller`: the callers named). */
  readonly scope?: 'circuit' | 'caller';
  /** cool_down_ended, and half_open -> closed, under a policy that ramps: when the ramp ends (ISO 8601). */
  readonly rampUntil?: string;
  /** cool_down: the seconds the dependency asked for. */
  readonly retryAfterSeconds?: number;
  /** A transition of the circuit's shadow policy (issue 31): the circuit itself did not change, and the view ignores it. */
  readonly shadow?: true;
}

/**
 * `event: reset` of `/events/stream`: the `Last-Event-ID` sent was unknown or too old, so
 * transitions may have been missed; resume after `newestId`, with fresh snapshots.
 */
export interface StreamReset {
  /** `unknown-event-id` or `expired`, as circuitlog sent it. */
  readonly reason: string;
  readonly newestId: string;
}

export interface OpenStream {
  /** Settles when the stream ends, for whatever reason. */
  readonly ended: Promise<void>;
  close(): void;
}

/** `GET /whoami` (issue 30): who the client's credential is. */
export interface WhoamiAnswer {
  readonly id: string;
  /** The caller patterns it may report as; null: any caller (no credentials, or CIRCUITLOG_TOKEN). */
  readonly callers: readonly string[] | null;
}

export interface Transport {
  /** `GET /whoami`; null when the server has no such route (before issue 30). Optional for test transports. */
  whoami?(): Promise<WhoamiAnswer | null>;
  /** `GET /circuits/:name/allowed`; in half-open an admitted call holds a probe lease. */
  allowed(name: string, caller?: string): Promise<AllowedAnswer>;
  /** `GET /circuits/:name`: its JSON, or null when circuitlog has no such circuit yet. */
  circuit(name: string): Promise<CircuitJson | null>;
  /**
   * `POST /outcomes`: all or nothing; resolves once the server has committed them. With a
   * `source` (the edge agent), items carry their `seq` and the server applies each at most once.
   */
  postOutcomes(outcomes: readonly OutcomeItem[], source?: string): Promise<void>;
  /** `GET /events/stream`, resuming after `lastEventId`; resolves once the server has answered 200. */
  openStream(
    lastEventId: string | undefined,
    onEvent: (event: TransitionEvent) => void,
    onReset?: (reset: StreamReset) => void,
  ): Promise<OpenStream>;
  close(): Promise<void>;
}

/**
 * A request that failed. `unreachable`: no answer, or a 5xx (circuitlog is down, restarting
 * or overloaded; try again later). `rejected`: a 4xx (retrying the same request cannot help).
 */
export class TransportError extends Error {
  constructor(
    readonly kind: 'unreachable' | 'rejected',
    message: string,
    readonly status?: number,
    readonly problem?: unknown,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TransportError';
  }
}
