// The figures of the overload bench (bench/overload.mjs): the proof's table, the per-phase
// table, the limit's settling, the notes and the checks. `f` is
// { modes, C, latencyMs, capacity, retry, throttle } as overload.mjs collects them.

const BAND = 0.2; // the limit settles within ±20% of C
const SETTLE_S = 10; // within 10 s of the 3x ramp
const SETTLED_SHARE = 0.95; // of the gauge readings from then on (one 250 ms reading may catch a probe)

const phase = (m, id) => m?.phases.find((p) => p.id === id);
const pct = (x) => `${(100 * x).toFixed(0)}%`;

/** Goodput against load per mode, as a share of capacity (warm-up and recovery left out). */
export function curves(modes, capacity) {
  return modes.map((m) => ({
    label: m.label,
    points: m.phases
      .filter((p) => p.id !== 'recovery' && p.id !== 'warm-up')
      .map((p) => ({ load: p.load, goodput: p.goodput / capacity })),
  }));
}

export function table(modes, capacity) {
  const head =
    '| mode | phase | load | offered | 200 | 503 refused | other / errors / not sent | p50 ms | p99 ms | goodput /s | of capacity |';
  const lines = [head, '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|'];
  for (const m of modes) {
    for (const p of m.phases) {
      lines.push(
        `| ${m.label} | ${p.id} | ${p.load}x | ${p.offered} | ${p.ok} | ${p.refused} | ${p.other} / ${p.errors} / ${p.notSent} | ${p.p50.toFixed(1)} | ${p.p99.toFixed(1)} | ${p.goodput.toFixed(0)} | ${pct(p.goodput / capacity)} |`,
      );
    }
  }
  return lines.join('\n');
}

/**
 * The limit's gauge during the 3x ramp against the band C ± 20%: when it settled (the first
 * reading from which at least 95% of the ramp's readings are in the band; and the strict time,
 * from which all are), the share in the band from 10 s on, its range, and its lowest during recovery.
 */
export function settling(mode, C) {
  const ramp = phase(mode, 'ramp');
  const recovery = phase(mode, 'recovery');
  if (ramp === undefined || recovery === undefined) return null;
  const during = mode.trace.filter((s) => s.t >= ramp.startedAt && s.t < recovery.startedAt && s.limit !== null);
  if (during.length === 0) return null;
  const lo = (1 - BAND) * C;
  const hi = (1 + BAND) * C;
  const within = (s) => s.limit >= lo && s.limit <= hi;
  const since = (i) => during.slice(i).filter(within).length / (during.length - i);
  const first = (share) => {
    const i = during.findIndex((_, j) => since(j) >= share && within(during[j]));
    return i === -1 ? null : during[i].t - ramp.startedAt;
  };
  const late = during.filter((s) => s.t - ramp.startedAt >= SETTLE_S);
  const after = mode.trace.filter((s) => s.t >= recovery.startedAt && s.limit !== null);
  const sorted = late.map((s) => s.limit).sort((a, b) => a - b);
  return {
    lo,
    hi,
    settledAt: first(SETTLED_SHARE),
    strictAt: first(1),
    lateShare: late.length ? late.filter(within).length / late.length : 0,
    lateMedian: sorted.length ? sorted[sorted.length >> 1] : null,
    lateInFlight: late.length ? late.reduce((n, x) => n + (x.inFlight ?? 0), 0) / late.length : null,
    readings: during.length,
    last: during[during.length - 1].limit,
    min: Math.min(...during.map((s) => s.limit)),
    max: Math.max(...during.map((s) => s.limit)),
    recoveryMin: after.length ? Math.min(...after.map((s) => s.limit)) : null,
    recoveryMax: after.length ? Math.max(...after.map((s) => s.limit)) : null,
  };
}

/** The proof's figures, one row each, adaptive against no limit where both apply. */
export function proofTable(f) {
  const a = f.modes.find((m) => m.id === 'adaptive');
  const n = f.modes.find((m) => m.id === 'none');
  const cap = f.capacity;
  const rows = ['| figure | goal | adaptive limit | no limit (before) |', '|---|---|---:|---:|'];
  const both = (what, goal, fn) => rows.push(`| ${what} | ${goal} | ${a ? fn(a) : '–'} | ${n ? fn(n) : '–'} |`);
  both('3x: goodput (200 within 2x no-load p99)', '≥ 90% of capacity', (m) => pct(phase(m, 'ramp').goodput / cap));
  both(
    '3x: admitted p99 / no-load p99',
    '≤ 2x',
    (m) =>
      `${(phase(m, 'ramp').p99 / m.noLoadP99).toFixed(2)}x (${phase(m, 'ramp').p99.toFixed(0)} / ${m.noLoadP99.toFixed(0)} ms)`,
  );
  const s = a ? settling(a, f.C) : null;
  if (s !== null) {
    rows.push(
      `| limit settles in C ± 20% (${s.lo.toFixed(1)}..${s.hi.toFixed(1)}) | within ${SETTLE_S} s, ≥ ${pct(SETTLED_SHARE)} of readings | ${s.settledAt === null ? 'never' : `${s.settledAt.toFixed(1)} s`} (all readings: ${s.strictAt === null ? 'never' : `${s.strictAt.toFixed(1)} s`}); from ${SETTLE_S} s on ${pct(s.lateShare)} in band, median ${s.lateMedian}, range ${s.min}..${s.max} | – |`,
      `| recovery at 0.5x after 3x: refusals in its 2nd half; limit | 0 | ${phase(a, 'recovery').refusedLastHalf}; ${s.recoveryMin}..${s.recoveryMax} | – |`,
    );
  }
  both('steady 0.5x for 30 s: refusals', '0', (m) => `${phase(m, 'steady').refused} of ${phase(m, 'steady').offered}`);
  const def = f.retry?.rows.find((r) => r.id === 'default');
  const unb = f.retry?.rows.find((r) => r.id === 'unbounded');
  if (def)
    rows.push(
      `| every node failing: traffic added by retries | ≤ 20% + 3/s (${pct(def.allowedRatio - 1)} here) | ${pct(def.ratio - 1)} (default budget) | ${unb ? pct(unb.ratio - 1) : '–'} (budget 100%, as before) |`,
    );
  if (f.throttle)
    rows.push(
      `| 60% failing, throttled: admitted share vs formula | within 10 pp, circuit closed | worst slice ${f.throttle.worstPp.toFixed(1)} pp; ${f.throttle.state}; healthy refused ${f.throttle.healthyRefused} | – |`,
    );
  return rows.join('\n');
}

