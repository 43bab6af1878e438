// The soft-throttling proof of issue 21 against the real server (bench/overload.mjs runs it):
// a circuit with `throttle: {k: 2, window_seconds: W}` in front of a dependency that answers
// every call for W seconds, then fails 60% of them for 3 W. The caller asks `GET /allowed`
// before each call, at a fixed rate, and reports each admitted call's outcome. The bench keeps
// its own ledger of requests (calls attempted: reported or refused) and accepts (successes) per
// second, and compares, per slice of the failing phase, the share of calls admitted with what
// the formula `1 - max(0, (requests - k * accepts) / (requests + 1))` says over the last W seconds.
// The circuit never opens (failure_threshold 10^9): the throttle alone sheds the load.

const JSON_HEADERS = { 'content-type': 'application/json' };

/** A small seeded PRNG (mulberry32): the dependency fails the same calls each run. */
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

async function send(url, init) {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, text };
}

/** The formula over the ledger's last `window` seconds (the server's buckets: whole seconds of its clock). */
function formula(ledger, nowMs, window, k) {
  const first = Math.floor(nowMs / 1000) - window + 1;
  let requests = 0;
  let accepts = 0;
  for (const r of ledger)
    if (Math.floor(r.at / 1000) >= first) {
      requests++;
      if (r.accepted) accepts++;
    }
  return Math.max(0, (requests - k * accepts) / (requests + 1));
}

/**
 * @param {string} baseUrl a circuitlog server (loopback)
 * @param {{ window?: number, perSecond?: number, failShare?: number, sliceSec?: number }} o
 */
export async function throttleRate(baseUrl, { window = 10, perSecond = 40, failShare = 0.6, sliceSec = 5 } = {}) {
  const k = 2;
  const name = 'bench-throttled-dependency';
  const patched = await send(`${baseUrl}/circuits/${name}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ failure_threshold: 1_000_000_000, throttle: { k, window_seconds: window } }),
  });
  if (patched.status !== 200 && patched.status !== 201) throw new Error(`PATCH ${name}: ${patched.status}`);
  const dependency = mulberry32(7);
  const ledger = [];
  const slices = [];
  let healthyRefused = 0;
  const healthyMs = window * 1000;
  const totalMs = 4 * window * 1000;
  const t0 = Date.now();
  for (let i = 0; ; i++) {
    const due = t0 + (i * 1000) / perSecond;
    if (due - t0 >= totalMs) break;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const now = Date.now();
    const failing = now - t0 >= healthyMs;
    const p = formula(ledger, now, window, k);
    const allowed = await send(`${baseUrl}/circuits/${name}/allowed`);
    const admitted = allowed.status === 200;
    if (!admitted) {
      if (allowed.status !== 503 || !allowed.text.includes('throttled'))
        throw new Error(`GET /allowed: ${allowed.status} ${allowed.text}`);
      ledger.push({ at: now, accepted: false });
    } else {
      const success = !failing || dependency() >= failShare;
      const r = await send(`${baseUrl}/circuits/${name}/outcomes`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify({ success }),
      });
      if (r.status !== 200) throw new Error(`outcome: ${r.status} ${r.text}`);
      ledger.push({ at: now, accepted: success });
    }
    if (!failing) {
      if (!admitted) healthyRefused++;
      continue;
    }
    const s = Math.floor((now - t0 - healthyMs) / (sliceSec * 1000));
    slices[s] ??= { fromSec: s * sliceSec, attempts: 0, admitted: 0, expected: 0 };
    slices[s].attempts++;
    slices[s].expected += 1 - p;
    if (admitted) slices[s].admitted++;
  }
  const circuit = JSON.parse((await send(`${baseUrl}/circuits/${name}`)).text);
  const rows = slices.map((x) => ({
    fromSec: x.fromSec,
    attempts: x.attempts,
    admitted: x.admitted / x.attempts,
    formula: x.expected / x.attempts,
  }));
  const worst = Math.max(...rows.map((r) => Math.abs(r.admitted - r.formula)));
  return { window, perSecond, failShare, k, rows, worstPp: 100 * worst, state: circuit.state, healthyRefused };
}

/** The markdown table of a throttleRate result. */
export function throttleMarkdown(t) {
  return [
    `Soft throttling, \`throttle: {k: ${t.k}, window_seconds: ${t.window}}\`: ${t.perSecond} calls/s, ${t.window} s healthy, then ${t.failShare * 100}% failing for ${3 * t.window} s; share of calls admitted per slice of the failing phase against the formula over the bench's own ledger (circuit state at the end: ${t.state}):`,
    '',
    '| failing since | calls | admitted | formula | difference |',
    '|---:|---:|---:|---:|---:|',
    ...t.rows.map(
      (r) =>
        `| ${r.fromSec} s | ${r.attempts} | ${(100 * r.admitted).toFixed(1)}% | ${(100 * r.formula).toFixed(1)}% | ${(100 * (r.admitted - r.formula)).toFixed(1)} pp |`,
    ),
  ].join('\n');
}
