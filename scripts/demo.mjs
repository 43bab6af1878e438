// npm run demo: four fake nodes in two DCs, the real server in front, and a walk through
// normal traffic, a dc1 outage (failover) and its recovery (failback).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fakeNode(id) {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ served_by: id, path: req.url }));
  });
  const sockets = new Set();
  server.on('connection', (s) => (sockets.add(s), s.on('close', () => sockets.delete(s))));
  const node = {
    id,
    port: 0,
    start: () =>
      new Promise((resolve) =>
        server.listen(node.port, '127.0.0.1', () => ((node.port = server.address().port), resolve())),
      ),
    stop: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  return node;
}

const nodes = ['dc1-1', 'dc1-2', 'dc2-1', 'dc2-2'].map(fakeNode);
for (const n of nodes) await n.start();

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-demo-'));
const config = path.join(dir, 'proxy.yaml');
fs.writeFileSync(
  config,
  `local_dc: dc1
upstreams:
  users:
    nodes:
${nodes.map((n) => `      - { id: ${n.id}, dc: ${n.id.slice(0, 3)}, url: "http://127.0.0.1:${n.port}" }`).join('\n')}
    failure_threshold: 2
    timeout_seconds: 3
    request_timeout_ms: 500
    health_check: { path: /health, interval_ms: 500, timeout_ms: 300 }
`,
);

const server = spawn(process.execPath, ['dist/main.js'], {
  env: {
    ...process.env,
    PORT: '0',
    CIRCUITLOG_CONFIG: config,
    CIRCUITLOG_DB: path.join(dir, 'demo.db'),
    CIRCUITLOG_TOKEN: '',
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const transitions = [];
const base = await new Promise((resolve, reject) => {
  server.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  readline.createInterface({ input: server.stdout }).on('line', (line) => {
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      return;
    }
    if (entry.event === 'listening') resolve(`http://127.0.0.1:${entry.port}`);
    if (entry.event === 'transition')
      transitions.push(`    circuit ${entry.circuit}: ${entry.from} -> ${entry.to} (${entry.reason})`);
  });
});

async function call(label) {
  const res = await fetch(`${base}/proxy/users/api/users/42`);
  await res.text();
  const h = (name) => res.headers.get(name) ?? '-';
  console.log(
    `  ${label.padEnd(4)} ${res.status}  X-Node: ${h('x-node').padEnd(6)} X-DC: ${h('x-dc')}  X-Degraded: ${h('x-degraded')}`,
  );
}
function flushTransitions() {
  for (const t of transitions.splice(0)) console.log(t);
}
async function phase(title, count) {
  console.log(`\n== ${title}`);
  for (let i = 1; i <= count; i++) await call(`#${i}`);
  await sleep(50);
  flushTransitions();
}

try {
  console.log(`circuitlog at ${base}; GET /proxy/users/api/users/42 goes to the users nodes`);
  await phase('1. normal traffic: stays in dc1, round-robin over dc1-1 and dc1-2', 4);
  await Promise.all(nodes.slice(0, 2).map((n) => n.stop()));
  await phase('2. dc1 is down: refused connections move on at once, no client sees an error', 6);
  console.log('\n== 3. dc1 comes back; waiting for timeout_seconds (3 s) plus a health interval');
  await Promise.all(nodes.slice(0, 2).map((n) => n.start()));
  await sleep(3_700);
  flushTransitions();
  await phase('4. failback: traffic is home in dc1 again', 4);
  const circuits = await (await fetch(`${base}/circuits`)).json();
  console.log('\n== GET /circuits');
  for (const c of circuits.circuits) console.log(`  ${c.name.padEnd(12)} ${c.state}`);
} finally {
  server.kill('SIGTERM');
  await Promise.all(nodes.map((n) => n.stop()));
  fs.rmSync(dir, { recursive: true, force: true });
}
