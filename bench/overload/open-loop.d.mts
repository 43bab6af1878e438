import type { Pool } from 'undici';

export interface OpenLoopResult {
  readonly sent: number;
  /** Arrivals not sent because maxOutstanding requests were unanswered. */
  readonly notSent: number;
  /** Requests that got no answer (connection error, timeout). */
  readonly errors: number;
  readonly answered: number;
  /** Every answer as [sentAtMs, latencyMs, status], flat (load-gen.mjs ships them to another process). */
  readonly records: readonly number[];
  readonly statuses: Readonly<Record<string, number>>;
  readonly elapsedMs: number;
  /** Latencies (ms) of answers with `status`, sorted; every answer when omitted. */
  latencies(status?: number): number[];
  /** Answers with `status` sent in [fromMs, toMs) after the start and answered within `withinMs`. */
  count(o: { status?: number; fromMs?: number; toMs?: number; withinMs?: number }): number;
}

export interface OpenLoopOptions {
  readonly pool: Pool;
  readonly path: string;
  readonly ratePerSecond: number;
  readonly durationMs: number;
  readonly maxOutstanding?: number;
  readonly maxRequests?: number;
  readonly timeoutMs?: number;
  readonly seed?: number;
  readonly onTick?: (elapsedMs: number) => void;
}

/** A pool to one loopback origin (throws for any other host). */
export function loopbackPool(url: string, connections?: number): Pool;
/** Send GETs on a Poisson schedule at a fixed rate, whatever the answers do; bounded. */
export function openLoop(o: OpenLoopOptions): Promise<OpenLoopResult>;
export function percentile(sorted: readonly number[], p: number): number;
