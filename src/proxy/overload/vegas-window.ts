/** The sampling windows of the Vegas limit (vegas-limit.ts): the answers counted, their latencies kept for a median. */

const KEPT_SAMPLES = 1_000; // latencies kept per window for its median (a bound on memory)

/** A sampling window of answers (vegas-limit.ts). */
export interface Window {
  startedAt: number;
  count: number;
  /** The first KEPT_SAMPLES latencies (ms): the window's latency is their median. */
  rtts: number[];
  maxInFlight: number;
  dropped: boolean;
  /** Requests were refused during the window: the limit binds. */
  shed: boolean;
}

/** A window opening at `now`, with no answers yet. */
export function emptyWindow(now: number): Window {
  return { startedAt: now, count: 0, rtts: [], maxInFlight: 0, dropped: false, shed: false };
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
