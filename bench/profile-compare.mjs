// Compare two .cpuprofile files (e.g. the proxy before and after a change) per request:
// self time grouped into a few buckets (socket writes, undici, Node streams, EventEmitter,
// circuitlog's own code, GC, …), divided by the requests the profiled process served.
//
//   node bench/profile-compare.mjs <before.cpuprofile|dir> <before requests> <after.cpuprofile|dir> <after requests>
// Run the profiled sections with BENCH_WARMUP=0 so every request the process served is counted
// by the bench (its "requests" column). µs/req under the profiler are inflated; compare rows.

import fs from 'node:fs';
import path from 'node:path';

function load(target) {
  let file = target;
  if (fs.statSync(target).isDirectory()) {
    const files = fs
      .readdirSync(target)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(target, f));
    files.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
    if (files.length === 0) throw new Error(`no .cpuprofile in ${target}`);
    file = files[0];
  }
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

const BUCKETS = [
  ['undici request() + BodyReadable', (f) => /api-request|api\/readable/.test(f.url)],
  ['undici core (dispatch, parser, h1)', (f) => /undici/.test(f.url)],
  ['Node streams (Readable/Writable/pipe)', (f) => /streams\//.test(f.url)],
  ['EventEmitter', (f) => /node:events/.test(f.url)],
  ['Node http/net', (f) => /_http_|node:net/.test(f.url)],
  ['circuitlog (dist/)', (f) => /dist\//.test(f.url)],
  ['GC', (f) => f.functionName === '(garbage collector)'],
  ['socket writes (syscalls)', (f) => /^(writev|writeLatin1String|writeBuffer|writeUtf8String)$/.test(f.functionName)],
  ['other', () => true],
];

/** µs of self time per request, per bucket (idle left out). */
function perRequest(profile, requests) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const out = Object.fromEntries(BUCKETS.map(([name]) => [name, 0]));
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id);
    if (frame.functionName === '(idle)') return;
    const [name] = BUCKETS.find(([, match]) => match(frame));
    out[name] += (profile.timeDeltas[i] ?? 0) / requests;
  });
  return out;
}

const [beforeFile, beforeN, afterFile, afterN] = process.argv.slice(2);
if (!afterN) throw new Error('usage: profile-compare.mjs <before> <before requests> <after> <after requests>');
const before = perRequest(load(beforeFile), Number(beforeN));
const after = perRequest(load(afterFile), Number(afterN));
const rows = BUCKETS.map(([name]) => `| ${name} | ${before[name].toFixed(1)} | ${after[name].toFixed(1)} |`);
const total = (o) =>
  Object.values(o)
    .reduce((a, b) => a + b, 0)
    .toFixed(1);
process.stdout.write(
  [
    '| bucket | before µs/req | after µs/req |',
    '| --- | ---: | ---: |',
    ...rows,
    `| **busy total** | **${total(before)}** | **${total(after)}** |`,
    '',
  ].join('\n'),
);
