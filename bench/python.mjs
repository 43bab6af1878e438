// `npm run bench` section "python" (BENCH_ONLY=python): the Python client (clients/python, from
// .venv-python made by scripts/provision.mjs) against one real circuitlog on loopback:
//   - sync Client.call() on a closed circuit with a no-op vs sequential GET /allowed round trips
//     from Python (httpx, one keep-alive connection): goal >= 20x; and the time call() adds per
//     call to calling the no-op directly (p50 of 100,000 interleaved samples): goal <= 5 us;
//   - 4 Python processes x 1,000 calls/s, half failing: the server's counts equal the calls made;
//   - the stream's lag: from client A's call that trips a circuit to client B's on_transition.
// The measuring is done by bench/python_client.py; results join the same table and JSON.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fmt } from './lib.mjs';

const GOAL_RATIO = 20;
const GOAL_ADDED_P50_US = 5;
const FLEET = 4;
const FLEET_RATE = 1_000; // calls per second per process
const FLEET_SECONDS = 2;
const LAG_SAMPLES = 30;

function python(repoRoot, args) {
  const bin = path.join(repoRoot, '.venv-python', 'bin', 'python');
  if (!fs.existsSync(bin)) throw new Error(`${bin} missing: run \`node scripts/provision.mjs\` (npm test's pretest)`);
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [path.join(repoRoot, 'bench', 'python_client.py'), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`python_client.py ${args[0]} exited ${code}: ${err}`));
      resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
}

async function serverCounts(url, name) {
  const text = await fetch(`${url}/metrics`).then((r) => r.text());
  const read = (outcome) => {
    const line = text
      .split('\n')
      .find(
        (l) =>
          l.startsWith('circuitlog_outcomes_total{') &&
          l.includes(`circuit="${name}"`) &&
          l.includes(`kind="${outcome}"`),
      );
    return line === undefined ? 0 : Number(line.trim().split(/\s+/).pop());
  };
  return { success: read('success'), failure: read('failure') };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

function target(label, rps, extra = {}) {
  return {
    label,
    rps,
    p50: null,
    p99: null,
    ratio: 1,
    goal: null,
    met: null,
    valid: true,
    isBaseline: false,
    requests: 0,
    non2xx: 0,
    errors: 0,
    cpuUsPerReq: null,
    runs: [{ rps }],
    ...extra,
  };
}

export async function pythonSection({ startCircuitlog, tempDir, removeTemp, stopEach, log, repoRoot, durationSec }) {
  const tmp = tempDir('circuitlog-bench-python-');
  const procs = [];
  try {
    const config = path.join(tmp, 'circuitlog.yaml');
    fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 1000000000\n'); // half the fleet's calls fail
    const server = await startCircuitlog({ name: 'circuitlog-python', db: path.join(tmp, 'python.db'), config });
    procs.push(server);

    log('python: sequential GET /allowed (httpx keep-alive) and Client.call() on a closed circuit, interleaved');
    const calls = await python(repoRoot, ['calls', server.url, String(durationSec)]);
    const allowedRps = median(calls.rounds.allowed.map((r) => r.rps));
    const callRps = median(calls.rounds.calls.map((r) => r.rps));
    const ratio = callRps / allowedRps;
    const added = calls.added;

    log(`python: ${FLEET} processes x ${FLEET_RATE} calls/s, half failing`);
    const fleet = await Promise.all(
      Array.from({ length: FLEET }, () =>
        python(repoRoot, ['fleet', server.url, String(FLEET_SECONDS), String(FLEET_RATE)]),
      ),
    );
    const made = fleet.reduce(
      (m, f) => ({ success: m.success + f.made.success, failure: m.failure + f.made.failure }),
      { success: 0, failure: 0 },
    );
    const counts = await serverCounts(server.url, 'bench/py-mixed');
    const exact = counts.success === made.success && counts.failure === made.failure;
    const dropped = fleet.reduce((n, f) => n + f.stats.outcomes_dropped, 0);

    log('python: stream lag (client A trips a circuit, client B sees the transition)');
    fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 1\n  timeout_seconds: 3600\n');
    const lagServer = await startCircuitlog({ name: 'circuitlog-python-lag', db: path.join(tmp, 'lag.db'), config });
    procs.push(lagServer);
    const lag = await python(repoRoot, ['lag', lagServer.url, String(LAG_SAMPLES)]);

    const baseline = target(
      'Python: sequential GET /allowed round trips (httpx, one keep-alive connection)',
      allowedRps,
      {
        isBaseline: true,
        valid: calls.rounds.allowed.every((r) => r.errors === 0),
        requests: calls.rounds.allowed.reduce((n, r) => n + r.count, 0),
        runs: calls.rounds.allowed.map((r) => ({ rps: r.rps })),
      },
    );
    const subject = target('Python: Client.call() on a closed circuit, no-op', callRps, {
      ratio,
      goal: GOAL_RATIO,
      met: ratio >= GOAL_RATIO,
      p50: added.client_p50_us / 1000,
      p99: added.client_p99_us / 1000,
      requests: calls.rounds.calls.reduce((n, r) => n + r.count, 0),
      runs: calls.rounds.calls.map((r) => ({ rps: r.rps })),
    });
    const total = made.success + made.failure;
    return {
      id: 'python',
      title: 'Python client: Client.call() vs GET /allowed round trips from Python (one process, sequential)',
      durationSec,
      results: [{ id: 'python-call', title: 'Client.call() vs GET /allowed (Python)', targets: [baseline, subject] }],
      notes: [
        `Client.call() adds ${fmt(added.added_p50_us, 2)} µs p50 per call to a no-op (${fmt(added.client_p50_us, 2)} µs via call() vs ${fmt(added.direct_p50_us, 2)} µs direct; 100,000 interleaved samples): goal ≤ ${GOAL_ADDED_P50_US} µs ${added.added_p50_us <= GOAL_ADDED_P50_US ? 'met' : 'NOT met'}.`,
        `Stream lag, Python client A's call that trips a circuit → client B's on_transition (${LAG_SAMPLES} samples, includes the 5 ms batch delay): p50 ${fmt(lag.p50_ms)} ms, p99 ${fmt(lag.p99_ms)} ms, max ${fmt(lag.max_ms)} ms.`,
        `${FLEET} Python processes × ${FLEET_RATE} calls/s for ${FLEET_SECONDS} s, every other call failing: ${total} calls made (${made.success} ok, ${made.failure} failed); server counts ${counts.success} ok, ${counts.failure} failed (/metrics circuitlog_outcomes_total); dropped ${dropped}.`,
      ],
      checks: [
        {
          what: 'server outcome counts equal the calls the 4 Python processes made',
          ok: exact,
          detail: `${counts.success + counts.failure} of ${total}`,
        },
      ],
      pythonMetrics: { allowedRps, callRps, ratio, added, fleet: { made, counts }, streamLagMs: lag },
    };
  } finally {
    await stopEach(procs.reverse());
    removeTemp(tmp);
  }
}
