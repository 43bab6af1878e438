// The overload bench's load generator as a process of its own (bench/overload.mjs starts one
// per ramp): the proxy, the upstream and the caller each get their own event loop, so that a
// pause of one is not read as the latency of another. Runs the phases of a job one after the
// other, open loop (open-loop.mjs), on one warm undici pool, and writes every answer's record.
//
// Usage: node bench/overload/load-gen.mjs JOB.json OUT.json, where JOB is
//   { url, path, upstreamUrl?, phases: [{ id, ratePerSecond, sec, seed, drainBefore? }],
//     maxOutstanding?, timeoutMs? }
// and OUT gets { phases: [{ id, startedAt, sent, notSent, errors, statuses, elapsedMs, records }] }
// (startedAt: ms since the epoch, performance.timeOrigin + performance.now(), comparable across
// processes). Loopback only (open-loop.mjs refuses any other host).

import fs from 'node:fs';
import { loopbackPool, openLoop } from './open-loop.mjs';

/** Wait until the upstream has nothing in service or queued (a no-limit run leaves a backlog). */
async function drained(upstreamUrl) {
  for (let i = 0; i < 600; i++) {
    const s = await (await fetch(`${upstreamUrl}/__stats`)).json();
    if (s.inService === 0 && s.queued === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the capacity upstream did not drain in 60 s');
}

async function main([jobFile, outFile]) {
  const job = JSON.parse(fs.readFileSync(jobFile, 'utf8'));
  const pool = loopbackPool(job.url);
  const out = [];
  try {
    for (const phase of job.phases) {
      if (phase.drainBefore && job.upstreamUrl) await drained(job.upstreamUrl);
      const startedAt = performance.timeOrigin + performance.now();
      const r = await openLoop({
        pool,
        path: job.path,
        ratePerSecond: phase.ratePerSecond,
        durationMs: phase.sec * 1000,
        maxOutstanding: job.maxOutstanding ?? 4_000,
        timeoutMs: job.timeoutMs ?? 15_000,
        seed: phase.seed,
      });
      const { sent, notSent, errors, statuses, elapsedMs, records } = r;
      out.push({ id: phase.id, startedAt, sent, notSent, errors, statuses, elapsedMs, records });
    }
  } finally {
    await pool.close();
  }
  if (job.upstreamUrl) await drained(job.upstreamUrl);
  fs.writeFileSync(outFile, JSON.stringify({ phases: out }));
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
