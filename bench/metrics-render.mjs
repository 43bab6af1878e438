// `node bench/metrics-render.mjs [circuits] [baseline-dist]` (after `npm run build`): the /metrics
// render time in one process on an in-memory SQLite database of `circuits` (1,000,000) closed
// circuits, with metrics.max_circuits 10,000 labelled: p50 of 50 renders after 10 of warm-up.
// With `baseline-dist` (another build's dist/ folder, e.g. of main), both builds render the same
// table in the same process, interleaved in alternating order, and the gauge lines they send
// are compared (they must be the same).
import path from 'node:path';

const count = Number(process.argv[2] ?? 1_000_000);
const builds = { this: path.join(import.meta.dirname, '..', 'dist') };
if (process.argv[3]) builds.baseline = path.resolve(process.argv[3]);

const metrics = {};
for (const [key, dist] of Object.entries(builds)) {
  const { createObservability } = await import(path.join(dist, 'observe/observability.js'));
  const { defaultMigrationsDir, migrate, openDatabase, readMigrations } = await import(
    path.join(dist, 'store/sqlite/database.js')
  );
  const { sqliteReaders } = await import(path.join(dist, 'store/sqlite/readers.js'));
  const db = openDatabase(':memory:');
  migrate(db, readMigrations(defaultMigrationsDir()));
  db.prepare(`INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at)
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
    SELECT 'scale/c' || i, 5, 30, 0, 0 FROM n`).run(count);
  metrics[key] = createObservability({
    readers: sqliteReaders(db),
    clock: Date.now,
    metricsEnabled: true,
    maxCircuits: 10_000,
    maxStreams: 10,
  }).metrics;
}
if (metrics.baseline) {
  const gauges = async (m) =>
    (await m.render())
      .split('\n')
      .filter((l) => l.startsWith('circuitlog_circuit'))
      .join('\n');
  console.log(
    `gauge lines the same in both builds: ${(await gauges(metrics.this)) === (await gauges(metrics.baseline))}`,
  );
}
const times = Object.fromEntries(Object.keys(metrics).map((k) => [k, []]));
const keys = Object.keys(metrics);
for (let i = 0; i < 60; i++) {
  for (const key of i % 2 ? keys : [...keys].reverse()) {
    const t0 = performance.now();
    await metrics[key].render();
    if (i >= 10) times[key].push(performance.now() - t0);
  }
}
const p50 = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const key of keys)
  console.log(
    `${key === 'this' ? 'this build' : `baseline ${builds.baseline}`}: ${count} circuits, render p50 ${p50(times[key]).toFixed(1)} ms`,
  );
if (metrics.baseline) console.log(`ratio baseline / this: ${(p50(times.baseline) / p50(times.this)).toFixed(2)}x`);
