/**
 * The edge agent's core (issue 32; docs/gateways.md): a local view of the server's circuits,
 * kept by its event stream, built from the client library's own parts (src/client: the
 * transport, the stream keeper, the view and its link, the outcome queue, the local breakers).
 *
 * - `GET /allowed` on a circuit the view shows closed, plain (no forced state, throttle, ramp,
 *   cool-down, isolated caller or shadow policy: each of those is decided per call, by the
 *   server) and trusted (its snapshot was taken under the stream still open, and no event for
 *   it has arrived since) is answered here with the server's own last answer for it. Anything
 *   else is asked of the server and its answer relayed as is: an open or half-open circuit's
 *   probes stay exact across the fleet.
 * - Outcomes are acknowledged once queued and sent in batches (at most one per `flush_ms`
 *   while they flow); while the server is unreachable they are kept up to
 *   `max_queued_outcomes`, each with the time it arrived here (`at`), so the server applies an
 *   outcome older than the circuit's last change as a late one.
 * - While the server is unreachable `GET /allowed` is answered behind a local breaker per
 *   circuit (`fail_open`), or refused with `CIRCUITLOG_UNAVAILABLE`.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { backoffDelay } from '../client/sse.js';
import { LocalBreakers } from '../client/local-breaker.js';
import { OutcomeQueue } from '../client/outcome-queue.js';
import { StreamKeeper } from '../client/sse.js';
import { authHeaders, type AuthHeaders } from '../client/token-source.js';
import { TransportError, type CircuitJson, type OutcomeItem, type Transport } from '../client/transport.js';
import { createHttpTransport } from '../client/http-transport.js';
import { CircuitView, Link, effectiveState, type ViewEntry } from '../client/view.js';
import type { EdgeConfig } from '../config/edge-schema.js';
import { circuitNameProblem } from '../domain/circuit-name.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import { AppError } from '../domain/errors.js';
import { problemParts } from '../http/problem.js';
import { newRequestId } from '../request-id.js';
import { deliverSplitting } from './batch-split.js';
import { EdgeCredential } from './edge-credential.js';
import type { EdgeAnswer, EdgeDecider, EdgeLogger, OutcomeSink } from './edge-types.js';

/** A snapshot is asked for again after this long (a policy changes without a transition). */
const SNAPSHOT_TTL_MS = 60_000;
/** ... and sooner while the server does not know the circuit yet (its first outcome creates it). */
const UNKNOWN_SNAPSHOT_TTL_MS = 1_000;
/** Largest answer the agent relays from the server for the hot routes. */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** The server refuses a batch naming more callers than this (MAX_BATCH_CALLERS). */
const MAX_BATCH_CALLERS = 100;
const JSON_TYPE = 'application/json';

export interface EdgeAgentDeps {
  /** The server's base URL. */
  readonly server: string;
  readonly config: EdgeConfig;
  /** The bearer token the agent sends the server on its own requests (`read` and `report` scopes suffice). */
  readonly token?: string;
  readonly logger: EdgeLogger;
  readonly clock?: () => number;
  readonly random?: () => number;
  /** For tests: replaces the client library's HTTP transport. */
  readonly transport?: Transport;
}

export interface EdgeStats {
  readonly connection: string;
  readonly local_decisions: number;
  readonly server_checks: number;
  readonly offline_decisions: number;
  readonly outcomes_accepted: number;
  readonly outcomes_acknowledged: number;
  readonly outcomes_pending: number;
  readonly outcomes_dropped: number;
  readonly outcomes_rejected: number;
  readonly batches_sent: number;
  readonly circuits: number;
  /** The agent's credential as `GET /whoami` answered it (`anonymous` without credentials); null until then. */
  readonly credential: string | null;
}

/** The server's answer to `GET /allowed` for a circuit the agent decides, ready to write. */
export interface Snapshot {
  readonly text: string;
  readonly bytes: Buffer;
  /** Its Content-Length. */
  readonly length: string;
}

