/**
 * The circuitlog client: one line to protect a call, decided in-process on circuits the
 * local view shows closed, asked of circuitlog otherwise, with outcomes sent in batches.
 * See README "Using circuitlog from your service".
 */

import { performance } from 'node:perf_hooks';
import type { CircuitState } from '../domain/circuit.js';
import { circuitNameProblem } from '../domain/circuit-name.js';
import { THROTTLE_RETRY_AFTER_MS } from '../domain/throttle.js';
import { CircuitOpenError, CircuitThrottledError, CircuitlogRequestError, CircuitlogUnavailableError } from './errors.js';
import { Emitter } from './emitter.js';
import { createHttpTransport } from './http-transport.js';
import { LocalBreakers, type KnownCircuit } from './local-breaker.js';
import { LocalThrottles } from './local-throttle.js';
import type { CallOptions, ClientEvents, ClientOptions, ClientStats, ConnectionState } from './options.js';
import { OutcomeQueue } from './outcome-queue.js';
import { SSE_LIMITS } from './sse.js';
import { classify, withTimeout } from './run-call.js';
import { StreamKeeper, backoffDelay } from './stream-keeper.js';
import { TransportError, type Transport } from './transport.js';
import { CircuitView, admitsLocally, effectiveState, forcedFrom, type ViewEntry } from './view.js';

const NEVER_ABORTED = new AbortController().signal;
// How often a circuit's policy (which changes without a transition) is fetched again; sooner
// while circuitlog does not know the circuit yet (it is created by its first outcome).
const POLICY_REFRESH_MS = 60_000; // 60 s
const UNKNOWN_POLICY_REFRESH_MS = 1_000; // 1 s
const round3 = (ms: number) => Math.round(ms * 1000) / 1000;

export class CircuitlogClient {
  private readonly transport: Transport;
  private readonly clock: () => number;
  private readonly failOpen: boolean;
  private readonly closeTimeoutMs: number;
  private readonly view: CircuitView;
  private readonly local: LocalBreakers;
  private readonly throttles: LocalThrottles;
  private readonly queue: OutcomeQueue;
  private readonly stream: StreamKeeper;
  private readonly events = new Emitter<ClientEvents>();
  private streamUp = false;
  private reachable = true; // until a request fails, assume circuitlog answers
  private generation = 0;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  private readyWaiters: (() => void)[] = [];
  private closing: Promise<void> | null = null;
  private counts = { localDecisions: 0, serverChecks: 0, offlineDecisions: 0, throttledLocally: 0 };

  constructor(options: ClientOptions) {
    const reconnectMaxDelayMs = options.reconnectMaxDelayMs ?? 5_000; // 5 s
    this.clock = options.clock ?? Date.now;
    this.failOpen = options.failOpen ?? true;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 10_000; // 10 s
    this.transport =
      options.transport ??
      createHttpTransport({
        url: options.url,
        token: options.token,
        requestTimeoutMs: options.requestTimeoutMs ?? 2_000, // 2 s, a deadline
        maxResponseBytes: options.maxResponseBytes,
        streamLimits: {
          maxLineChars: options.maxStreamLineChars ?? SSE_LIMITS.maxLineChars,
          maxEventChars: options.maxStreamEventChars ?? SSE_LIMITS.maxEventChars,
        },
        streamIdleTimeoutMs: options.streamIdleTimeoutMs ?? 45_000, // 45 s: three missed heartbeats
        connections: options.connections ?? 8,
      });
    const maxCircuits = options.maxCircuits ?? 10_000;
    if (!Number.isInteger(maxCircuits) || maxCircuits < 1) throw new TypeError(`maxCircuits must be an integer >= 1, got ${String(maxCircuits)}`);
    this.view = new CircuitView(maxCircuits);
    this.local = new LocalBreakers(
      this.clock,
      { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1, ...options.localDefaults },
      10_000, // 10 s: a local probe's lease, as the server's default
      maxCircuits,
      options.random,
    );
    this.throttles = new LocalThrottles(this.clock, options.random ?? Math.random, maxCircuits);
    this.queue = new OutcomeQueue(
      {
        flushAt: Math.min(options.flushAt ?? 250, options.maxBatch ?? 1_000),
        maxBatch: options.maxBatch ?? 1_000,
        maxInFlight: 2,
        flushDelayMs: options.flushDelayMs ?? 5, // 5 ms
        capacity: options.maxQueuedOutcomes ?? 10_000,
        retryDelayMs: (attempt) => backoffDelay(attempt, reconnectMaxDelayMs),
      },
      {
        send: (batch) => this.transport.postOutcomes(batch),
        onDelivered: () => this.setLink(this.streamUp, true),
        onUnreachable: (error) => this.setLink(this.streamUp, false, error),
        onRejected: (count, error) => this.events.emit('rejected', { count, error }),
      },
    );
    this.stream = new StreamKeeper(
      this.transport,
      {
        onOpen: () => {
          this.generation++; // every snapshot taken before this is re-taken on its next use
          this.setLink(true, true);
          this.queue.flush();
        },
        onEvent: (event) => {
          this.view.apply(event);
          if (event.from !== event.to) this.throttles.forget(event.circuit); // counts start empty at a state change, as the server's
          this.events.emit('transition', event);
        },
        onReset: (reset) => {
          // Transitions may have been missed: every snapshot is re-taken on its next use.
          this.generation++;
          this.events.emit('reset', reset);
        },
        onDown: (error) => this.setLink(false, error === null || error.kind === 'rejected' ? this.reachable : false, error ?? undefined),
      },
      reconnectMaxDelayMs,
    );
    this.stream.start();
  }

