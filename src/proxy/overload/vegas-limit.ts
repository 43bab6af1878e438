/**
 * An adaptive concurrency limit after TCP Vegas (L. Brakmo, L. Peterson, "TCP Vegas: End to
 * End Congestion Avoidance on a Global Internet", IEEE JSAC 13(8), 1995), as Netflix's
 * concurrency-limits applies it (`VegasLimit`, https://github.com/Netflix/concurrency-limits).
 * Written here from the algorithm, not ported. docs/proxy.md#the-adaptive-algorithm.
 *
 * Requests are sampled in windows (at least `windowMs` and `MIN_SAMPLES` answers). A window's
 * median latency `rtt`, against the no-load latency `noLoad` (the lowest window since the last
 * re-measurement), estimates the upstream's queue: `queue = limit * (1 - noLoad / rtt)`. Few
 * waiting: the limit grows; more than `beta`: it shrinks by half the excess, at most a quarter a
 * window, judged on the median of the last SUSTAIN windows unless the limit just grew (a stall
 * of a process or of the machine inflates one window; queueing shows in every one); in between
 * it holds. A window with under three quarters of the limit in flight says nothing about
 * capacity (the caller set the pace): the limit holds, and such quiet windows re-measure `noLoad`.
 *
 * Only when the limit is refusing and `noLoad` has gone a probe interval without a fresh
 * measurement is it re-measured by a probe: the limit is halved (never below `min`) until
 * `MIN_SAMPLES` requests sent during the probe have come back. Envoy pins the limit to its
 * minimum on a timer at any load (the 503 bursts of envoyproxy/envoy#8337); here a load the
 * limit admits never sees a probe, and half the limit keeps flowing. The interval is 1 s,
 * doubling, while `noLoad` has only been seen under load, else `probeIntervalMs`.
 */

import type { Sample, VegasSettings, Window } from './vegas-window.js';
import { addSample, emptyWindow, median, QueueRun, SUSTAIN } from './vegas-window.js';

export type { Sample, VegasSettings } from './vegas-window.js';
export { SUSTAIN } from './vegas-window.js';

