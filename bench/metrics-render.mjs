// `node bench/metrics-render.mjs [circuits]` (after `npm run build`): the /metrics render time in one
// process on an in-memory SQLite database of `circuits` (1,000,000) closed circuits, with
// metrics.max_circuits 10,000 labelled: median of 10 renders, three times.
import { createObservability } from '../dist/observe/observability.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../dist/store/sqlite/database.js';
import { sqliteReaders } from '../dist/store/sqlite/readers.js';

const count = Number(process.argv[2] ?? 1_000_000);
const db = openDatabase(':memory:');
migrate(db, readMigrations(defaultMigrationsDir()));
const insert = db.prepare('INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES (?, 5, 30, 0, 0)');
db.transaction(() => { for (let i = 0; i < count; i++) insert.run(`scale/c${i}`); })();
const { metrics } = createObservability({ readers: sqliteReaders(db), clock: Date.now, metricsEnabled: true, maxCircuits: 10_000, maxStreams: 10 });
for (let k = 0; k < 3; k++) {
  const times = [];
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    await metrics.render();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  console.log(`${count} circuits: render p50 ${times[5].toFixed(1)} ms`);
}
