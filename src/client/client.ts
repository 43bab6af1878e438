/**
 * The circuitlog client: one line to protect a call, decided in-process on circuits the
 * local view shows closed, asked of circuitlog otherwise, with outcomes sent in batches;
 * and how its parts are wired to each other (the outcome queue's and the event stream's
 * hooks, the shutdown that `close()` runs). See README "Using circuitlog from your service".
 */

import { performance } from 'node:perf_hooks';
import type { CircuitState } from '../domain/circuit.js';
import { Admission, checkName, isRefusal } from './admission.js';
import { FAILURE, SUCCESS, type Verdict, checkCallOptions, countsLocally, outcomeWire, verdictOf } from './classify.js';
import { CircuitlogUnavailableError, ClientClosedError } from './errors.js';
import { LocalBreakers } from './local-breaker.js';
import { LocalThrottles } from './local-throttle.js';
import {
  clientSettings,
  credentialCaller,
  defaultCaller,
  type CallOptions,
  type ClientEvents,
  type ClientOptions,
  type ClientStats,
} from './options.js';
import { OutcomeQueue, type OutcomeQueueHooks } from './outcome-queue.js';
import { InFlight, NEVER_ABORTED, isoTime, runFn } from './run-call.js';
import { StreamKeeper, type StreamHooks } from './sse.js';
import type { Transport } from './transport.js';
import { CircuitView, Link, effectiveState, type ConnectionState } from './view.js';

const round3 = (ms: number) => Math.round(ms * 1000) / 1000;
export class CircuitlogClient {
  private readonly transport: Transport;
  /** This client's caller id (option `caller`, or learnt from GET /whoami at start); undefined while unknown. */
  private currentCaller: string | undefined;
  /** While the default caller is being asked of GET /whoami: calls wait for it (one request, with its deadline). */
  private callerKnown: Promise<void> | null = null;
  /** GET /whoami failed (circuitlog unreachable): asked again once connected. */
  private askWhoamiAgain = false;
  private readonly clock: () => number;
  private readonly closeTimeoutMs: number;
  private readonly view: CircuitView;
  private readonly local: LocalBreakers;
  private readonly throttles: LocalThrottles;
  private readonly link: Link;
  private readonly admission: Admission;
  private readonly queue: OutcomeQueue;
  private readonly stream: StreamKeeper;
  private readonly events = new Emitter<ClientEvents>();
  private readonly inFlight = new InFlight();
  private readyWaiters: (() => void)[] = [];
  private closing: Promise<void> | null = null;

  constructor(options: ClientOptions) {
    const settings = clientSettings(options);
    this.transport = settings.transport;
    this.clock = settings.clock;
    this.currentCaller = settings.caller;
    this.closeTimeoutMs = settings.closeTimeoutMs;
    this.view = new CircuitView(settings.maxCircuits, () => this.currentCaller);
    this.local = new LocalBreakers(
      this.clock,
      settings.localDefaults,
      settings.probeLeaseMs,
      settings.maxCircuits,
      settings.random,
    );
    this.throttles = new LocalThrottles(this.clock, settings.random, settings.maxCircuits);
    this.link = new Link((before, after, error) => this.linkChanged(before, after, error));
    const { view, local, throttles, transport, link, clock } = this;
    const client = this;
    this.admission = new Admission({
      view,
      local,
      throttles,
      transport,
      link,
      clock,
      failOpen: settings.failOpen,
      get caller() {
        return client.currentCaller;
      },
      random: settings.random,
    });
    if (settings.caller === undefined) this.callerKnown = this.learnCaller();
    this.queue = new OutcomeQueue(settings.queue, this.queueHooks());
    this.stream = new StreamKeeper(transport, this.streamHooks(), settings.reconnectMaxDelayMs);
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
    checkCallOptions(options);
    options.signal?.throwIfAborted(); // the caller gave up before the call: nothing runs, nothing is recorded
    this.inFlight.enter(); // from here on, close() waits for this call's outcome
    try {
      if (this.callerKnown !== null) await this.callerKnown;
      if (this.queue.full && this.link.reachable) await this.queue.waitForSpace();
      if (this.admission.admitsHere(name, true)) {
        const throttled = this.admission.refusalHere(name);
        if (throttled !== null) {
          if (options.fallback !== undefined) return await options.fallback(throttled);
          throw throttled;
        }
      } else {
        try {
          await this.admission.admitRemotely(name);
        } catch (error) {
          if (options.fallback !== undefined && isRefusal(error)) return await options.fallback(error);
          throw error;
        }
      }
      return await this.run(name, fn, options);
    } finally {
      this.inFlight.leave();
    }
  }