export const MIN_SAMPLES = 10;
const FIRST_PROBE_MS = 1_000; // 1 s after the first measurement; then doubling
const MAX_STEP = 0.25; // queueing shrinks the limit by at most a quarter per window (one odd window cannot halve it)
const LOSS_STEP = 0.1; // a timeout in the window: a tenth
/** A window with fewer in flight than this share of the limit is quiet: the caller, not the upstream, set the pace. */
const BUSY = 0.75;
/** Vegas's queue target as shares of the limit (at least 1 and 2 requests): grow below ALPHA, shrink above BETA. */
const ALPHA = 0.03;
const BETA = 0.06;
const DEMAND_GROWTH = 1.25; // growth on demand: at most a quarter per window

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
  /** The lowest latency of a quiet window since the last measurement: the next no-load latency. */
  private quietMs: number | null = null;
  /** `noLoad` comes from a quiet window or a probe, not only from windows under load. */
  private confirmed = false;
  /** The window after a probe: its answers were sent at half the limit, so it only refills. */
  private refilling = false;
  /** The last window showed no queueing: demand over the limit may raise it at once (`grow`). */
  private roomy = false;
  /** The estimate when the current window began (growth on demand: at most a quarter more per window). */
  private windowBase: number;
  /** The queue estimates of the last judged windows in a row. */
  private readonly run = new QueueRun(SUSTAIN);
  /** Judged windows left in which queueing is answered at once: the limit grew by more than one just before. */
  private surged = 0;

  constructor(
    private readonly settings: VegasSettings,
    now: number,
    /** This process's mean callback delay (ms) since the last call: taken off each window's latency (loop-lag.ts). */
    private readonly lagMs: () => number = () => 0,
  ) {
    this.estimate = settings.initial;
    this.windowBase = settings.initial;
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

  /** A request is sent now with `inFlight` requests out (itself included); the window's demand counts it. */
  sent(now: number, inFlight: number): Sample {
    if (inFlight > this.window.maxSent) this.window.maxSent = inFlight;
    return { startedAt: now, inFlight, probe: this.probe };
  }

  /**
   * A request finds the limit full. After a quiet window at the no-load latency, the limit grows
   * by one for it at once (at most a quarter a window), as TCP's slow start grows per
   * acknowledgement: a load rising from quiet is not refused. True when it grew (admit it).
   */
  grow(): boolean {
    if (
      this.probe !== 0 ||
      !this.roomy ||
      this.estimate + 1 > Math.min(this.settings.max, DEMAND_GROWTH * this.windowBase)
    )
      return false;
    this.estimate = Math.floor(this.estimate) + 1;
    this.surged = SUSTAIN;
    return true;
  }

  /** A request was refused for want of a slot. */
  refused(): void {
    this.window.shed = true;
  }

  /** A sent request ended (`dropped`: timed out, a loss for Vegas). True when the limit changed. */
  answered(sample: Sample, now: number, dropped: boolean): boolean {
    const rttMs = Math.max(0, now - sample.startedAt);
    if (this.probe !== 0) return this.probeAnswer(sample, rttMs, now, dropped);
    addSample(this.window, rttMs, sample.inFlight, dropped);
    if (this.window.count < MIN_SAMPLES || now - this.window.startedAt < this.settings.windowMs) return false;
    const before = this.limit;
    if (this.refilling) {
      this.refilling = false;
      this.lagMs(); // the refill window's delay is not the next window's
    } else this.closeWindow(this.window, now);
    this.window = emptyWindow(now);
    this.windowBase = this.estimate;
    return this.limit !== before;
  }

  private closeWindow(w: Window, now: number): void {
    const window = this.latencies(w);
    if (window === null) return; // mostly our own pause: the window says nothing of the upstream
    const rtt = window.raw;
    const appLimited = w.maxInFlight < BUSY * this.estimate;
    const stale = now - this.measuredAt >= (this.confirmed ? this.settings.probeIntervalMs : this.probeAfterMs);
    // A quiet window re-measures, with the best quiet window of the interval (one stalled
    // window, a GC pause, must not double the no-load latency).
    const quiet = appLimited && !w.dropped;
    this.roomy = false;
    if (quiet) this.quietMs = Math.min(this.quietMs ?? rtt, rtt);
    if (this.noLoadMs === null || rtt < this.noLoadMs) this.measured(rtt, now, quiet || this.confirmed);
    else if (quiet && stale) this.measured(this.quietMs!, now, true);
    if (w.dropped) {
      this.run.clear();
      this.shrink(w, LOSS_STEP * this.estimate);
      return;
    }
    if (appLimited) {
      this.run.clear();
      // about the no-load latency, and no demand near the limit: nothing queues
      this.roomy = w.maxSent < BUSY * this.estimate && rtt <= this.noLoadMs! * 1.05;
      return; // not a word on capacity: hold (Netflix: "prevent upward drift")
    }
    if (stale && w.shed) {
      this.startProbe(now);
      return;
    }
    // Our own delay may excuse latency, never add any: the no-load latency is measured raw.
    const queue = this.estimate * (1 - this.noLoadMs! / Math.max(this.noLoadMs!, window.excused));
    const alpha = Math.max(1, ALPHA * this.estimate);
    const beta = Math.max(2, BETA * this.estimate);
    // Right after the limit grew, act on this window's queue (the answer to it); else on the
    // median of the last SUSTAIN windows, both ways (one stalled or one fast window moves nothing).
    const median = this.run.push(queue);
    const judged = this.surged > 0 ? queue : median;
    this.surged = Math.max(0, this.surged - 1);
    this.roomy = false; // growth on demand is for a load rising from quiet (above)
    if (judged < alpha / 2) this.surge(this.estimate + beta);
    else if (judged < alpha) this.set(this.estimate + 1);
    else if (judged > beta) this.shrink(w, Math.min(MAX_STEP * this.estimate, Math.max(1, (judged - alpha) / 2)));
  }

  /** Grow by more than one: the next SUSTAIN windows answer queueing at once. */
  private surge(estimate: number): void {
    const before = this.estimate;
    this.set(estimate);
    if (this.estimate > before) this.surged = SUSTAIN;
  }

  /**
   * Shrink by `step`; while it refuses nothing, never below twice the window's peak in flight
   * (a latency blip must not turn a load the upstream takes into refusals); else only `min`.
   */
  private shrink(w: Window, step: number): void {
    const floor = w.shed ? this.settings.min : Math.min(this.estimate, 2 * w.maxInFlight);
    this.set(Math.max(floor, this.estimate - step));
  }

  /**
   * The window's median latency, raw and less this process's own delay over it (`excused`);
   * null when that delay is half the median or more (a paused proxy: no upstream limit fixes it).
   */
  private latencies(w: Window): { raw: number; excused: number } | null {
    const raw = median(w.rtts);
    const lag = this.lagMs();
    return raw > 0 && lag * 2 >= raw ? null : { raw, excused: raw - lag };
  }

  private measured(noLoadMs: number, now: number, confirmed: boolean): void {
    this.noLoadMs = noLoadMs;
    this.measuredAt = now;
    this.quietMs = null;
    this.confirmed = confirmed;
  }

  private startProbe(now: number): void {
    this.roomy = false;
    this.run.clear();
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
    if (w.count >= MIN_SAMPLES && !w.dropped) {
      // Well under the old no-load latency: the old one was measured under load, and half the
      // limit may still queue; probe again soon (the interval doubles) until a probe agrees.
      const rtt = this.latencies(w)?.raw ?? null;
      if (rtt !== null) this.measured(rtt, now, this.noLoadMs === null || rtt >= 0.9 * this.noLoadMs);
      else this.measuredAt = now;
    } else this.measuredAt = now; // a failed probe is not retried before the next interval
    this.probe = 0;
    this.probeWindow = null;
    this.window = emptyWindow(now);
    this.refilling = true;
    return true;
  }

  private set(estimate: number): void {
    this.estimate = Math.min(this.settings.max, Math.max(this.settings.min, estimate));
  }
}
