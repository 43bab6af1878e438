// Summarize V8 .cpuprofile files (from `node --cpu-prof`, e.g. BENCH_CPU_PROF=1 npm run bench):
// top functions by self time, and self time grouped by package / source folder.
//
//   node bench/profile-top.mjs <file.cpuprofile | dir> [topN=30]
// With a directory, the newest .cpuprofile in it is read.

import fs from 'node:fs';
import path from 'node:path';

const [target = 'bench/results/prof', topArg = '30'] = process.argv.slice(2);
let file = target;
if (fs.statSync(target).isDirectory()) {
  const files = fs
    .readdirSync(target)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => path.join(target, f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  if (files.length === 0) throw new Error(`no .cpuprofile in ${target}`);
  file = files[0];
}
const topN = Number(topArg);
const prof = JSON.parse(fs.readFileSync(file, 'utf8'));

// Self time per node = samples hitting it × sampling interval.
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const selfUs = new Map();
for (let i = 0; i < prof.samples.length; i++) {
  const dt = prof.timeDeltas[i] ?? 0;
  selfUs.set(prof.samples[i], (selfUs.get(prof.samples[i]) ?? 0) + dt);
}
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);

function where(cf) {
  const url = cf.url || '';
  const short = url
    .replace(/^file:\/\//, '')
    .replace(/^.*\/node_modules\//, 'node_modules/')
    .replace(process.cwd() + '/', '');
  return short ? `${short}:${cf.lineNumber + 1}` : '';
}
function group(cf) {
  const url = (cf.url || '').replace(/^file:\/\//, '');
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  if (url.startsWith('node:')) return url.split('/')[0];
  if (url.includes('/dist/')) return `dist/${url.split('/dist/')[1].split('/').slice(0, -1).join('/') || '.'}`;
  if (!url) return `(${cf.functionName || 'native/vm'})`;
  return path.relative(process.cwd(), url);
}

const fnSelf = new Map();
const groupSelf = new Map();
for (const [id, us] of selfUs) {
  const cf = byId.get(id).callFrame;
  const key = `${cf.functionName || '(anonymous)'}  ${where(cf)}`;
  fnSelf.set(key, (fnSelf.get(key) ?? 0) + us);
  const g = group(cf);
  groupSelf.set(g, (groupSelf.get(g) ?? 0) + us);
}
const pct = (us) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
console.log(`${file}: ${(total / 1e6).toFixed(2)} s sampled`);
console.log(`\nTop ${topN} functions by self time:`);
for (const [k, us] of [...fnSelf].sort((a, b) => b[1] - a[1]).slice(0, topN))
  console.log(`${pct(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
console.log('\nSelf time by package / folder:');
for (const [k, us] of [...groupSelf].sort((a, b) => b[1] - a[1]).slice(0, 25))
  console.log(`${pct(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
