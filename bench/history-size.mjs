// What the outcome history (issue 31) costs on disk, measured on a real SQLite file: N outcomes
// written through the built store (dist/, the same statements the server runs, group-commit
// sized transactions of 1,000), no bound reached (max_outcomes above N), then a WAL checkpoint;
// bytes per outcome = the file's growth / N. Two mixes: what the HTTP routes record
// (`{success, duration_ms}` plus the `late` rule they stamp, ~10 % failures), and a bare `[1]`.
//
//   node bench/history-size.mjs [N]      (default 1,000,000; `npm run build` first)
//
// Also used by the `history` section of `npm run bench` (bench/history.mjs).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const load = (p) => import(pathToFileURL(path.join(repoRoot, 'dist', p)).href);

const CIRCUITS = 10;
const PER_TRANSACTION = 1_000;

/** Bytes of the database file and its WAL (after a TRUNCATE checkpoint the WAL is empty). */
function bytesOf(file) {
  const size = (f) => (fs.existsSync(f) ? fs.statSync(f).size : 0);
  return size(file) + size(`${file}-wal`);
}

/**
 * Write `n` outcomes of `mix` ('http' or 'bare') into a fresh file; answers the measured growth.
 * @returns {{ n: number, bytes: number, bytesPerOutcome: number, seconds: number, entryChars: number }}
 */
export async function measureHistorySize(n, mix) {
  const { openDatabase, migrate, readMigrations, defaultMigrationsDir } = await load('store/sqlite/database.js');
  const { SqliteCircuitStore } = await load('store/sqlite/circuit-store.js');
  const { outcomeStep, outcomeHistory } = await load('service/breaker-service.js');
  const { encodeEntry } = await load('domain/history.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-history-size-'));
  const file = path.join(dir, 'history.db');
  try {
    const db = openDatabase(file, { exclusive: true });
    migrate(db, readMigrations(defaultMigrationsDir()));
    const store = new SqliteCircuitStore(db, true, { enabled: true, maxOutcomes: n + 1, maxAgeHours: 87_600 });
    const settings = { failureThreshold: 1_000_000_000, timeoutSeconds: 30, halfOpenMaxCalls: 1, successThreshold: 1 };
    const t0 = Date.now();
    const outcomeAt = (i) =>
      mix === 'bare'
        ? { success: true }
        : { success: i % 10 !== 0, durationMs: 1 + ((i * 7_919) % 500), late: 'count_only' };
    // The circuits exist first: their rows are not the history's cost.
    store.applyBatch(
      Array.from({ length: CIRCUITS }, (_, k) => ({
        name: `size-${k}`,
        step: outcomeStep({ name: `size-${k}`, settings, now: t0 }, { success: true }),
      })),
    );
    db.pragma('wal_checkpoint(TRUNCATE)');
    const before = bytesOf(file);
    let chars = 0;
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i += PER_TRANSACTION) {
      const items = [];
      for (let j = i; j < Math.min(n, i + PER_TRANSACTION); j++) {
        const name = `size-${j % CIRCUITS}`;
        const now = t0 + j; // 1,000 outcomes/s
        const outcome = outcomeAt(j);
        items.push({
          name,
          step: outcomeStep({ name, settings, now }, outcome),
          history: outcomeHistory(now, outcome),
        });
        if (j < 1_000) chars += encodeEntry({ type: 'outcome', t: now, outcome }).length;
      }
      store.applyBatch(items);
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    db.pragma('wal_checkpoint(TRUNCATE)');
    const rows = db.prepare('SELECT count(*) FROM history').pluck().get();
    if (rows !== n) throw new Error(`expected ${n} history rows, found ${rows}`);
    const bytes = bytesOf(file) - before;
    db.close();
    return { n, bytes, bytesPerOutcome: bytes / n, seconds, entryChars: chars / Math.min(n, 1_000) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const n = Number(process.argv[2] ?? 1_000_000);
  for (const mix of ['http', 'bare']) {
    const r = await measureHistorySize(n, mix);
    const perDay = r.bytesPerOutcome * 1_000 * 86_400;
    process.stdout.write(
      `${mix}: ${r.n} outcomes, file grew ${r.bytes} bytes = ${r.bytesPerOutcome.toFixed(1)} bytes/outcome ` +
        `(entry text ${r.entryChars.toFixed(1)} chars); 1,000 outcomes/s for a day: ${(perDay / 1e9).toFixed(2)} GB; ` +
        `written in ${r.seconds.toFixed(1)} s\n`,
    );
  }
}