export function notes(f) {
  const out = [
    `Capacity upstream: C = ${f.C} at once, ${f.latencyMs} ms each, FIFO queue behind; one node; its own process. Load generator (bench/overload/load-gen.mjs) open loop (Poisson arrivals, latency from each request's scheduled time), its own process, at most 4,000 outstanding (more arrivals are counted "not sent").`,
  ];
  for (const m of f.modes) {
    const s = settling(m, f.C);
    const bdp = (f.capacity * m.noLoadP50) / 1000;
    const limit = s
      ? ` Limit during 3x: ${s.min}..${s.max}, last ${s.last}, ${s.readings} readings; in C ± 20% for good (95%) from ${s.settledAt === null ? 'never' : `${s.settledAt.toFixed(1)} s`}, every reading from ${s.strictAt === null ? 'never' : `${s.strictAt.toFixed(1)} s`}; from ${SETTLE_S} s on median ${s.lateMedian}, mean in flight ${s.lateInFlight?.toFixed(1)}; during recovery ${s.recoveryMin}..${s.recoveryMax}. Capacity x no-load p50 (what the proxy counts in flight at capacity): ${bdp.toFixed(1)}.`
      : '';
    out.push(
      `${m.label}: no-load p50 ${m.noLoadP50.toFixed(1)} ms, p99 ${m.noLoadP99.toFixed(1)} ms (goodput counts 200s within ${(2 * m.noLoadP99).toFixed(1)} ms).${limit}`,
    );
  }
  for (const r of f.retry?.rows ?? [])
    out.push(`Retries, ${r.label}: ${r.nodeHits} node hits for ${r.requests} requests (${r.ratio.toFixed(3)}x).`);
  return out;
}

export function checks(f) {
  const out = [];
  const a = f.modes.find((m) => m.id === 'adaptive');
  const n = f.modes.find((m) => m.id === 'none');
  if (a !== undefined) {
    const ramp = phase(a, 'ramp');
    const s = settling(a, f.C);
    out.push(
      {
        what: 'adaptive, 3x: goodput >= 90% of capacity',
        ok: ramp.goodput >= 0.9 * f.capacity,
        detail: `${ramp.goodput.toFixed(0)}/s of ${f.capacity.toFixed(0)}/s`,
      },
      {
        what: 'adaptive, 3x: admitted p99 <= 2x no-load p99',
        ok: ramp.p99 <= 2 * a.noLoadP99,
        detail: `${ramp.p99.toFixed(1)} ms vs ${(2 * a.noLoadP99).toFixed(1)} ms`,
      },
      {
        what: `adaptive: limit within ±20% of C (${s?.lo.toFixed(1)}..${s?.hi.toFixed(1)}) within 10 s of the 3x ramp (95% of readings)`,
        ok: s !== null && s.settledAt !== null && s.settledAt <= SETTLE_S,
        detail:
          s === null
            ? 'no limit gauge'
            : `settled after ${s.settledAt?.toFixed(1) ?? 'never'} s, range ${s.min}..${s.max}`,
      },
      {
        what: 'adaptive: steady half capacity, 0 refusals',
        ok: phase(a, 'steady').refused === 0,
        detail: `${phase(a, 'steady').refused} refused of ${phase(a, 'steady').offered}`,
      },
      {
        what: 'adaptive: 0 refusals in the second half of the recovery at half capacity',
        ok: phase(a, 'recovery').refusedLastHalf === 0,
        detail: `${phase(a, 'recovery').refusedLastHalf}`,
      },
    );
  }
  if (n !== undefined)
    out.push({
      what: 'no limit, 3x: goodput collapses (< 50% of capacity)',
      ok: phase(n, 'ramp').goodput < 0.5 * f.capacity,
      detail: `${phase(n, 'ramp').goodput.toFixed(0)}/s`,
    });
  const def = f.retry?.rows.find((r) => r.id === 'default');
  if (def !== undefined)
    out.push({
      what: 'every node failing: retries add at most 20% + 3/s',
      ok: def.nodeHits <= def.allowedRatio * def.requests,
      detail: `${def.ratio.toFixed(3)}x <= ${def.allowedRatio.toFixed(3)}x`,
    });
  if (f.throttle)
    out.push({
      what: 'soft throttling, 60% failing: admitted share within 10 pp of the formula, circuit closed, healthy never refused',
      ok: f.throttle.worstPp <= 10 && f.throttle.state === 'closed' && f.throttle.healthyRefused === 0,
      detail: `${f.throttle.worstPp.toFixed(1)} pp, ${f.throttle.state}, ${f.throttle.healthyRefused} refused while healthy`,
    });
  return out;
}
