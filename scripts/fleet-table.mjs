// The per-second table of the fleet cool-down proof in docs/client.md, from one run's counts:
//
//   CIRCUITLOG_FLEET_OUT=/tmp/fleet-%s.json npx vitest run test/e2e/fleet-cool-down.test.ts test/e2e/fleet-ramp.test.ts
//   node scripts/fleet-table.mjs /tmp/fleet-sqlite.json /tmp/fleet-redis.json
//   FLEET_SVG=docs/images/fleet-ramp.svg node scripts/fleet-table.mjs /tmp/fleet-*.json   (the plot)
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

// With FLEET_SVG=<file>: the same runs plotted (admitted share per second against the policy
// line), a plain SVG with no dependency, for docs/images/fleet-ramp.svg.
if (process.env.FLEET_SVG) fs.writeFileSync(process.env.FLEET_SVG, plot(process.argv.slice(2)));

function plot(files) {
  const W = 760;
  const H = 360;
  const left = 56;
  const right = 230;
  const top = 28;
  const bottom = 44;
  const series = files.map((file) => {
    const run = JSON.parse(fs.readFileSync(file, 'utf8'));
    const rows = Array.isArray(run) ? run : run.rows;
    const name = Array.isArray(run)
      ? 'shared ramp (Redis, 4 processes)'
      : `after a cool-down (${run.store === 'redis' ? 'Redis, 2 hosts' : 'SQLite, 2 workers'})`;
    const share = (r) => (Array.isArray(run) ? r.share : r.calls === 0 ? 0 : (100 * r.admitted) / r.calls);
    return { name, points: rows.map((r) => ({ second: r.second, share: share(r), line: r.line })) };
  });
  const maxSecond = Math.max(...series.flatMap((s) => s.points.map((p) => p.second)));
  const x = (second) => left + ((second - 0) / maxSecond) * (W - left - right);
  const y = (percent) => top + (1 - percent / 100) * (H - top - bottom);
  const colours = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${left}" y="18" font-size="13">Admitted share per second (markers) against the policy line (lines)</text>`,
  ];
  for (let p = 0; p <= 100; p += 20) {
    out.push(`<line x1="${left}" x2="${W - right}" y1="${y(p)}" y2="${y(p)}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 6}" y="${y(p) + 4}" text-anchor="end">${p}%</text>`);
  }
  for (let s = 0; s <= maxSecond; s++)
    out.push(`<text x="${x(s)}" y="${H - bottom + 16}" text-anchor="middle">${s}</text>`);
  out.push(
    `<text x="${(left + W - right) / 2}" y="${H - 8}" text-anchor="middle">second of the ramp (each point: the calls of that second)</text>`,
  );
  series.forEach((s, i) => {
    const c = colours[i % colours.length];
    const line = s.points.map((p) => `${x(p.second).toFixed(1)},${y(p.line).toFixed(1)}`).join(' ');
    out.push(`<polyline points="${line}" fill="none" stroke="${c}" stroke-width="1.5" stroke-dasharray="5 3"/>`);
    for (const p of s.points)
      out.push(`<circle cx="${x(p.second).toFixed(1)}" cy="${y(p.share).toFixed(1)}" r="4" fill="${c}"/>`);
    const ly = top + 20 + i * 22;
    out.push(`<circle cx="${W - right + 16}" cy="${ly - 4}" r="4" fill="${c}"/>`);
    out.push(`<text x="${W - right + 26}" y="${ly}">${s.name}</text>`);
  });
  out.push('</svg>\n');
  return out.join('\n');
}
