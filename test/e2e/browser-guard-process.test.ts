import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { proxyYaml, startNodes, type FakeNode } from '../proxy/fake-node.js';
import { rawRequest } from '../proxy/proxy-app.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

let nodes: Record<string, FakeNode> = {};
const servers: ServerProcess[] = [];
beforeAll(async () => {
  nodes = await startNodes('dc1-1');
});
afterAll(async () => {
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function start(extra = ''): Promise<ServerProcess> {
  const dir = tempDir();
  fs.writeFileSync(path.join(dir, 'c.yaml'), `${proxyYaml(nodes, 'health_check: { enabled: false }')}${extra}`);
  const server = await startServer({
    CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
    CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
  });
  servers.push(server);
  return server;
}

describe('browser guards in the real server (HOST=127.0.0.1, no token)', () => {
  it('answers Host: attacker.example with 421 on the API and on /proxy, without calling the node', async () => {
    const server = await start();
    const api = await rawRequest(server.url, 'POST', '/circuits/svc/failure', { host: 'attacker.example' });
    expect([api.status, JSON.parse(api.body).code]).toEqual([421, 'MISDIRECTED_REQUEST']);
    const seen = nodes['dc1-1']!.seen.length;
    const proxied = await rawRequest(server.url, 'GET', '/proxy/users/secret', {
      host: `attacker.example:${server.port}`,
    });
    expect([proxied.status, proxied.headers['content-type']]).toEqual([421, 'application/problem+json']);
    expect(nodes['dc1-1']!.seen.length).toBe(seen);
    expect((await rawRequest(server.url, 'GET', '/health', { host: `localhost:${server.port}` })).status).toBe(200);
  });

  it('answers the names of server.allowed_hosts', async () => {
    const server = await start('server: { allowed_hosts: [circuitlog.internal] }\n');
    expect((await rawRequest(server.url, 'GET', '/health', { host: 'circuitlog.internal' })).status).toBe(200);
    expect((await rawRequest(server.url, 'GET', '/health', { host: 'attacker.example' })).status).toBe(421);
  });

  it('passes a cross-site form POST under /proxy to the upstream (its own CSRF rules apply), but refuses it on /circuits', async () => {
    const server = await start();
    const form = {
      origin: 'https://attacker.example',
      'sec-fetch-site': 'cross-site',
      'content-type': 'application/x-www-form-urlencoded',
      'content-length': '0',
    };
    const proxied = await rawRequest(server.url, 'POST', '/proxy/users/form', form);
    expect(proxied.status).toBe(200);
    expect(nodes['dc1-1']!.seen.at(-1)).toMatchObject({ method: 'POST', url: '/form' });
    const reset = await rawRequest(server.url, 'POST', '/circuits/users%2Fdc1-1/reset', form);
    expect([reset.status, JSON.parse(reset.body).code]).toEqual([403, 'CROSS_SITE_REQUEST']);
  });

  it('still accepts curl -X POST (no Content-Type, empty body) on the circuitlog routes', async () => {
    const server = await start();
    const res = await rawRequest(server.url, 'POST', '/circuits/svc/failure', { 'content-length': '0' });
    expect(res.status).toBe(200);
  });
});
