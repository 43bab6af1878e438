// The `quorum` section of `npm run bench` (issue 17): what naming the caller costs on a circuit
// with a quorum policy, against today's routes in the same process and run.
//
//   GET /allowed?caller=X   on a closed circuit with a quorum            vs GET /allowed (no caller, no quorum)  goal ≥ 0.9x
//   failure outcome + caller on a quorum circuit (every one a write)    vs a failure outcome without            goal ≥ 0.9x
// The client's closed-circuit call() (it sends its caller with every outcome) is the `client` section's.

import path from 'node:path';
import { probeOk } from './lib.mjs';

const JSON_HEADERS = { 'content-type': 'application/json' };
const CALLER = 'web-7.dc1/4242';
const NEVER_TRIPS = 1_000_000_000;

/** `ctx`: helpers of run.mjs (startCircuitlog, setupBenchCircuits, tempDir, removeTemp, stopEach, suiteOptions, durationFor, runSuite). */
export async function quorumSection(ctx) {
  const durationSec = ctx.durationFor('quorum');
  const tmp = ctx.tempDir('circuitlog-bench-quorum-');
  const procs = [];
  try {
    const server = await ctx.startCircuitlog({ name: 'circuitlog', db: path.join(tmp, 'quorum.db'), logLevel: 'warn' });
    procs.push(server);
    await ctx.setupBenchCircuits(server.url);
    const quorum = { failure_threshold: NEVER_TRIPS, quorum: { min_callers: 3 } };
    for (const name of ['bench-quorum', 'bench-quorum-fail']) {
      await probeOk(`${server.url}/circuits/${name}`, {
        method: 'PATCH',
        headers: JSON_HEADERS,
        body: JSON.stringify(quorum),
      });
    }
    await probeOk(`${server.url}/circuits/bench-quorum/outcomes`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: JSON.stringify({ success: true, caller: CALLER }),
    });
    const q = `?caller=${encodeURIComponent(CALLER)}`;
    const scenarios = [
      {
        id: 'quorum-allowed',
        title: 'quorum: GET /allowed with a caller on a quorum circuit vs without',
        baseline: 'allowed',
        targets: [
          {
            id: 'allowed',
            label: 'GET /circuits/bench-ok/allowed (closed, no quorum, no caller)',
            url: `${server.url}/circuits/bench-ok/allowed`,
            pid: server.pid,
          },
          {
            id: 'allowed-caller',
            label: `GET /circuits/bench-quorum/allowed${q} (closed, quorum)`,
            url: `${server.url}/circuits/bench-quorum/allowed${q}`,
            goal: 0.9,
            pid: server.pid,
          },
        ],
      },
      {
        id: 'quorum-outcomes',
        title: 'quorum: failure outcome with a caller on a quorum circuit vs without',
        baseline: 'fail',
        targets: [
          {
            id: 'fail',
            label: 'POST /circuits/bench-fail/outcomes {"success":false}',
            url: `${server.url}/circuits/bench-fail/outcomes`,
            method: 'POST',
            headers: JSON_HEADERS,
            body: '{"success":false}',
            pid: server.pid,
          },
          {
            id: 'fail-caller',
            label: `POST /circuits/bench-quorum-fail/outcomes {"success":false,"caller":"${CALLER}"} (quorum)`,
            url: `${server.url}/circuits/bench-quorum-fail/outcomes`,
            method: 'POST',
            headers: JSON_HEADERS,
            body: JSON.stringify({ success: false, caller: CALLER }),
            goal: 0.9,
            pid: server.pid,
          },
        ],
      },
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));
    const circuit = async (name) => await (await fetch(`${server.url}/circuits/${name}`)).json();
    const qf = await circuit('bench-quorum-fail');
    const checks = [
      {
        what: 'bench-quorum-fail stayed closed, its caller counted (every failure a write to its caller entry)',
        ok: qf.state === 'closed' && qf.failure_count > 0,
        detail: `state ${qf.state}, failure_count ${qf.failure_count}`,
      },
      {
        what: 'bench-quorum stayed closed with no isolated caller',
        ok: (await circuit('bench-quorum')).isolated_callers.length === 0,
        detail: '',
      },
    ];
    return {
      id: 'quorum',
      title: 'Quorum: callers on /allowed and outcomes vs today',
      durationSec,
      results,
      notes: [`circuitlog: 1 process, log level warn, synchronous NORMAL, DB in ${tmp}; caller id ${CALLER}.`],
      checks,
    };
  } finally {
    await ctx.stopEach(procs);
    ctx.removeTemp(tmp);
  }
}
