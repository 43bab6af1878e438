// The per-second table of the fleet cool-down proof in docs/client.md, from one run's counts:
//
//   CIRCUITLOG_FLEET_OUT=/tmp/fleet-%s.json npx vitest run test/e2e/fleet-cool-down.test.ts test/e2e/fleet-ramp.test.ts
//   node scripts/fleet-table.mjs /tmp/fleet-sqlite.json /tmp/fleet-redis.json
//
// (`%s` becomes the store, or `ramp` for the shared-ramp test, whose rows print as a second table.)
import fs from 'node:fs';

const pct = (n, d) => (d === 0 ? '–' : `${((100 * n) / d).toFixed(1)}%`);

for (const file of process.argv.slice(2)) {
  const run = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (Array.isArray(run)) {
    console.log('| second of the ramp | draws (clients + hosts) | of them the hosts | admitted share | policy line |');
    console.log('| ---: | ---: | ---: | ---: | ---: |');
    for (const r of run)
      console.log(`| ${r.second} | ${r.draws} | ${r.serverDraws} | ${r.share.toFixed(1)}% | ${r.line.toFixed(1)}% |`);
    console.log();
    continue;
  }
  console.log(
    `${run.store}: cool_until = the 429 + ${run.coolUntilMinusT0Ms} ms; first call back at the 429 + ${run.resumedMinusT0Ms} ms; calls reaching the dependency in the cool-down's seconds: ${run.perSecondBefore.join(', ')}`,
  );
  console.log();
  console.log('| second after the cool-down | calls made | reached the dependency | share | policy line |');
  console.log('| ---: | ---: | ---: | ---: | ---: |');
  for (const r of run.rows)
    console.log(`| ${r.second} | ${r.calls} | ${r.admitted} | ${pct(r.admitted, r.calls)} | ${r.line.toFixed(1)}% |`);
  console.log();
}
