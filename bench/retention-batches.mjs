// `node bench/retention-batches.mjs [rows]` (after `npm run build`): the housekeeping job's age
// trim in one process on a SQLite file of `rows` (2,000,000) old transitions over 10,000 circuits,
// for 5 s: rows deleted, batch sizes, time per batch (p50/p99/max) and the event-loop delay. The
// p99 and max are WAL checkpoints run inside a batch (docs/performance.md#scale-and-retention).
// PACED=1: with the job's own pacing (about 2 % of the time).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { createRequire } from 'node:module';
import pino from 'pino';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../dist/store/sqlite/database.js';
import { SqliteHousekeeping } from '../dist/store/sqlite/housekeeping.js';
import { Housekeeping } from '../dist/service/housekeeping.js';

const Database = createRequire(import.meta.url)('better-sqlite3');
const rows = Number(process.argv[2] ?? 2_000_000);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-retention-'));
const file = path.join(dir, 'db.sqlite');
try {
  const seed = new Database(file);
  seed.pragma('journal_mode = WAL');
  seed.pragma('synchronous = OFF');
  migrate(seed, readMigrations(defaultMigrationsDir()));
  const circuit = seed.prepare(
    'INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES (?, 5, 30, 0, 0)',
  );
  seed.transaction(() => {
    for (let i = 0; i < 10_000; i++) circuit.run(`c${i}`);
  })();
  const transition = seed.prepare(
    "INSERT INTO transitions (circuit_id, from_state, to_state, reason, at) VALUES (?, 'closed', 'open', 'failure_threshold_reached', ?)",
  );
  seed.transaction(() => {
    for (let i = 0; i < rows; i++) transition.run((i % 10_000) + 1, 1_000 + Math.floor(i / 100));
  })();
  seed.close();

  const db = openDatabase(file, { exclusive: true }); // as a single circuitlog process opens it
  const store = new SqliteHousekeeping(db, () => {});
  const calls = [];
  const timed = {
    trimByAge: (before, batch) => {
      const t0 = performance.now();
      const n = store.trimByAge(before, batch);
      calls.push({ batch, n, ms: performance.now() - t0 });
      return n;
    },
    trimPerCircuit: (...a) => store.trimPerCircuit(...a),
    deleteIdle: (...a) => store.deleteIdle(...a),
  };
  // Unpaced (only a setImmediate between batches) unless PACED=1: the batches and the checkpoints
  // inside them as they are; the job's default pause takes 98 % of the time away from it.
  const unpaced =
    process.env.PACED === '1' ? {} : { yieldBetween: () => new Promise((resolve) => setImmediate(resolve)) };
  const job = new Housekeeping(timed, Date.now, pino({ level: 'silent' }), {
    maxAgeDays: 30,
    maxPerCircuit: 0,
    idleCircuitDays: null,
    isDeclared: () => false,
    ...unpaced,
  });
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const started = performance.now();
  job.start();
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  job.stop();
  delay.disable();
  const seconds = (performance.now() - started) / 1000;
  const ms = calls.map((c) => c.ms).sort((a, b) => a - b);
  const sizes = calls.map((c) => c.batch).sort((a, b) => a - b);
  const deleted = calls.reduce((sum, c) => sum + c.n, 0);
  const at = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))].toFixed(2);
  console.log(
    `${calls.length} batches, ${deleted} rows deleted (${Math.round(deleted / seconds)}/s); median batch ${sizes[sizes.length >> 1]} rows`,
  );
  console.log(
    `time per batch p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${ms.at(-1).toFixed(2)} ms; event-loop delay p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms, max ${(delay.max / 1e6).toFixed(1)} ms`,
  );
  db.close();
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