/** What a relayed request carries. */
export interface RelayRequest {
  readonly method: string;
  /** Path and query, as received. */
  readonly target: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

/** The server did not answer (refused, reset, timed out). */
export class ServerUnreachable extends Error {
  constructor(cause: unknown) {
    super(`circuitlog did not answer: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'ServerUnreachable';
  }
}

export class EdgeAgent implements EdgeDecider, OutcomeSink {
  readonly clock: () => number;
  private readonly view: CircuitView;
  private readonly link: Link;
  private readonly local: LocalBreakers;
  private readonly queue: OutcomeQueue;
  private readonly stream: StreamKeeper;
  private readonly transport: Transport;
  /** The agent's own connections to the server, for the answers it relays. */
  private readonly pool: Pool;
  private readonly auth: AuthHeaders;
  private readonly prefix: string;
  /** The server's answer per trusted snapshot (dropped with its view entry). */
  private readonly answers = new WeakMap<ViewEntry, Snapshot>();
  private readonly counts = {
    localDecisions: 0,
    serverChecks: 0,
    offlineDecisions: 0,
    outcomesAccepted: 0,
    batchesSent: 0,
    /** Items the server refused alone, out of a batch delivered in parts (batch-split.ts). */
    refusedAlone: 0,
  };
  private closed = false;
  /**
   * Who numbers the outcomes this agent sends (a random id per process) and the last number
   * given: the server applies each numbered outcome at most once (`domain/outcome-source.ts`),
   * so a batch sent again after a lost answer counts once. Batches go one at a time, in order.
   */
  readonly source = `edge-${randomUUID()}`;
  /** The agent's credential as the server sees it: what it would refuse of it is refused here, alone. */
  readonly credential = new EdgeCredential();
  private seq = 0;
  /** False once the server refused numbered outcomes (a server before issue 32). */
  private numbered = true;
  /** When the last batch was sent (`performance.now()`). */
  private lastSentAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: EdgeAgentDeps) {
    const { config } = deps;
    this.clock = deps.clock ?? Date.now;
    const base = new URL(deps.server);
    this.prefix = base.pathname.replace(/\/+$/, '');
    this.auth = authHeaders(deps.token || undefined, undefined);
    this.transport =
      deps.transport ??
      createHttpTransport({
        url: deps.server,
        token: deps.token,
        requestTimeoutMs: config.request_timeout_ms,
        streamIdleTimeoutMs: 45_000,
        connections: 4,
      });
    this.pool = new Pool(base.origin, {
      connections: 32,
      headersTimeout: config.request_timeout_ms,
      bodyTimeout: config.request_timeout_ms,
    });
    this.view = new CircuitView(config.max_circuits);
    this.link = new Link((before, after, error) => this.linkChanged(before, after, error));
    this.local = new LocalBreakers(
      this.clock,
      {
        failureThreshold: POLICY_DEFAULTS.circuit.failureThreshold,
        timeoutSeconds: POLICY_DEFAULTS.circuit.timeoutSeconds,
        halfOpenMaxCalls: POLICY_DEFAULTS.circuit.halfOpenMaxCalls,
      },
      POLICY_DEFAULTS.probeLeaseSeconds * 1000,
      config.max_circuits,
      deps.random,
    );
    const maxBatch = 1_000; // the server's MAX_BATCH_OUTCOMES
    this.queue = new OutcomeQueue(
      {
        flushAt: maxBatch,
        maxBatch,
        maxInFlight: 1, // one batch at a time: at most one per flush_ms while outcomes flow
        flushDelayMs: config.flush_ms,
        capacity: config.max_queued_outcomes,
        retryDelayMs: (attempt) => backoffDelay(attempt, 5_000),
        maxCallers: MAX_BATCH_CALLERS,
      },
      {
        send: (batch) =>
          deliverSplitting(
            batch,
            (items) => this.send(items),
            () => this.numbered,
            (count, error) => this.refusedAlone(count, error),
          ),
        onDelivered: () => this.link.setReachable(true),
        onUnreachable: (error) => this.link.setReachable(false, error),
        onRejected: (count, error) =>
          deps.logger.warn(
            { event: 'edge_outcomes_rejected', count, status: error.status, detail: error.message },
            'circuitlog refused outcomes',
          ),
      },
    );
    this.stream = new StreamKeeper(
      this.transport,
      {
        onOpen: () => {
          this.link.generation++; // every snapshot taken before is asked for again
          this.link.set(true, true);
          this.queue.flush();
          void this.credential.learn(async () =>
            this.relay({ method: 'GET', target: '/whoami', headers: await this.ownHeaders(undefined) }),
          );
        },
        onEvent: (event) => {
          if (event.shadow === true) return; // a shadow policy changes nothing of the circuit (issue 31)
          this.view.apply(event);
          // Whatever the event says, the next call asks the server once (and takes a fresh snapshot):
          // a caller isolated or released, a cool-down or a ramp are decided per call there.
          const entry = this.view.get(event.circuit);
          if (entry !== undefined) entry.generation = -1;
        },
        onReset: () => {
          this.link.generation++;
        },
        onDown: (error) =>
          this.link.set(
            false,
            error === null || error.kind === 'rejected' ? this.link.reachable : false,
            error ?? undefined,
          ),
      },
      5_000,
    );
  }

  /** Follow the server's event stream (reconnecting for ever, with backoff). */
  start(): void {
    this.stream.start();
  }

  /** Following the server's stream, and the server answers. */
  get ready(): boolean {
    return this.link.connection === 'connected';
  }

  stats(): EdgeStats {
    const q = this.queue.stats();
    return {
      connection: this.link.connection,
      local_decisions: this.counts.localDecisions,
      server_checks: this.counts.serverChecks,
      offline_decisions: this.counts.offlineDecisions,
      outcomes_accepted: this.counts.outcomesAccepted,
      outcomes_acknowledged: q.acknowledged - this.counts.refusedAlone,
      outcomes_pending: this.queue.pending,
      outcomes_dropped: q.dropped,
      outcomes_rejected: q.rejected + this.counts.refusedAlone,
      batches_sent: this.counts.batchesSent,
      circuits: this.view.size,
      credential: this.credential.id,
    };
  }

  /**
   * `GET /circuits/:name/allowed[?caller=]`: the server's answer, given here from the last
   * snapshot of a plain closed circuit, else asked of the server (or of the local breaker while
   * it is unreachable).
   */
  async allowed(name: string, caller: string | undefined, requestId: string | undefined): Promise<EdgeAnswer> {
    const refused = this.credential.callerRefusal(caller); // the server's 403, even where the circuit is decided here
    if (refused !== null) throw refused;
    const local = this.localAnswer(name, requestId);
    if (local !== null) return local;
    return this.allowedRemotely(name, caller, requestId);
  }

  /** The answer decided here without asking (counted), or null. Synchronous: the hot path. */
  localAnswer(name: string, requestId: string | undefined): EdgeAnswer | null {
    const local = this.localBody(name);
    if (local === null) return null;
    return {
      status: 200,
      headers: { 'content-type': JSON_TYPE, 'x-request-id': requestId ?? newRequestId() },
      body: local.text,
    };
  }

  /** The server's last answer for a circuit decided here (counted), or null: the raw listener's hot path. */
  localBody(name: string): Snapshot | null {
    const entry = this.decidable(name);
    if (entry === undefined) return null;
    this.counts.localDecisions++;
    return this.answers.get(entry)!;
  }

  /**
   * The circuit's entry when the agent may decide it alone: closed and plain in a snapshot taken
   * under the stream still open, no event since, not due to be asked again; else undefined.
   */
  private decidable(name: string): ViewEntry | undefined {
    const entry = this.view.get(name);
    if (entry === undefined || !this.link.trusts(entry) || entry.state !== 'closed' || entry.forced !== null)
      return undefined;
    if (this.clock() >= entry.policyDueAt || !this.answers.has(entry)) return undefined;
    return entry;
  }

  private async allowedRemotely(
    name: string,
    caller: string | undefined,
    requestId: string | undefined,
  ): Promise<EdgeAnswer> {
    const problem = circuitNameProblem(name);
    const query = caller === undefined ? '' : `?caller=${encodeURIComponent(caller)}`;
    const target = `/circuits/${encodeURIComponent(name)}/allowed${query}`;
    if (problem !== null && this.link.reachable) {
      // The server's own 400 for it, without remembering the name.
      return this.relayOrOffline(name, target, requestId, null);
    }
    if (problem !== null)
      return this.problem(new AppError('INVALID_NAME', `Circuit name ${problem}.`), target, requestId);
    if (!this.link.reachable) return this.offlineAllowed(name, target, requestId);
    return this.relayOrOffline(name, target, requestId, this.view.getOrCreate(name));
  }

  private async relayOrOffline(
    name: string,
    target: string,
    requestId: string | undefined,
    entry: ViewEntry | null,
  ): Promise<EdgeAnswer> {
    const seq = entry?.eventSeq ?? 0;
    const generation = this.link.streamUp ? this.link.generation : -1;
    let answer: EdgeAnswer;
    try {
      answer = await this.relay({ method: 'GET', target, headers: await this.ownHeaders(requestId) });
    } catch (error) {
      if (!(error instanceof ServerUnreachable)) throw error;
      this.link.setReachable(false, error);
      return this.offlineAllowed(name, target, requestId);
    }
    this.counts.serverChecks++;
    if (answer.status >= 500 && answer.headers['content-type']?.startsWith('application/problem+json') !== true) {
      // Not circuitlog's answer (a proxy in between, a crash): unreachable, as the client library counts it.
      this.link.setReachable(false, new Error(`circuitlog answered ${answer.status}`));
      return this.offlineAllowed(name, target, requestId);
    }
    this.link.setReachable(true);
    if (entry !== null) this.learn(entry, answer, seq, generation);
    return answer;
  }

  /** Keep the answer as the circuit's snapshot when it is a plain closed one, asked with no event since. */
  private learn(entry: ViewEntry, answer: EdgeAnswer, seq: number, generation: number): void {
    if (answer.status !== 200 || entry.eventSeq !== seq) return;
    let parsed: { allowed?: unknown; state?: unknown; circuit?: unknown };
    try {
      parsed = JSON.parse(answer.body) as typeof parsed;
    } catch {
      return;
    }
    const circuit = (parsed.circuit ?? null) as CircuitJson | null;
    if (parsed.allowed !== true || parsed.state !== 'closed' || !plainClosed(parsed, circuit)) {
      entry.generation = -1;
      return;
    }
    entry.state = 'closed';
    entry.forced = null;
    entry.json = circuit;
    entry.generation = this.link.streamUp && this.link.generation === generation ? generation : -1;
    entry.policyDueAt = this.clock() + (circuit === null ? UNKNOWN_SNAPSHOT_TTL_MS : SNAPSHOT_TTL_MS);
    const bytes = Buffer.from(answer.body, 'utf8');
    this.answers.set(entry, { text: answer.body, bytes, length: String(bytes.length) });
  }

  /** While the server is unreachable: the local breaker's answer, or CIRCUITLOG_UNAVAILABLE. */
  private offlineAllowed(name: string, target: string, requestId: string | undefined): EdgeAnswer {
    if (!this.deps.config.fail_open) {
      return this.problem(
        new AppError(
          'CIRCUITLOG_UNAVAILABLE',
          `circuitlog is unreachable and the edge agent's fail_open is false: the call on '${name}' is refused.`,
          { retryAfterSeconds: 1 },
        ),
        target,
        requestId,
      );
    }
    const problem = circuitNameProblem(name);
    if (problem !== null)
      return this.problem(new AppError('INVALID_NAME', `Circuit name ${problem}.`), target, requestId);
    this.counts.offlineDecisions++;
    const entry = this.view.get(name);
    const known = entry === undefined ? undefined : { state: effectiveState(entry), json: entry.json };
    const verdict = this.local.admit(name, known);
    const state = this.local.state(name) ?? 'closed';
    if (verdict.allowed) {
      const body = `${JSON.stringify({ allowed: true, state, circuit: entry?.json ?? null, edge: 'offline' })}\n`;
      return { status: 200, headers: { 'content-type': JSON_TYPE, 'x-request-id': requestId ?? newRequestId() }, body };
    }
    return this.problem(
      new AppError('CIRCUIT_OPEN', `Circuit '${name}' is open at the edge agent (circuitlog is unreachable).`, {
        retryAt: verdict.retryAt,
        extensions: { name, state, open_until: new Date(verdict.retryAt).toISOString(), edge: 'offline' },
      }),
      target,
      requestId,
    );
  }

  /**
   * Queue outcomes for the server (an `at` added to each that has none: when it reached the
   * agent). False: the queue is full while the server is reachable (the caller retries).
   */
  accept(items: readonly OutcomeItem[]): boolean {
    const offline = !this.link.reachable;
    if (!offline && this.queue.full) return false;
    const at = new Date(this.clock()).toISOString();
    for (const item of items) {
      const timed = { ...item, at: item.at ?? at, seq: ++this.seq };
      if (offline) this.recordLocally(timed);
      this.queue.push(timed, offline);
    }
    this.counts.outcomesAccepted += items.length;
    return true;
  }

  /** Whether outcomes for this circuit are welcome as they are: the view knows it closed and plain (the `/call` fast path). */
  decidesLocally(name: string): CircuitJson | undefined {
    const entry = this.decidable(name);
    // Undecidable here; or a circuit the server does not know yet: its /call creates it and answers it, never `circuit: null`.
    if (entry?.json == null) return undefined;
    this.counts.localDecisions++;
    return entry.json;
  }

  /** Does the server know this circuit? (asked once, then kept in the view; used by the syslog intake) */
  async knows(name: string): Promise<boolean> {
    const entry = this.view.get(name);
    if (entry?.json != null) return true;
    try {
      return (await this.transport.circuit(name)) !== null;
    } catch {
      return false;
    }
  }

  /** Relay one request to the server and read its answer whole (within the bound). */
  async relay(request: RelayRequest): Promise<EdgeAnswer> {
    let res: Awaited<ReturnType<Pool['request']>>;
    try {
      res = await this.pool.request({
        method: request.method as 'GET',
        path: `${this.prefix}${request.target}`,
        headers: request.headers,
        body: request.body,
      });
    } catch (error) {
      throw new ServerUnreachable(error);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_ANSWER_BYTES) {
          res.body.destroy();
          throw new Error(`answer over ${MAX_ANSWER_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      throw new ServerUnreachable(error);
    }
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(res.headers)) {
      if (value === undefined || HOP_BY_HOP.has(key)) continue;
      headers[key] = Array.isArray(value) ? value.join(', ') : value;
    }
    return { status: res.statusCode, headers, body: Buffer.concat(chunks).toString('utf8') };
  }

  /** The agent's own request headers to the server: its token and the request id. */
  async ownHeaders(requestId: string | undefined): Promise<Record<string, string>> {
    const headers: Record<string, string> = { ...(await this.auth()) };
    if (requestId !== undefined) headers['x-request-id'] = requestId;
    return headers;
  }

  /** The pool the HTTP layer streams passed-through requests on. */
  get dispatcher(): Pool {
    return this.pool;
  }

  get basePath(): string {
    return this.prefix;
  }

  /** A problem document as the server renders it. */
  problem(error: AppError, target: string, requestId: string | undefined): EdgeAnswer {
    // `instance` is the path as sent, without the query, as the server's (docs/api.md, Circuit names).
    const path = target.split('?', 1)[0]!;
    const { status, headers, body } = problemParts(error, path, requestId ?? newRequestId(), this.clock());
    return { status, headers, body };
  }

  /**
   * One batch to the server, numbered (`source`, `seq`). A server from before issue 32 refuses the
   * two members (422 naming `source`): the agent then sends without them from there on (logged
   * once), each outcome at least once rather than exactly once.
   */
  private refusedAlone(count: number, error: TransportError): void {
    this.counts.refusedAlone += count;
    this.deps.logger.warn(
      { event: 'edge_outcomes_rejected', count, status: error.status, detail: error.message, split: true },
      'circuitlog refused outcomes (the rest of their batch was delivered)',
    );
  }

  private async send(batch: readonly OutcomeItem[]): Promise<void> {
    // At most one batch per flush_ms, also when the previous one was answered sooner: what arrives
    // meanwhile waits for the next batch (the queue sends one at a time).
    // (A timer may fire a little early by this clock: wait again until the time has come.)
    for (let wait = this.waitBeforeSend(); wait > 0; wait = this.waitBeforeSend())
      await new Promise((resolve) => setTimeout(resolve, wait));
    this.lastSentAt = performance.now();
    this.counts.batchesSent++;
    if (this.numbered) {
      try {
        return await this.transport.postOutcomes(batch, this.source);
      } catch (error) {
        if (!refusesSource(error)) throw error;
        this.numbered = false;
        this.deps.logger.warn(
          { event: 'edge_unnumbered', detail: 'the server does not take numbered outcomes (source, seq)' },
          'circuitlog is older than the agent: outcomes are sent without numbers (at least once)',
        );
      }
    }
    return this.transport.postOutcomes(batch.map(({ seq: _seq, ...item }) => item));
  }

  private waitBeforeSend(): number {
    return this.lastSentAt + this.deps.config.flush_ms - performance.now();
  }

  /** Stop taking outcomes, deliver what is queued (at most `timeoutMs`), stop following the stream. */
  async close(timeoutMs = 5_000): Promise<{ delivered: boolean; pending: number }> {
    if (this.closed) return { delivered: true, pending: this.queue.pending };
    this.closed = true;
    this.queue.flush();
    let timer: NodeJS.Timeout | undefined;
    const delivered = await Promise.race([
      this.queue.drained().then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
    ]);
    clearTimeout(timer);
    const pending = this.queue.pending;
    this.queue.stop();
    this.stream.stop();
    await Promise.allSettled([this.transport.close(), this.pool.close()]);
    return { delivered, pending };
  }

  private recordLocally(item: OutcomeItem): void {
    const success = item.success ?? (item.kind === 'success' ? true : item.kind === 'failure' ? false : undefined);
    if (success === undefined) return; // a kind that is not the dependency's fault counts nothing
    const entry = this.view.get(item.circuit);
    const known = entry === undefined ? undefined : { state: effectiveState(entry), json: entry.json };
    this.local.record(item.circuit, success, item.duration_ms, known);
  }

  private linkChanged(before: string, after: string, error?: Error): void {
    if (before === 'offline') this.local.clear(); // back in touch: the server's state wins
    if (after === 'offline') this.stream.retryNow();
    this.deps.logger.info(
      error === undefined
        ? { event: 'edge_connection', from: before, to: after }
        : { event: 'edge_connection', from: before, to: after, error: error.message },
      `edge agent ${after}`,
    );
  }
}

/** A 422 naming the batch's `source` as unknown: a server from before numbered outcomes. */
function refusesSource(error: unknown): boolean {
  if (!(error instanceof TransportError) || error.status !== 422) return false;
  const errors = (error.problem as { errors?: unknown } | null)?.errors;
  return Array.isArray(errors) && errors.some((e) => (e as { field?: unknown } | null)?.field === 'source');
}

/** Headers that belong to one connection, never relayed (RFC 9110 section 7.6.1). */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
]);

/**
 * A closed circuit the agent may decide alone: not forced, no shadow policy, no soft throttle,
 * no ramp or cool-down, no isolated caller (each decided per call by the server), and an
 * answer without per-call members.
 */
function plainClosed(answer: Record<string, unknown>, c: CircuitJson | null): boolean {
  if ('would_refuse' in answer || 'shadow_would_refuse' in answer || 'ramp_percent' in answer) return false;
  if (c === null) return true;
  if (c.forced_state != null || c.shadow != null || c.throttle != null) return false;
  if (c.cool_until != null || c.ramp_until != null) return false;
  if (Array.isArray(c.isolated_callers) && c.isolated_callers.length > 0) return false;
  if (Array.isArray(c.cooling_callers) && c.cooling_callers.length > 0) return false;
  return true;
}
