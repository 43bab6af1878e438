// The `throttle` section of `npm run bench` (issue 21, soft throttling): what a throttle costs
// a healthy circuit. One circuitlog process, two circuits loaded back to back:
//
//   - GET /allowed on a closed, healthy circuit without a throttle vs the same with
//     `throttle: {k: 2, window_seconds: 60}` and a minute's history of successes (p = 0: no
//     draw, no write; the decision reads the counts) — goal: throttled >= 0.9x plain;
//   - POST success outcomes on each (informative): without a throttle a success on a healthy
//     circuit writes nothing; with one, every success is counted (a write, group-committed).
//
// Then a check that the throttle does refuse: a throttled circuit with 50 failures answers
// mostly 503 circuit-throttled to 100 sequential GET /allowed.

const JSON_HEADERS = { 'content-type': 'application/json' };
const MERGE_HEADERS = { 'content-type': 'application/merge-patch+json' };

async function send(url, init = {}) {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, text };
}

/** A circuit that never opens on its own (threshold 10^9), with `throttle`, and `successes` outcomes. */
async function prepare(baseUrl, name, throttle, successes) {
  const patched = await send(`${baseUrl}/circuits/${name}`, {
    method: 'PATCH',
    headers: MERGE_HEADERS,
    body: JSON.stringify({ failure_threshold: 1_000_000_000, throttle }),
  });
  if (patched.status !== 200 && patched.status !== 201)
    throw new Error(`PATCH ${name}: ${patched.status} ${patched.text}`);
  for (let i = 0; i < successes; i++) {
    const r = await send(`${baseUrl}/circuits/${name}/outcomes`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":true}',
    });
    if (r.status !== 200) throw new Error(`outcome on ${name}: ${r.status}`);
  }
  const allowed = await send(`${baseUrl}/circuits/${name}/allowed`);
  if (allowed.status !== 200) throw new Error(`${name} is not allowed: ${allowed.status} ${allowed.text}`);
  return JSON.parse(allowed.text).circuit;
}

/**
 * @param ctx what bench/run.mjs lends: startCircuitlog, tempDir, removeTemp, stopEach,
 *   runSuite, suiteOptions, durationSec, log
 */
export async function throttleSection(ctx) {
  const { durationSec, log } = ctx;
  const tmp = ctx.tempDir('circuitlog-bench-throttle-');
  const procs = [];
  try {
    const s = await ctx.startCircuitlog({ name: 'circuitlog-throttle', db: `${tmp}/throttle.db`, logLevel: 'warn' });
    procs.push(s);
    await prepare(s.url, 'bench-plain', null, 100);
    const throttled = await prepare(s.url, 'bench-throttled', { k: 2, window_seconds: 60 }, 100);
    if (throttled.throttle_probability !== 0 || throttled.throttle_window?.accepts !== 100)
      throw new Error(`bench-throttled: ${JSON.stringify(throttled)}`);
    const allowed = (id, label, name, goal) => ({
      id,
      label,
      url: `${s.url}/circuits/${name}/allowed`,
      pid: s.pid,
      goal,
    });
    const success = (id, label, name) => ({
      id,
      label,
      url: `${s.url}/circuits/${name}/outcomes`,
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":true}',
      pid: s.pid,
    });
    const scenarios = [
      {
        id: 'throttle-allowed',
        title: 'throttle: GET allowed, closed healthy circuit',
        baseline: 'plain',
        targets: [
          allowed('plain', 'no throttle: GET /circuits/bench-plain/allowed', 'bench-plain'),
          allowed(
            'throttled',
            'throttle {k 2, 60 s}, p = 0: GET /circuits/bench-throttled/allowed',
            'bench-throttled',
            0.9,
          ),
        ],
      },
      {
        id: 'throttle-success',
        title: 'throttle: POST outcome success, healthy circuit',
        baseline: 'plain',
        targets: [
          success('plain', 'no throttle: POST success (no write)', 'bench-plain'),
          success('throttled', 'throttle: POST success (counted: a write)', 'bench-throttled'),
        ],
      },
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));

    // The throttle refuses: 50 failures and no success give p = 50/51, rising with each refusal.
    await prepare(s.url, 'bench-failing', { k: 2, window_seconds: 60 }, 0);
    for (let i = 0; i < 50; i++)
      await send(`${s.url}/circuits/bench-failing/outcomes`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: '{"success":false}',
      });
    let refused = 0;
    for (let i = 0; i < 100; i++) if ((await send(`${s.url}/circuits/bench-failing/allowed`)).status === 503) refused++;
    const failing = JSON.parse((await send(`${s.url}/circuits/bench-failing`)).text);
    log(
      `bench-failing: ${refused}/100 GET /allowed refused (circuit-throttled), state ${failing.state}, p now ${failing.throttle_probability.toFixed(4)}`,
    );
    return {
      id: 'throttle',
      title: 'Soft throttling: a throttle on a healthy circuit vs none (ratio = throttled / plain)',
      durationSec,
      results,
      notes: [
        'One circuitlog process (1 worker, log level warn); two circuits with threshold 10^9, each with 100 successes first: bench-plain (throttle null) and bench-throttled (throttle {k: 2, window_seconds: 60}, p = 0).',
        'GET /allowed on a closed circuit with a throttle reads its per-second counts to find p (0 here: no random draw, no write) and serialises the circuit at most once a second; a success outcome with a throttle is a write (the request and the accept are counted), where without one it writes nothing.',
        `Refusals: a throttled circuit with 50 failures and no success answered ${refused} of 100 sequential GET /allowed with 503 circuit-throttled (p from 50/51 up), still ${failing.state}.`,
      ],
      checks: [
        {
          what: 'a failing throttled circuit refuses most calls and stays closed',
          ok: refused >= 80 && failing.state === 'closed',
          detail: `${refused}/100 refused, ${failing.state}`,
        },
      ],
    };
  } finally {
    await ctx.stopEach(procs);
    ctx.removeTemp(tmp);
  }
}
