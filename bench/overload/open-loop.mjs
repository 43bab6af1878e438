// A bounded open-loop load generator (issue 21): requests are sent on a Poisson schedule at
// `ratePerSecond` whatever the answers do (a closed loop, like wrk's, slows down with the
// server and hides overload). Loopback only; bounded by `durationMs`, `maxRequests` and
// `maxOutstanding` (an arrival while that many are unanswered is not sent, and counted as
// `notSent`: it stands for a caller that gave up). Each answer's status and latency are kept.

import { Pool } from 'undici';

const LOOPBACK_HOST = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\]|localhost)$/;
const MAX_DURATION_MS = 10 * 60_000; // 10 min
const MAX_REQUESTS = 2_000_000;

/** A small seeded PRNG (mulberry32), so runs see the same arrival pattern. */
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A pool to one loopback origin, reused across phases (its connections stay warm). */
export function loopbackPool(url, connections = 4_096) {
  const origin = new URL(url);
  if (!LOOPBACK_HOST.test(origin.hostname)) throw new Error(`open-loop: ${origin.hostname} is not a loopback address`);
  return new Pool(origin.origin, { connections, pipelining: 1, keepAliveTimeout: 10_000 });
}

/**
 * Send GET `path` at `ratePerSecond` for `durationMs` through `pool`.
 * @returns {Promise<{ sent: number, notSent: number, errors: number, statuses: Record<string, number>, latencies: Float64Array, okLatencies: number[], startedAt: number[], elapsedMs: number, timeline: (t0: number, bucketMs: number) => object[] }>}
 */
export async function openLoop({
  pool,
  path,
  ratePerSecond,
  durationMs,
  maxOutstanding = 4_000,
  maxRequests = MAX_REQUESTS,
  timeoutMs = 10_000,
  seed = 1,
  onTick,
}) {
  if (!(durationMs > 0 && durationMs <= MAX_DURATION_MS))
    throw new Error(`open-loop: durationMs within (0, ${MAX_DURATION_MS}]`);
  if (!(ratePerSecond > 0) || ratePerSecond * (durationMs / 1000) > maxRequests)
    throw new Error(`open-loop: at most ${maxRequests} requests`);
  const random = mulberry32(seed);
  const records = []; // [sentAtMs, latencyMs, status] per answered request
  const statuses = {};
  let sent = 0;
  let notSent = 0;
  let errors = 0;
  let outstanding = 0;
  const t0 = performance.now();
  let nextAt = 0; // ms after t0 of the next arrival
  const perMs = ratePerSecond / 1000;
  const settle = () => {
    if (outstanding === 0 && finished) resolveDone();
  };
  let finished = false;
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));

  const fire = (at) => {
    if (outstanding >= maxOutstanding) {
      notSent++;
      return;
    }
    sent++;
    outstanding++;
    pool
      .request({ path, method: 'GET', headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
      .then(async (res) => {
        await res.body.dump();
        const latency = performance.now() - t0 - at;
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        records.push(at, latency, res.statusCode);
      })
      .catch(() => {
        errors++;
      })
      .finally(() => {
        outstanding--;
        settle();
      });
  };

  await new Promise((resolve) => {
    const tick = () => {
      const now = performance.now() - t0;
      const until = Math.min(now, durationMs);
      while (nextAt <= until) {
        fire(nextAt);
        nextAt += -Math.log(1 - random()) / perMs;
      }
      onTick?.(now);
      if (now >= durationMs) return resolve();
      setTimeout(tick, 1);
    };
    tick();
  });
  finished = true;
  settle();
  await done;
  const elapsedMs = performance.now() - t0;
  return summarize(records, { sent, notSent, errors, statuses, elapsedMs });
}

/**
 * The result of a run from its raw records ([sentAtMs, latencyMs, status] per answer, flat) and
 * counts; `records` is kept so that a run made in another process (load-gen.mjs) can be shipped.
 */
export function summarize(records, base) {
  const n = records.length / 3;
  return {
    ...base,
    answered: n,
    records,
    /** Latencies (ms) of answers with `status`, sorted; all answers when status is omitted. */
    latencies(status) {
      const out = [];
      for (let i = 0; i < records.length; i += 3)
        if (status === undefined || records[i + 2] === status) out.push(records[i + 1]);
      return out.sort((a, b) => a - b);
    },
    /** Answers with `status` sent in [fromMs, toMs) and answered within `withinMs`. */
    count({ status, fromMs = 0, toMs = Infinity, withinMs = Infinity }) {
      let c = 0;
      for (let i = 0; i < records.length; i += 3) {
        const at = records[i];
        if (
          at >= fromMs &&
          at < toMs &&
          (status === undefined || records[i + 2] === status) &&
          records[i + 1] <= withinMs
        )
          c++;
      }
      return c;
    },
  };
}

/** The p-th percentile (0..100) of sorted values. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
