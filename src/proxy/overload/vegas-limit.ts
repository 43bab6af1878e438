/**
 * An adaptive concurrency limit after TCP Vegas (L. Brakmo, L. Peterson, "TCP Vegas: End to
 * End Congestion Avoidance on a Global Internet", IEEE JSAC 13(8), 1995), as Netflix's
 * concurrency-limits applies it to requests (`VegasLimit`,
 * https://github.com/Netflix/concurrency-limits). Written here from the algorithm, not ported.
 *
 * Requests are sampled in windows (at least `windowMs` and `MIN_SAMPLES` answers). A window's
 * average latency `rtt`, against the no-load latency `noLoad` (the lowest window seen since the
 * last re-measurement), estimates how many requests are waiting in the upstream's queue:
 * `queue = limit * (1 - noLoad / rtt)`. Few waiting: the limit grows; more than `beta` waiting:
 * it shrinks by half the excess; in between it holds. A window in which fewer than half the
 * limit were in flight says nothing about capacity (the caller was the bottleneck), so the limit
 * holds, and its latency re-measures `noLoad` (no probe needed: Envoy issue 8337).
 *
 * Only when the limit is refusing requests and `noLoad` has gone a probe interval without a
 * fresh measurement is it re-measured by a probe: the limit is halved (never below `min`) until
 * `MIN_SAMPLES` requests sent during the probe have come back. Envoy's adaptive_concurrency
 * probes on a timer at any load and pins the limit to its minimum meanwhile, refusing the rest:
 * the 503 bursts of envoyproxy/envoy#8337. Here a load the limit admits in full never sees a
 * probe, and half the limit keeps half the traffic flowing (halving also converges when the old
 * limit was too high). The interval starts at 1 s (the first windows may be measured under
 * load) and doubles after each probe up to `probeIntervalMs`.
 */

/** What the algorithm needs; validated by the config schema (min <= initial <= max). */
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

export const MIN_SAMPLES = 10;
const FIRST_PROBE_MS = 1_000; // 1 s after the first measurement; then doubling

interface Window {
  startedAt: number;
  count: number;
  sumRttMs: number;
  maxInFlight: number;
  dropped: boolean;
  /** Requests were refused during the window: the limit binds. */
  shed: boolean;
}

/** The limit's state; `limit` is what admission enforces now. */
export class VegasLimit {
  private estimate: number;
  private noLoadMs: number | null = null;
  private measuredAt: number;
  private window: Window;
  /** The probe in progress (a positive id) or 0. */
  private probe = 0;
  private probeStartedAt = 0;
  private probeWindow: Window | null = null;
  private probes = 0;
  private probeAfterMs: number;

  constructor(
    private readonly settings: VegasSettings,
    now: number,
  ) {
    this.estimate = settings.initial;
    this.probeAfterMs = Math.min(FIRST_PROBE_MS, settings.probeIntervalMs);
    this.measuredAt = now;
    this.window = emptyWindow(now);
  }

  /** The whole number of requests that may be in flight now. */
  get limit(): number {
    const whole = Math.floor(this.estimate);
    return this.probe === 0 ? whole : Math.max(this.settings.min, Math.floor(whole / 2));
  }

  /** The no-load latency estimate in ms (null before the first window). */
  get noLoad(): number | null {
    return this.noLoadMs;
  }

  get probing(): boolean {
    return this.probe !== 0;
  }

  /** A request is sent now with `inFlight` requests out (itself included). */
  sent(now: number, inFlight: number): Sample {
    return { startedAt: now, inFlight, probe: this.probe };
  }

  /** A request was refused for want of a slot. */
  refused(): void {
    this.window.shed = true;
  }

  /**
   * A sent request ended: `dropped` when it timed out (the upstream did not answer in time),
   * which shrinks the limit as Vegas does on a loss. Returns true when the limit changed.
   */
  answered(sample: Sample, now: number, dropped: boolean): boolean {
    const rttMs = Math.max(0, now - sample.startedAt);
    if (this.probe !== 0) return this.probeAnswer(sample, rttMs, now, dropped);
    addSample(this.window, rttMs, sample.inFlight, dropped);
    if (this.window.count < MIN_SAMPLES || now - this.window.startedAt < this.settings.windowMs) return false;
    const before = this.limit;
    this.closeWindow(this.window, now);
    this.window = emptyWindow(now);
    return this.limit !== before;
  }

  private closeWindow(w: Window, now: number): void {
    const rtt = w.sumRttMs / w.count;
    const appLimited = w.maxInFlight * 2 < this.estimate;
    const stale = now - this.measuredAt >= this.probeAfterMs;
    if (this.noLoadMs === null || rtt < this.noLoadMs || (appLimited && stale && !w.dropped)) {
      this.noLoadMs = rtt;
      this.measuredAt = now;
    }
    if (w.dropped) return this.set(this.estimate * 0.9);
    if (appLimited) return; // not a word on capacity: hold (Netflix: "prevent upward drift")
    if (stale && w.shed) return this.startProbe(now);
    const queue = this.estimate * (1 - this.noLoadMs / rtt);
    const alpha = Math.max(1, 0.05 * this.estimate);
    const beta = Math.max(2, 0.1 * this.estimate);
    if (queue < alpha / 2) this.set(this.estimate + beta);
    else if (queue < alpha) this.set(this.estimate + 1);
    else if (queue > beta) this.set(this.estimate - Math.max(1, (queue - alpha) / 2));
  }

  private startProbe(now: number): void {
    this.probe = ++this.probes;
    this.probeAfterMs = Math.min(this.probeAfterMs * 2, this.settings.probeIntervalMs);
    this.probeStartedAt = now;
    this.probeWindow = emptyWindow(now);
  }

  /** During a probe only requests sent during it count; one window of them ends it. */
  private probeAnswer(sample: Sample, rttMs: number, now: number, dropped: boolean): boolean {
    const w = this.probeWindow!;
    if (sample.probe === this.probe && sample.inFlight <= this.limit) addSample(w, rttMs, sample.inFlight, dropped);
    const timedOut = now - this.probeStartedAt > 10 * (this.noLoadMs ?? 0) + this.settings.windowMs;
    if (w.count < MIN_SAMPLES && !timedOut) return false;
    if (w.count >= MIN_SAMPLES && !w.dropped) this.noLoadMs = w.sumRttMs / w.count;
    this.measuredAt = now; // a failed probe is not retried before the next interval
    this.probe = 0;
    this.probeWindow = null;
    this.window = emptyWindow(now);
    return true;
  }

  private set(estimate: number): void {
    this.estimate = Math.min(this.settings.max, Math.max(this.settings.min, estimate));
  }
}

function emptyWindow(now: number): Window {
  return { startedAt: now, count: 0, sumRttMs: 0, maxInFlight: 0, dropped: false, shed: false };
}

function addSample(w: Window, rttMs: number, inFlight: number, dropped: boolean): void {
  w.count++;
  w.sumRttMs += rttMs;
  if (inFlight > w.maxInFlight) w.maxInFlight = inFlight;
  if (dropped) w.dropped = true;
}
