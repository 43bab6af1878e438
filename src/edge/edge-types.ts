/**
 * The edge agent's parts, as ports between them (issue 32; docs/gateways.md): the admission
 * that answers `GET /circuits/:name/allowed` (decided here on a closed circuit, asked of the
 * server otherwise), the sink outcomes go into (batched to the server), and the counter of
 * what the agent dropped as noise.
 */
import type { OutcomeItem } from '../client/transport.js';

/** An HTTP answer, as the server gives it (or as the agent gives it in the server's place). */
export interface EdgeAnswer {
  readonly status: number;
  /** Lower-case header names. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** What `GET /circuits/:name/allowed?caller=` answers through the agent: the server's own answer. */
export interface EdgeDecider {
  allowed(name: string, caller: string | undefined, requestId: string | undefined): Promise<EdgeAnswer>;
}

/** Where outcomes go: the agent's queue to the server. False: refused, the queue is full. */
export interface OutcomeSink {
  accept(items: readonly OutcomeItem[]): boolean;
}

/** A logger as the agent uses it (pino's shape). */
export interface EdgeLogger {
  info(fields: Record<string, unknown>, message?: string): void;
  warn(fields: Record<string, unknown>, message?: string): void;
}

/**
 * Input dropped as noise (a malformed syslog line, an unknown circuit, a name that breaks the
 * rules): counted by reason, and reported in at most one log line per `intervalMs`
 * (`edge_dropped`, with the counts since the last one and one example), never more.
 */
export class DropCounter {
  private readonly totals = new Map<string, number>();
  private pending = new Map<string, number>();
  private example: { reason: string; detail: string } | null = null;
  private lastLogAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly logger: EdgeLogger,
    private readonly clock: () => number = Date.now,
    private readonly intervalMs = 10_000,
  ) {}

  /** Count one dropped input; `detail` (cut to 200 characters) may appear in the next log line. */
  drop(reason: string, detail: string): void {
    this.totals.set(reason, (this.totals.get(reason) ?? 0) + 1);
    this.pending.set(reason, (this.pending.get(reason) ?? 0) + 1);
    this.example ??= { reason, detail: detail.slice(0, 200) };
    const now = this.clock();
    if (now - this.lastLogAt >= this.intervalMs) this.report(now);
    else if (this.timer === null) {
      this.timer = setTimeout(() => this.report(this.clock()), this.intervalMs - (now - this.lastLogAt));
      this.timer.unref();
    }
  }

  /** Totals since start, by reason. */
  counts(): Record<string, number> {
    return Object.fromEntries(this.totals);
  }

  /** Stop the pending report (at shutdown). */
  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private report(now: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.pending.size === 0) return;
    this.lastLogAt = now;
    const dropped = Object.fromEntries(this.pending);
    this.logger.warn({ event: 'edge_dropped', dropped, example: this.example }, 'edge agent dropped input');
    this.pending = new Map();
    this.example = null;
  }
}
