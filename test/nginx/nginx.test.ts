import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nginxBuild, startNginx, type Nginx } from './nginx.js';

const started: Nginx[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((n) => n.stop()));
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });

const proxyTo = (upstreamPort: number) => (at: { listen: string }) =>
  `
    server {
        listen ${at.listen};
        location / {
            proxy_pass http://127.0.0.1:${upstreamPort};
        }
    }`;

describe("test/nginx/nginx.ts: a real nginx of the test's own", () => {
  it("is Debian's build with the auth_request module (what the gateway setup needs)", () => {
    const build = nginxBuild();
    expect(build).toMatch(/nginx version: nginx\/\d+\.\d+/);
    expect(build).toContain('--with-http_auth_request_module');
  });

  it('serves on a loopback port of its own in front of a loopback upstream, then stops and frees the port', async () => {
    let hits = 0;
    const upstream = http.createServer((req, res) => {
      hits++;
      res.end(`upstream saw ${req.url}`);
    });
    const upstreamPort = await listen(upstream);
    const nginx = await startNginx({ http: proxyTo(upstreamPort) });
    started.push(nginx);
    expect(nginx.conf).toContain(`listen 127.0.0.1:${nginx.port};`);
    const response = await fetch(`${nginx.url}/hello?x=1`);
    expect(response.status).toBe(200);
    expect(response.headers.get('server')).toMatch(/^nginx/);
    expect(await response.text()).toBe('upstream saw /hello?x=1');
    expect(hits).toBe(1);
    expect(fs.existsSync(path.join(nginx.dir, 'nginx.pid'))).toBe(true);

    await nginx.stop();
    expect(nginx.child.exitCode).toBe(0);
    expect(fs.existsSync(path.join(nginx.dir, 'nginx.pid'))).toBe(false); // the master cleaned up: it ran there
    expect(await refused(nginx.port)).toBe(true);
    expect(nginx.errorLog()).toContain('exiting');
  });

  it('tries another free port when the one it picked is taken', async () => {
    const taken = await listen(net.createServer());
    const upstream = http.createServer((_req, res) => res.end('ok'));
    const nginx = await startNginx({ http: proxyTo(await listen(upstream)), port: taken });
    started.push(nginx);
    expect(nginx.port).not.toBe(taken);
    expect(await (await fetch(nginx.url)).text()).toBe('ok');
  });

  it("rejects with nginx's error log when nginx refuses the config", async () => {
    await expect(startNginx({ http: () => '    no_such_directive on;' })).rejects.toThrow(
      /exited \(1\) before serving; error log:\n.*unknown directive "no_such_directive"/s,
    );
  });
});
