// `node bench/stream-memory.mjs [streams]` (after `npm run build`): server RSS before and after
// opening `streams` (2,000) idle GET /events/stream connections on loopback: bytes per idle stream.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './lib.mjs';

const count = Number(process.argv[2] ?? 2_000);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-streams-'));
fs.writeFileSync(path.join(dir, 'config.yaml'), `events: { max_streams: ${count + 10} }\n`);
const port = await freePort();
const env = {
  ...process.env,
  HOST: '127.0.0.1',
  PORT: String(port),
  CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
  CIRCUITLOG_LOG_LEVEL: 'warn',
  CIRCUITLOG_CONFIG: path.join(dir, 'config.yaml'),
  CIRCUITLOG_TOKEN: '',
};
const child = spawn(process.execPath, [path.join(import.meta.dirname, '..', 'dist', 'main.js')], {
  env,
  stdio: 'inherit',
});
const requests = [];
try {
  for (let i = 0; i < 200; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))[1]) * 1024;
  await new Promise((r) => setTimeout(r, 1_000));
  const before = rss();
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  for (let i = 0; i < count; i++) {
    await new Promise((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/events/stream', agent }, (res) => {
        res.once('data', () => resolve());
        res.resume();
      });
      req.on('error', reject);
      requests.push(req);
    });
  }
  await new Promise((r) => setTimeout(r, 2_000));
  const after = rss();
  console.log(
    `${count} idle streams: RSS ${(before / 2 ** 20).toFixed(0)} -> ${(after / 2 ** 20).toFixed(0)} MiB, ${Math.round((after - before) / count)} bytes per stream`,
  );
} finally {
  for (const r of requests) r.destroy();
  child.kill();
  fs.rmSync(dir, { recursive: true, force: true });
}