  /**
   * May a call go ahead now? Like `call`, a `true` in half-open holds a probe slot: report
   * the call's outcome with `record`.
   */
  async allowed(name: string): Promise<boolean> {
    this.assertOpen();
    if (this.callerKnown !== null) await this.callerKnown;
    if (this.admission.admitsHere(name, false)) return this.admission.refusalHere(name) === null;
    try {
      await this.admission.admitRemotely(name);
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
    if (d !== undefined && !(Number.isFinite(d) && d >= 0))
      throw new TypeError('record(): durationMs must be a finite number >= 0');
    this.inFlight.enter();
    try {
      if (this.callerKnown !== null) await this.callerKnown;
      if (this.queue.full && this.link.reachable) await this.queue.waitForSpace();
      this.recordOutcome(name, outcome.success ? SUCCESS : FAILURE, d);
    } finally {
      this.inFlight.leave();
    }
  }

  /**
   * This client's caller id, sent on every outcome and admission: option `caller`, or the default
   * (`credentialCaller` once GET /whoami has answered; undefined until then or when it failed).
   */
  get caller(): string | undefined {
    return this.currentCaller;
  }

  /** The default caller from GET /whoami (a transport without it, or a server before it: the host name). */
  private async learnCaller(): Promise<void> {
    try {
      const who = this.transport.whoami === undefined ? null : await this.transport.whoami();
      this.currentCaller = who === null ? defaultCaller() : credentialCaller(who.id, who.callers);
      this.askWhoamiAgain = false;
    } catch {
      // Unreachable or refused: outcomes go without a caller (a named credential's count as its id).
      this.askWhoamiAgain = true;
    } finally {
      this.callerKnown = null;
    }
  }

  /** The state this client currently believes (a forced state wins); undefined if it knows nothing yet. */
  state(name: string): CircuitState | undefined {
    if (!this.link.reachable) {
      const local = this.local.state(name);
      if (local !== undefined) return local;
    }
    const entry = this.view.get(name);
    return entry === undefined ? undefined : effectiveState(entry);
  }

  get connection(): ConnectionState {
    return this.link.connection;
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
      ...this.admission.counts,
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

  private assertOpen(): void {
    if (this.closing !== null) throw new ClientClosedError();
  }

  private async run<T, F>(
    name: string,
    fn: (signal: AbortSignal) => T,
    options: CallOptions<Awaited<T>, F>,
  ): Promise<Awaited<T> | Awaited<F>> {
    options.signal?.throwIfAborted(); // aborted while admitted: nothing ran, nothing is recorded
    const started = performance.now();
    let result: Awaited<T> | undefined;
    let thrown: { error: unknown } | null = null;
    const { timeoutMs, signal } = options;
    try {
      result =
        timeoutMs === undefined && signal === undefined
          ? await fn(NEVER_ABORTED)
          : await runFn(name, fn, timeoutMs, signal);
    } catch (error) {
      thrown = { error };
    }
    const durationMs = performance.now() - started;
    // The common case, a plain result with no classifier, without building the classifier's input.
    const plain =
      thrown === null &&
      options.classify === undefined &&
      options.isFailure === undefined &&
      (typeof result !== 'object' || result === null);
    const verdict = plain
      ? SUCCESS
      : verdictOf({ thrown, result, signal, deadlineMs: options.deadlineMs, durationMs, now: this.clock() }, options);
    this.recordOutcome(name, verdict, durationMs);
    if (verdict.classifierError !== undefined) throw verdict.classifierError;
    if (thrown === null) return result as Awaited<T>;
    if (options.fallback !== undefined) return await options.fallback(thrown.error);
    throw thrown.error;
  }

  private recordOutcome(name: string, verdict: Verdict, durationMs: number | undefined): void {
    const offline = !this.link.reachable;
    const entry = this.view.get(name);
    // What this client's own accounting sees: a success, a failure, or nothing (docs/client.md).
    const success = countsLocally(verdict, durationMs, entry?.json);
    if (success !== null) {
      if (offline) this.local.record(name, success, durationMs, this.admission.known(name));
      else if (entry !== undefined && entry.forced === null && entry.state === 'closed')
        this.throttles.record(name, entry.json, success);
    }
    // `at`: when the call ended, so circuitlog can tell an outcome replayed after an outage
    // (older than the circuit's last state change) from a fresh one.
    const at = isoTime(this.clock());
    const caller = this.caller;
    const { kind } = verdict;
    if (kind === 'success' || kind === 'failure') {
      const ok = kind === 'success';
      this.queue.push(
        durationMs === undefined
          ? { circuit: name, success: ok, at, caller }
          : { circuit: name, success: ok, duration_ms: round3(durationMs), at, caller },
        offline,
      );
      return;
    }
    const duration = durationMs === undefined ? {} : { duration_ms: round3(durationMs) };
    this.queue.push({ circuit: name, ...outcomeWire(verdict), ...duration, at, caller }, offline);
  }

  /** The outcome queue's hooks: batches go to the transport, delivery tells the link. */
  private queueHooks(): OutcomeQueueHooks {
    const { transport, link, events } = this;
    return {
      send: (batch) => transport.postOutcomes(batch),
      onDelivered: () => link.setReachable(true),
      onUnreachable: (error) => link.setReachable(false, error),
      onRejected: (count, error) => events.emit('rejected', { count, error }),
    };
  }

  /** The event stream's hooks: transitions update the view, the stream's state the link. */
  private streamHooks(): StreamHooks {
    const { link, view, throttles, events } = this;
    return {
      onOpen: () => {
        link.generation++; // every snapshot taken before this is re-taken on its next use
        link.set(true, true);
        this.queue.flush();
      },
      onEvent: (event) => {
        view.apply(event);
        // Counts start empty at a state change, as the server's (a shadow policy's changes nothing: issue 31).
        if (event.from !== event.to && event.shadow !== true) throttles.forget(event.circuit);
        events.emit('transition', event);
      },
      onReset: (reset) => {
        // Transitions may have been missed: every snapshot is re-taken on its next use.
        link.generation++;
        events.emit('reset', reset);
      },
      onDown: (error) =>
        link.set(false, error === null || error.kind === 'rejected' ? link.reachable : false, error ?? undefined),
    };
  }

  /** Wait for calls under way and the queue's delivery (at most `closeTimeoutMs`), then stop everything. */
  private async shutdown(): Promise<void> {
    const { inFlight, queue, stream, transport, closeTimeoutMs } = this;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), closeTimeoutMs)));
    const done = (async () => {
      if (inFlight.busy) await inFlight.idle();
      queue.flush();
      await queue.drained();
      return true;
    })();
    const delivered = await Promise.race([done, expired]);
    clearTimeout(timer);
    const pending = queue.pending;
    queue.stop();
    stream.stop();
    await transport.close();
    if (!delivered) {
      throw new CircuitlogUnavailableError(
        `close(): ${pending} outcome(s) not acknowledged by circuitlog within ${closeTimeoutMs} ms`,
      );
    }
  }

  /** React to a change of the connection state, and report it. */
  private linkChanged(before: ConnectionState, after: ConnectionState, error?: Error): void {
    if (before === 'offline') this.local.clear(); // back in touch: the server's state wins
    if (after === 'offline') {
      this.queue.releaseWaiters(); // calls waiting for room go on behind the local breaker
      this.stream.retryNow();
    }
    if (after === 'connected') {
      if (this.askWhoamiAgain && this.callerKnown === null) this.callerKnown = this.learnCaller();
      for (const resolve of this.readyWaiters.splice(0)) resolve();
    }
    this.events.emit('connection', error === undefined ? { state: after } : { state: after, error });
  }
}

/** A tiny typed event emitter; a listener that throws is reported as a process warning, never into the client. */
class Emitter<Events> {
  private readonly listeners = new Map<keyof Events, Set<(payload: never) => void>>();

  on<K extends keyof Events>(event: K, listener: (payload: Events[K]) => void): () => void {
    let set = this.listeners.get(event);
    if (set === undefined) this.listeners.set(event, (set = new Set()));
    set.add(listener as (payload: never) => void);
    return () => set.delete(listener as (payload: never) => void);
  }

  emit<K extends keyof Events>(event: K, payload: Events[K]): void {
    const set = this.listeners.get(event);
    if (set === undefined) return;
    for (const listener of set) {
      try {
        (listener as (payload: Events[K]) => void)(payload);
      } catch (error) {
        process.emitWarning(error instanceof Error ? error : String(error), { code: 'CIRCUITLOG_LISTENER_THREW' });
      }
    }
  }
}
