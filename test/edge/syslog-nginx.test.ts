/**
 * The documented log_format (NGINX_LOG_FORMAT) in a real nginx (Debian's, provisioned like the
 * other system programs), logging over syslog to the agent's intake, both on loopback: each
 * proxied request becomes its outcomes in the sink; a refused one (no upstream) none; a bad
 * circuit name is dropped as noise.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { OutcomeItem } from '../../src/client/transport.js';
import { DropCounter } from '../../src/edge/edge-types.js';
import { NGINX_LOG_FORMAT } from '../../src/edge/nginx-log.js';
import { type SyslogIntake, startSyslogIntake } from '../../src/edge/syslog.js';
import { freePort } from '../hammer-client.js';
import { nginxBinary } from '../nginx/nginx.js';

const NGINX = nginxBinary(); // found as the provisioning step finds it (PATH, and sbin beside bin)

let upstream: http.Server;
let intake: SyslogIntake;
let nginx: ChildProcess;
let nginxPort: number;
let dir: string;
const accepted: OutcomeItem[] = [];
const drops = new DropCounter({ info: () => {}, warn: () => {} });

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    if (req.url === '/throttle') res.writeHead(429, { 'retry-after': '3' });
    else res.writeHead(req.url === '/fail' ? 500 : 200);
    res.end('x');
  });
  await new Promise<void>((ok) => upstream.listen(0, '127.0.0.1', ok));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  intake = await startSyslogIntake({
    listen: '127.0.0.1:0',
    maxLineBytes: 8_192,
    sink: {
      accept: (items) => {
        accepted.push(...items);
        return true;
      },
    },
    known: async (name) => name === 'orders',
    drops,
  });
  nginxPort = await freePort();
  dir = mkdtempSync(join(tmpdir(), 'syslog-nginx-'));
  writeFileSync(
    join(dir, 'nginx.conf'),
    `pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 64; }
http {
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  ${NGINX_LOG_FORMAT}
  server {
    listen 127.0.0.1:${nginxPort};
    set $circuitlog_circuit orders;
    set $circuitlog_caller nginx-a;
    access_log syslog:server=127.0.0.1:${intake.port},tag=circuitlog,nohostname circuitlog;
    location / { proxy_pass http://127.0.0.1:${upstreamPort}; }
    location = /refused { return 503; }
    location = /noise { set $circuitlog_circuit "../etc"; proxy_pass http://127.0.0.1:${upstreamPort}; }
  }
}
`,
  );
  nginx = spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off; master_process off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await vi.waitFor(async () => expect(await get('/ready')).toBe(200), { timeout: 10_000, interval: 50 });
});

afterAll(async () => {
  if (nginx !== undefined && nginx.exitCode === null) {
    const exited = new Promise((ok) => nginx.once('exit', ok));
    nginx.kill('SIGTERM');
    await exited;
  }
  drops.stop();
  await intake?.close();
  await new Promise((ok) => upstream?.close(ok));
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

function get(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: nginxPort, path }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      })
      .on('error', reject);
  });
}

describe('a real nginx logging to the syslog intake', () => {
  it('reports each proxied request as its outcome, none for a refused one, and drops a bad name', async () => {
    await vi.waitFor(() => expect(intake.counts().outcomes).toBe(1)); // the readiness probe
    accepted.length = 0;
    expect(await get('/ok')).toBe(200);
    expect(await get('/fail')).toBe(500);
    expect(await get('/throttle')).toBe(429);
    expect(await get('/refused')).toBe(503);
    expect(await get('/noise')).toBe(200);
    await vi.waitFor(() => expect(intake.counts().received).toBe(6));
    await vi.waitFor(() => expect(intake.counts().outcomes).toBe(4));
    expect(accepted.map(({ at: _a, duration_ms: _d, ...rest }) => rest)).toEqual([
      { circuit: 'orders', success: true, caller: 'nginx-a' },
      { circuit: 'orders', success: false, caller: 'nginx-a' },
      { circuit: 'orders', kind: 'throttled', retry_after_seconds: 3, caller: 'nginx-a' },
    ]);
    for (const item of accepted) {
      expect(item.duration_ms).toBeGreaterThanOrEqual(0);
      expect(Math.abs(Date.parse(item.at!) - Date.now())).toBeLessThan(60_000);
    }
    expect(intake.counts()).toMatchObject({ skipped: { no_upstream: 1 }, dropped: { bad_circuit: 1 } });
  });
});
