// The `kinds` section of `npm run bench` (issue 29's Speed): what outcome kinds and the shared
// slow start cost. One circuitlog process:
//
//   - GET /allowed on a plain closed circuit vs a ramping one (ramp {seconds: 3600,
//     start_percent: 99}, started by a 1 s cool-down's end: about 1 % of asks answered 503
//     circuit-ramping, each a draw on the fast path without a write) — goal: ramping >= 0.9x plain;
//   - POST /circuits/{name}/outcomes on a healthy circuit: {"success":true} vs {"kind":"rejected"}
//     (counted as a success: neither writes) — goal: with kinds >= 0.9x without.

const JSON_HEADERS = { 'content-type': 'application/json' };
const MERGE_HEADERS = { 'content-type': 'application/merge-patch+json' };

async function send(url, init = {}) {
  const res = await fetch(url, init);
  return { status: res.status, text: await res.text() };
}

/** A circuit with `patch` applied; `ramping`: its 1 s cool-down has ended into the ramp. */
async function prepare(baseUrl, name, patch, ramping) {
  const patched = await send(`${baseUrl}/circuits/${name}`, {
    method: 'PATCH',
    headers: MERGE_HEADERS,
    body: JSON.stringify(patch),
  });
  if (patched.status !== 200 && patched.status !== 201) throw new Error(`PATCH ${name}: ${patched.status}`);
  if (!ramping) return;
  await send(`${baseUrl}/circuits/${name}/outcomes`, {
    method: 'POST',
    headers: JSON_HEADERS,
    body: '{"kind":"throttled","retry_after_seconds":1}',
  });
  await new Promise((resolve) => setTimeout(resolve, 1_600)); // the cool-down ends; the due timer writes it
  const shown = JSON.parse((await send(`${baseUrl}/circuits/${name}`)).text);
  if (shown.ramp_until === null) throw new Error(`${name} is not ramping: ${JSON.stringify(shown)}`);
}

/**
 * @param ctx what bench/run.mjs lends: startCircuitlog, tempDir, removeTemp, stopEach,
 *   runSuite, suiteOptions, durationSec, log
 */
export async function kindsSection(ctx) {
  const { durationSec } = ctx;
  const tmp = ctx.tempDir('circuitlog-bench-kinds-');
  const procs = [];
  try {
    const s = await ctx.startCircuitlog({ name: 'circuitlog-kinds', db: `${tmp}/kinds.db`, logLevel: 'warn' });
    procs.push(s);
    await prepare(s.url, 'bench-plain', { failure_threshold: 1_000_000_000 }, false);
    await prepare(
      s.url,
      'bench-ramping',
      { failure_threshold: 1_000_000_000, ramp: { seconds: 3_600, start_percent: 99 } },
      true,
    );
    // Beside them, informative: the ramp's computation with every ask admitted, and what a refusal
    // itself costs (an open circuit's 503s): a ramp's refusals cost what any refusal does.
    await prepare(
      s.url,
      'bench-ramping-100',
      { failure_threshold: 1_000_000_000, ramp: { seconds: 3_600, start_percent: 100 } },
      true,
    );
    await prepare(s.url, 'bench-open', { failure_threshold: 1, timeout_seconds: 3_600 }, false);
    await send(`${s.url}/circuits/bench-open/outcomes`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":false}',
    });
    if ((await send(`${s.url}/circuits/bench-open/allowed`)).status !== 503) throw new Error('bench-open is not open');
    const allowed = (id, label, name, goal, expectsNon2xx) => ({
      id,
      label,
      url: `${s.url}/circuits/${name}/allowed`,
      pid: s.pid,
      goal,
      expectsNon2xx,
    });
    const outcome = (id, label, body, goal) => ({
      id,
      label,
      url: `${s.url}/circuits/bench-plain/outcomes`,
      method: 'POST',
      headers: JSON_HEADERS,
      body,
      pid: s.pid,
      goal,
    });
    const scenarios = [
      {
        id: 'kinds-allowed',
        title: 'kinds: GET allowed, plain closed vs ramping circuit',
        baseline: 'plain',
        targets: [
          allowed('plain', 'closed, no ramp: GET /circuits/bench-plain/allowed', 'bench-plain'),
          allowed('ramping', 'ramping (99 % share): GET /circuits/bench-ramping/allowed', 'bench-ramping', 0.9, true),
          allowed(
            'ramping-100',
            'ramping, start_percent 100 (every ask admitted): GET /circuits/bench-ramping-100/allowed',
            'bench-ramping-100',
          ),
          allowed('open', 'open (every ask a 503): GET /circuits/bench-open/allowed', 'bench-open', undefined, true),
        ],
      },
      {
        id: 'kinds-outcome',
        title: 'kinds: POST outcome on a healthy circuit, success vs kind rejected',
        baseline: 'plain',
        targets: [
          outcome('plain', 'POST {"success":true}', '{"success":true}'),
          outcome('kinded', 'POST {"kind":"rejected"}', '{"kind":"rejected"}', 0.9),
        ],
      },
      {
        id: 'kinds-failure',
        title: 'kinds: POST outcome, a failure (threshold 10^9: every one a write), success false vs kind failure',
        baseline: 'plain',
        targets: [
          outcome('plain', 'POST {"success":false}', '{"success":false}'),
          outcome('kinded', 'POST {"kind":"failure"}', '{"kind":"failure"}', 0.9),
        ],
      },
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));
    return {
      id: 'kinds',
      title: 'Outcome kinds and the shared slow start (ratio = subject / plain)',
      durationSec,
      results,
      notes: [
        'One circuitlog process (1 worker, log level warn); circuits with threshold 10^9. bench-ramping has ramp {seconds: 3600, start_percent: 99}, started by a 1 s cool-down: about 1 % of its GET /allowed answers are 503 circuit-ramping (counted in non2xx), each decided by a draw on the fast path, no write.',
        'A rejected outcome counts as a success: on a healthy circuit without a window neither it nor a success writes anything.',
      ],
      checks: [],
    };
  } finally {
    await ctx.stopEach(procs);
    ctx.removeTemp(tmp);
  }
}
