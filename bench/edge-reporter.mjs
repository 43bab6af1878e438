// One of the edge section's reporting processes (bench/edge.mjs, aggregation): forked with an IPC
// channel, it says {"ready":true}; on {"origin", "path", "body", "ms"} it posts `body` to
// `origin + path` in a loop on one keep-alive connection, one request at a time, for `ms`, and
// answers {"ok": 2xx answers, "bad": other answers, "errors": failed requests}. Loopback only.

import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

process.on('message', async (m) => {
  if (m === 'exit') process.exit(0);
  const origin = new URL(m.origin);
  if (origin.hostname !== '127.0.0.1') throw new Error(`loopback only, got ${origin.hostname}`);
  const pool = new Pool(m.origin, { connections: 1 });
  const headers = { 'content-type': 'application/json' };
  const counts = { ok: 0, bad: 0, errors: 0 };
  const end = performance.now() + m.ms;
  while (performance.now() < end) {
    try {
      const res = await pool.request({ method: 'POST', path: m.path, headers, body: m.body });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) counts.ok++;
      else counts.bad++;
    } catch {
      counts.errors++;
      await sleep(5);
    }
  }
  await pool.close();
  process.send(counts);
});
process.send({ ready: true });
