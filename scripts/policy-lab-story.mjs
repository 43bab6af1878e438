// The worked example of docs/policy-lab.md, the seed's story, on a real server:
// `npm run build && node scripts/policy-lab-story.mjs [OUT.svg]` (default docs/images/policy-lab-story.svg).
//
// 1. Compiles test/lab/story.ts (the generator of the lab's own story test) to a temp folder.
// 2. Starts the built server (dist/main.js) on a temp SQLite database, creates the circuit
//    `orders-db` with the live policy "5 failures in 10 s" (FIVE_IN_TEN) by PATCH, and stops it.
// 3. Writes the recorded day into the database's `history` table as the store writes it: the
//    generator records every call through the service's own `/call` step (`callStep`) and the
//    entries are the store's texts (`encodeEntry`); the circuit's own rows are replaced by the
//    day's (its PATCH entry is today, not on the recorded day) and its `created_at` set to the
//    day's start, so the replay starts where the circuit did.
// 4. Starts the server again (history.max_outcomes raised to hold the day's 4.3 million
//    entries) and asks `POST /circuits/orders-db/backtest` for "8 failures in a 15 s window"
//    (EIGHT_IN_FIFTEEN) over the day; prints the figures and saves the picture from
//    `GET /circuits/orders-db/backtest/{id}.svg`.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const out = path.resolve(process.argv[2] ?? path.join(root, 'docs/images/policy-lab-story.svg'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-story-'));
const db = path.join(dir, 'db.sqlite');

// 1. The generator, compiled.
const built = path.join(dir, 'built');
execFileSync(
  process.execPath,
  [
    path.join(root, 'node_modules/typescript/bin/tsc'),
    '--outDir',
    built,
    '--rootDir',
    root,
    '--module',
    'nodenext',
    '--target',
    'es2022',
    '--strict',
    '--esModuleInterop',
    '--skipLibCheck',
    '--types',
    'node',
    path.join(root, 'test/lab/story.ts'),
  ],
  { stdio: 'inherit' },
);
fs.writeFileSync(path.join(built, 'package.json'), '{"type":"module"}');
const story = await import(pathToFileURL(path.join(built, 'test/lab/story.js')).href);
const { policyToWire } = await import(pathToFileURL(path.join(built, 'src/domain/policy-wire.js')).href);

/** The built server on the temp database; resolves with its URL once it listens. */
const children = new Set();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

function startServer(env = {}) {
  const child = spawn(process.execPath, [path.join(root, 'dist/main.js')], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', CIRCUITLOG_DB: db, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the server exited (${code})`)));
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      let log = {};
      try {
        log = JSON.parse(line);
      } catch {
        return;
      }
      if (log.event === 'listening' && typeof log.port === 'number') {
        child.removeAllListeners('exit');
        const stop = () => new Promise((done) => child.once('exit', done).kill('SIGTERM'));
        // The server's peak resident memory so far (Linux), MiB.
        const peakRssMib = () => {
          const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
          return hwm ? Math.round(Number(hwm[1]) / 1024) : null;
        };
        resolve({ url: `http://127.0.0.1:${log.port}`, stop, peakRssMib });
      }
    });
  });
}

async function call(url, method, body, type = 'application/json') {
  const res = await fetch(url, { method, headers: { 'content-type': type }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return text;
}

// 2. The circuit with the live policy.
let server = await startServer();
await call(
  `${server.url}/circuits/orders-db`,
  'PATCH',
  policyToWire(story.FIVE_IN_TEN, false),
  'application/merge-patch+json',
);
await server.stop();

// 3. The recorded day, written as the store writes it.
const recorded = story.recordStory();
const sqlite = new Database(db);
const { id } = sqlite.prepare("SELECT id FROM circuits WHERE name = 'orders-db'").get();
sqlite.transaction(() => {
  sqlite.prepare('DELETE FROM history WHERE circuit_id = ?').run(id);
  const insert = sqlite.prepare('INSERT INTO history (circuit_id, seq, t, e) VALUES (?, ?, ?, ?)');
  let seq = 0;
  for (const e of recorded.entries) insert.run(id, ++seq, e.t, e.text);
  sqlite.prepare('UPDATE circuits SET created_at = ? WHERE id = ?').run(story.DAY_START, id);
})();
sqlite.close();

// 4. The backtest, through the server.
const config = path.join(dir, 'circuitlog.yaml');
fs.writeFileSync(config, 'history:\n  max_outcomes: 5000000\n  max_age_hours: 87600\n');
server = await startServer({ CIRCUITLOG_CONFIG: config });
const proposed = policyToWire(story.EIGHT_IN_FIFTEEN, false);
const request = { policy: proposed, from: story.DAY_START, to: story.DAY_START + 24 * story.HOUR_MS };
const asked = performance.now();
const result = JSON.parse(await call(`${server.url}/circuits/orders-db/backtest`, 'POST', request));
const elapsedMs = Math.round(performance.now() - asked);
const svg = await fetch(`${server.url}/circuits/orders-db/backtest/${result.id}.svg`);
fs.writeFileSync(out, await svg.text());
const serverPeakRssMib = server.peakRssMib();
await server.stop();

const brief = (f) => {
  const { series: _s, transitions: _t, detection_ms, ...rest } = f;
  return { ...rest, detection_ms: detection_ms.length > 5 ? `${detection_ms.length} values` : detection_ms };
};
console.log(
  JSON.stringify(
    {
      request: { ...request, policy: proposed },
      outcomes: result.outcomes,
      start: result.start,
      calls: recorded.calls,
      refused_live: recorded.refused,
      current: brief(result.current),
      proposed: brief(result.proposed),
      fidelity: result.fidelity,
      picture: path.relative(root, out),
      backtest_ms: elapsedMs,
      server_peak_rss_mib: serverPeakRssMib,
    },
    null,
    2,
  ),
);
fs.rmSync(dir, { recursive: true, force: true });