  /**
   * Run `fn` if the circuit admits a call, and record its outcome. Without a fallback,
   * `fn`'s own error is rethrown; a refusal throws `CircuitOpenError`, or
   * `CircuitlogUnavailableError` when circuitlog is unreachable and `failOpen` is false.
   */
  async call<T, F = never>(
    name: string,
    fn: (signal: AbortSignal) => T,
    options: CallOptions<Awaited<T>, F> = {},
  ): Promise<Awaited<T> | Awaited<F>> {
    this.assertOpen();
    this.inFlight++; // from here on, close() waits for this call's outcome
    try {
      if (this.queue.full && this.reachable) await this.queue.waitForSpace();
      const entry = this.view.get(name);
      if (entry !== undefined && this.trusted(entry) && admitsLocally(entry)) {
        this.counts.localDecisions++;
        if (this.clock() >= entry.policyDueAt) this.refreshPolicy(name, entry);
        const throttled = this.throttleLocally(name, entry);
        if (throttled !== null) {
          if (options.fallback !== undefined) return await options.fallback(throttled);
          throw throttled;
        }
      } else {
        try {
          await this.admitRemotely(name);
        } catch (error) {
          if (options.fallback !== undefined && isRefusal(error)) return await options.fallback(error);
          throw error;
        }
      }
      return await this.run(name, fn, options);
    } finally {
      if (--this.inFlight === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  /**
   * May a call go ahead now? Like `call`, a `true` in half-open holds a probe slot: report
   * the call's outcome with `record`.
   */
  async allowed(name: string): Promise<boolean> {
    this.assertOpen();
    const entry = this.view.get(name);
    if (entry !== undefined && this.trusted(entry) && admitsLocally(entry)) {
      this.counts.localDecisions++;
      return this.throttleLocally(name, entry) === null;
    }
    try {
      await this.admitRemotely(name);
      return true;
    } catch (error) {
      if (isRefusal(error)) return false;
      throw error;
    }
  }

  /** Record the outcome of a call made without `call()`; waits while the queue is full. */
  async record(name: string, outcome: { readonly success: boolean; readonly durationMs?: number }): Promise<void> {
    this.assertOpen();
    if (this.view.get(name) === undefined) checkName(name);
    if (typeof outcome.success !== 'boolean') throw new TypeError('record(): success must be a boolean');
    const d = outcome.durationMs;
    if (d !== undefined && !(Number.isFinite(d) && d >= 0)) throw new TypeError('record(): durationMs must be a finite number >= 0');
    this.inFlight++;
    try {
      if (this.queue.full && this.reachable) await this.queue.waitForSpace();
      this.recordOutcome(name, outcome.success, d);
    } finally {
      if (--this.inFlight === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  /** The state this client currently believes (a forced state wins); undefined if it knows nothing yet. */
  state(name: string): CircuitState | undefined {
    if (!this.reachable) {
      const local = this.local.state(name);
      if (local !== undefined) return local;
    }
    const entry = this.view.get(name);
    return entry === undefined ? undefined : effectiveState(entry);
  }

  get connection(): ConnectionState {
    return !this.reachable ? 'offline' : this.streamUp ? 'connected' : 'syncing';
  }

  /** Subscribe; returns the function that unsubscribes. */
  on<K extends keyof ClientEvents>(event: K, listener: (payload: ClientEvents[K]) => void): () => void {
    return this.events.on(event, listener);
  }

  /** Resolves the next time the event stream is open (at once if it is). */
  ready(): Promise<void> {
    if (this.connection === 'connected') return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  stats(): ClientStats {
    const q = this.queue.stats();
    return {
      connection: this.connection,
      ...this.counts,
      outcomesPending: this.queue.pending,
      outcomesAcknowledged: q.acknowledged,
      outcomesDropped: q.dropped,
      outcomesRejected: q.rejected,
      lastEventId: this.stream.lastEventId,
    };
  }

  /**
   * Refuse new calls, wait for those running, and resolve once circuitlog has acknowledged
   * every outcome; rejects with `CircuitlogUnavailableError` if that takes over `closeTimeoutMs`.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.closeTimeoutMs)));
    const done = (async () => {
      if (this.inFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
      this.queue.flush();
      await this.queue.drained();
      return true;
    })();
    const delivered = await Promise.race([done, expired]);
    clearTimeout(timer);
    const pending = this.queue.pending;
    this.queue.stop();
    this.stream.stop();
    await this.transport.close();
    if (!delivered) {
      throw new CircuitlogUnavailableError(`close(): ${pending} outcome(s) not acknowledged by circuitlog within ${this.closeTimeoutMs} ms`);
    }
  }

  private assertOpen(): void {
    if (this.closing !== null) throw new Error('circuitlog client is closed');
  }

  private trusted(entry: ViewEntry): boolean {
    return this.streamUp && this.reachable && entry.generation === this.generation;
  }

  /** Ask circuitlog (or, while it is unreachable, the local breaker); throws on refusal. */
  private async admitRemotely(name: string): Promise<void> {
    if (this.view.get(name) === undefined) checkName(name);
    if (!this.reachable) return this.admitOffline(name);
    const before = this.view.getOrCreate(name);
    if (this.trusted(before) && before.refusedUntil > this.clock()) {
      throw new CircuitOpenError(name, before.state, before.retryAt, { forced: before.forced === 'open' });
    }
    const generation = this.streamUp ? this.generation : -1;
    const seq = before.eventSeq;
    let answer;
    try {
      answer = await this.transport.allowed(name);
    } catch (error) {
      if (!(error instanceof TransportError)) throw error;
      if (error.kind === 'rejected') throw new CircuitlogRequestError(error.status ?? 0, error.problem);
      this.setLink(this.streamUp, false, error);
      return this.admitOffline(name);
    }
    this.counts.serverChecks++;
    this.setLink(this.streamUp, true);
    const entry = this.view.getOrCreate(name);
    if (entry.eventSeq === seq) {
      entry.state = answer.state; // no stream event since we asked: this answer is the newest
      entry.forced = answer.allowed ? forcedFrom(answer.circuit) : answer.forced ? 'open' : null;
    }
    if (answer.allowed) {
      if (answer.circuit !== null) entry.json = answer.circuit;
      entry.policyDueAt = this.clock() + (entry.json === null ? UNKNOWN_POLICY_REFRESH_MS : POLICY_REFRESH_MS);
    }
    entry.generation = this.streamUp && this.generation === generation ? generation : -1;
    if (answer.allowed) return;
    // A throttled call is refused alone: the next one may be admitted, so nothing is kept.
    if (answer.throttled !== undefined) throw new CircuitThrottledError(name, answer.throttled.probability, answer.retryAt);
    entry.retryAt = answer.retryAt;
    // Kept until retryAt, by this host's clock at most Retry-After from now (hosts' clocks differ).
    entry.refusedUntil = answer.forced ? Infinity : Math.min(answer.retryAt, this.clock() + answer.retryAfterMs);
    throw new CircuitOpenError(name, answer.state, answer.retryAt, { forced: answer.forced });
  }

  /** Fetch a circuit's policy in the background, for the local breaker should circuitlog become unreachable. */
  private refreshPolicy(name: string, entry: ViewEntry): void {
    entry.policyDueAt = this.clock() + UNKNOWN_POLICY_REFRESH_MS; // no second fetch while this one runs
    this.transport.circuit(name).then(
      (json) => {
        if (json !== null) entry.json = json;
        entry.policyDueAt = this.clock() + (json === null ? UNKNOWN_POLICY_REFRESH_MS : POLICY_REFRESH_MS);
      },
      () => undefined, // a failed refresh keeps the policy known so far; calls are not affected
    );
  }

  /**
   * The soft throttle on a circuit closed in the local view (not forced closed), decided
   * here from this client's own counts: the refusal to throw, or null to run the call.
   */
  private throttleLocally(name: string, entry: ViewEntry): CircuitThrottledError | null {
    if (entry.forced !== null) return null;
    const decision = this.throttles.decide(name, entry.json);
    if (!decision.throttled) return null;
    this.counts.throttledLocally++;
    return new CircuitThrottledError(name, decision.probability, this.clock() + THROTTLE_RETRY_AFTER_MS, { local: true });
  }

  private admitOffline(name: string): void {
    if (!this.failOpen) throw new CircuitlogUnavailableError(`circuitlog is unreachable and failOpen is false: call on '${name}' refused`);
    this.counts.offlineDecisions++;
    const verdict = this.local.admit(name, this.known(name));
    if (verdict.allowed) return;
    if (verdict.throttled !== undefined) throw new CircuitThrottledError(name, verdict.throttled.probability, verdict.retryAt, { local: true });
    throw new CircuitOpenError(name, this.local.state(name) ?? 'open', verdict.retryAt, { local: true });
  }

  private known(name: string): KnownCircuit | undefined {
    const entry = this.view.get(name);
    return entry === undefined ? undefined : { state: effectiveState(entry), json: entry.json };
  }

  private async run<T, F>(name: string, fn: (signal: AbortSignal) => T, options: CallOptions<Awaited<T>, F>): Promise<Awaited<T> | Awaited<F>> {
    const started = performance.now();
    let result: Awaited<T> | undefined;
    let thrown: { error: unknown } | null = null;
    try {
      result = options.timeoutMs === undefined ? await fn(NEVER_ABORTED) : await withTimeout(name, fn, options.timeoutMs);
    } catch (error) {
      thrown = { error };
    }
    const verdict = classify(thrown, result, options.isFailure);
    this.recordOutcome(name, !verdict.failed, performance.now() - started);
    if (verdict.classifierError !== undefined) throw verdict.classifierError;
    if (thrown === null) return result as Awaited<T>;
    if (options.fallback !== undefined) return await options.fallback(thrown.error);
    throw thrown.error;
  }

  private recordOutcome(name: string, success: boolean, durationMs: number | undefined): void {
    const offline = !this.reachable;
    if (offline) this.local.record(name, success, durationMs, this.known(name));
    else {
      const entry = this.view.get(name);
      if (entry !== undefined && entry.forced === null && entry.state === 'closed') this.throttles.record(name, entry.json, success);
    }
    // `at`: when the call ended, so circuitlog can tell an outcome replayed after an outage
    // (older than the circuit's last state change) from a fresh one.
    const at = new Date(this.clock()).toISOString();
    this.queue.push(
      durationMs === undefined ? { circuit: name, success, at } : { circuit: name, success, duration_ms: round3(durationMs), at },
      offline,
    );
  }

  /** Track whether the stream is open and circuitlog answers; report changes of the resulting state. */
  private setLink(streamUp: boolean, reachable: boolean, error?: Error): void {
    const before = this.connection;
    this.streamUp = streamUp;
    this.reachable = reachable;
    const after = this.connection;
    if (after === before) return;
    if (before === 'offline') this.local.clear(); // back in touch: the server's state wins
    if (after === 'offline') {
      this.queue.releaseWaiters(); // calls waiting for room go on behind the local breaker
      this.stream.retryNow();
    }
    if (after === 'connected') for (const resolve of this.readyWaiters.splice(0)) resolve();
    this.events.emit('connection', error === undefined ? { state: after } : { state: after, error });
  }
}

function checkName(name: string): void {
  const problem = typeof name === 'string' ? circuitNameProblem(name) : 'must be a string';
  if (problem !== null) throw new TypeError(`Invalid circuit name '${String(name)}': ${problem}`);
}

function isRefusal(error: unknown): boolean {
  return error instanceof CircuitOpenError || error instanceof CircuitlogUnavailableError;
}
