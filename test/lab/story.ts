/**
 * The seed's story (issue 31, docs/policy-lab.md's worked example) as a generator: a recorded
 * day of one circuit at a steady 50 calls/s, an hourly batch job that makes 6 calls fail in
 * 8 s, and one real 4-minute outage, recorded as the server records it under the live policy
 * "5 failures in 10 s": each call goes through the service's own `/call` step (`callStep`:
 * admitted, its outcome is recorded; refused, nothing is, as a client that asks first reports
 * only the calls it made), and the history gets what the stores write (the outcome entry, then
 * the step's transitions, each through `encodeEntry`). Exported for the e2e test and the docs.
 *
 * "N failures in S s" as a policy, at this steady 50 calls/s: a time window of S seconds
 * (which holds between S-1 and S seconds of calls, so 50·(S-1) to 50·S of them) with the
 * failure rate threshold where N failures in it trip and N-1 do not:
 * - 5 in 10 s: `failure_rate_threshold: 1` (5 of at most 500 calls is >= 1 %; 4 of at least 450 is 0.89 %);
 * - 8 in 15 s: `failure_rate_threshold: 1.07` (8 of at most 750 is 1.07 %; 7 of at least 700 is 1.00 %).
 * Both also open on N consecutive failures (`failure_threshold`), judge a rate only over half a
 * window's calls or more (`minimum_calls` 250 and 375: a window emptied by the half-open state
 * would otherwise open on the batch job's next failure among a handful of calls) and stay open
 * 1 s (`timeout_seconds: 1`): the live circuit refuses the calls of its open time, so the
 * history has none of them, and a short open time keeps that gap small against a 15 s window.
 */
import { encodeEntry, type HistoryEntry, type StoredEntry, transitionEntries } from '../../src/domain/history.js';
import { type CircuitPolicy, resolvePolicy } from '../../src/domain/policy.js';
import type { Circuit, Outcome } from '../../src/domain/types.js';
import { callStep } from '../../src/service/breaker-service.js';

/** 2026-12-01T00:00:00Z: the recorded day's start. */
export const DAY_START = Date.UTC(2026, 11, 1);
export const HOUR_MS = 3_600_000;
export const CALLS_PER_SECOND = 50;
export const CALL_EVERY_MS = 1000 / CALLS_PER_SECOND; // 20 ms
/** The batch job runs at half past every hour: 24 runs in the day. */
export const BATCH_OFFSET_MS = 30 * 60_000;
/** Its 6 failing calls, from its start: 6 failures in 8 s. */
export const BATCH_FAILURES_MS = [0, 1_600, 3_200, 4_800, 6_400, 8_000];
/** The real outage: 13:40:00 to 13:44:00, every call fails. */
export const OUTAGE_START = DAY_START + 13 * HOUR_MS + 40 * 60_000;
export const OUTAGE_MS = 4 * 60_000;
export const OUTAGE_END = OUTAGE_START + OUTAGE_MS;

/** The live policy, "5 failures in 10 s" (see the file's comment). */
export const FIVE_IN_TEN: CircuitPolicy = resolvePolicy({
  failureThreshold: 5,
  timeoutSeconds: 1,
  halfOpenMaxCalls: 1,
  window: {
    type: 'time',
    size: 10,
    minimumCalls: 250,
    failureRateThreshold: 1,
    slowCallDurationMs: null,
    slowCallRateThreshold: 100,
  },
});

/** The proposed policy, "8 failures in a 15 s window". */
export const EIGHT_IN_FIFTEEN: CircuitPolicy = resolvePolicy({
  failureThreshold: 8,
  timeoutSeconds: 1,
  halfOpenMaxCalls: 1,
  window: {
    type: 'time',
    size: 15,
    minimumCalls: 375,
    failureRateThreshold: 1.07,
    slowCallDurationMs: null,
    slowCallRateThreshold: 100,
  },
});

/** The batch job's runs: each start, epoch ms. */
export const BATCH_STARTS: readonly number[] = Array.from(
  { length: 24 },
  (_, h) => DAY_START + h * HOUR_MS + BATCH_OFFSET_MS,
);

const OK: Outcome = { success: true };
const FAILED: Outcome = { success: false };
const FAILING_CALLS: ReadonlySet<number> = new Set(BATCH_STARTS.flatMap((s) => BATCH_FAILURES_MS.map((d) => s + d)));

/** Does the call made at `t` fail (ground truth)? */
export function callFails(t: number): boolean {
  return (t >= OUTAGE_START && t < OUTAGE_END) || FAILING_CALLS.has(t);
}

export interface RecordedStory {
  readonly entries: StoredEntry[];
  /** Calls made, and calls the live circuit refused (not recorded). */
  readonly calls: number;
  readonly refused: number;
  /** The live circuit as stored at the end. */
  readonly circuit: Circuit;
}

/**
 * The day recorded under `policy` (the live one: FIVE_IN_TEN), `hours` long from DAY_START
 * (24: the whole story).
 */
export function recordStory(policy: CircuitPolicy = FIVE_IN_TEN, hours = 24): RecordedStory {
  return recordCalls(policy, DAY_START, DAY_START + hours * HOUR_MS, callFails);
}

/**
 * Calls every 20 ms from `from` to `to`, failing where `fails` says, through the service's
 * `/call` step under `policy`: the history the stores write for them (see the file's comment).
 */
export function recordCalls(
  policy: CircuitPolicy,
  from: number,
  to: number,
  fails: (t: number) => boolean,
): RecordedStory {
  const entries: StoredEntry[] = [];
  // encodeEntry's text of these two outcomes does not depend on t: encode each once.
  const text = new Map<Outcome, string>();
  const textOf = (o: Outcome, t: number) => {
    let s = text.get(o);
    if (s === undefined) {
      s = encodeEntry({ type: 'outcome', t, outcome: o });
      text.set(o, s);
    }
    return s;
  };
  const breaker = { probeLeaseMs: 10_000 };
  let circuit: Circuit | null = null;
  let refused = 0;
  let calls = 0;
  for (let t = from; t < to; t += CALL_EVERY_MS) {
    calls++;
    const outcome = fails(t) ? FAILED : OK;
    const step = callStep(
      { name: 'orders-db', settings: policy, now: t },
      outcome,
      breaker,
      () => 1,
      () => 0,
    )(circuit);
    circuit = step.circuit;
    if (step.verdict.allowed) entries.push({ t, text: textOf(outcome, t) });
    else refused++;
    if (step.transitions.length > 0) {
      for (const e of transitionEntries(t, step.transitions)) entries.push({ t, text: encodeEntry(e as HistoryEntry) });
    }
  }
  return { entries, calls, refused, circuit: circuit! };
}
