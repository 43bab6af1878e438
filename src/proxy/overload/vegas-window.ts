/** The sampling windows of the Vegas limit (vegas-limit.ts): the answers counted, their latencies kept for a median. */

/** What the Vegas limit needs; validated by the config schema (min <= initial <= max). */
export interface VegasSettings {
  readonly initial: number;
  readonly min: number;
  readonly max: number;
  /** Shortest sampling window (ms); a window also needs MIN_SAMPLES answers. */
  readonly windowMs: number;
  /** Longest time the no-load latency goes without a fresh measurement while the limit refuses (ms). */
  readonly probeIntervalMs: number;
}

/** A request the limit admitted: handed back with its answer. */
export interface Sample {
  readonly startedAt: number;
  /** Requests in flight when it was sent, itself included. */
  readonly inFlight: number;
  /** The probe it was sent during (0: none). */
  readonly probe: number;
}

const KEPT_SAMPLES = 1_000; // latencies kept per window for its median (a bound on memory)

/** A sampling window of answers (vegas-limit.ts). */
export interface Window {
  startedAt: number;
  count: number;
  /** The first KEPT_SAMPLES latencies (ms): the window's latency is their median. */
  rtts: number[];
  /** The most in flight when an answered request was sent. */
  maxInFlight: number;
  /** The most in flight when any request was sent during the window (demand). */
  maxSent: number;
  dropped: boolean;
  /** Requests were refused during the window: the limit binds. */
  shed: boolean;
}

/** A window opening at `now`, with no answers yet. */
export function emptyWindow(now: number): Window {
  return { startedAt: now, count: 0, rtts: [], maxInFlight: 0, maxSent: 0, dropped: false, shed: false };
}

/** Count one answer into the window. */
export function addSample(w: Window, rttMs: number, inFlight: number, dropped: boolean): void {
  w.count++;
  if (w.rtts.length < KEPT_SAMPLES) w.rtts.push(rttMs);
  if (inFlight > w.maxInFlight) w.maxInFlight = inFlight;
  if (dropped) w.dropped = true;
}

/** The median of `values` (sorts them in place). */
export function median(values: number[]): number {
  values.sort((a, b) => a - b);
  const mid = values.length >> 1;
  return values.length % 2 === 1 ? values[mid]! : (values[mid - 1]! + values[mid]!) / 2;
}

/** Judged windows in a row whose median queue estimate shrinks the limit. */
export const SUSTAIN = 3;

/**
 * The queue estimates of the last few judged windows (vegas-limit.ts): the limit shrinks by their
 * median. One window inflated by a stall (of the upstream's process, of the machine) is one high
 * value among lower ones and moves no median of three; queueing that the limit causes shows in
 * every window until the limit falls.
 */
export class QueueRun {
  private readonly values: number[] = [];

  constructor(private readonly length: number) {}

  /** Add a window's estimate; returns the median of the last `length` since `clear` (fewer at first). */
  push(queue: number): number {
    this.values.push(queue);
    if (this.values.length > this.length) this.values.shift();
    return median([...this.values]);
  }

  clear(): void {
    this.values.length = 0;
  }
}
