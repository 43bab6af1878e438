import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, type EdgeProcess } from '../edge/edge-process.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// DNS rebinding against the agent (docs/gateways.md#running-the-agent): a page whose name now
// points at 127.0.0.1 reaches the agent with its own name as Host; on loopback the agent answers
// only IP literals, localhost and `edge.allowed_hosts`, as the server does (421), so such a page
// cannot report outcomes through the agent's token. /gate answers any Host: nginx sends its
// upstream block's name.
let server: ServerProcess;
let edge: EdgeProcess;

beforeAll(async () => {
  const dir = tempDir();
  server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite') });
  const config = path.join(dir, 'edge.yaml');
  fs.writeFileSync(config, 'edge:\n  allowed_hosts: [edge.internal]\n');
  edge = await startEdge(server.url, { args: ['--config', config] });
});

afterAll(async () => {
  await edge?.stop();
  await server?.stop();
});

function request(method: string, target: string, host: string, body?: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: edge.port,
        method,
        path: target,
        headers: { host, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('the edge agent and the Host header', () => {
  it('refuses a foreign Host with 421 on its own routes and the relayed ones, and records nothing', async () => {
    const post = await request('POST', '/circuits/rebound/outcomes', 'attacker.example:8090', '{"success":false}');
    expect(post.status).toBe(421);
    expect(JSON.parse(post.text)).toMatchObject({ code: 'MISDIRECTED_REQUEST' });
    expect(post.text).toContain('edge.allowed_hosts');
    expect((await request('GET', '/circuits/rebound/allowed', 'attacker.example')).status).toBe(421);
    expect((await request('GET', '/circuits', 'attacker.example')).status).toBe(421);
    expect((await request('GET', '/edge/stats', '127.0.0.1')).text).toContain('"outcomes_accepted":0');
  });

  it('answers loopback names, IP literals and edge.allowed_hosts', async () => {
    for (const host of [`127.0.0.1:${edge.port}`, 'localhost', 'edge.internal:8090'])
      expect((await request('GET', '/circuits/fine/allowed', host)).status).toBe(200);
  });

  it('answers /gate whatever the Host (nginx names its upstream block)', async () => {
    const gate = await request('GET', '/gate/fine', 'circuitlog_edge');
    expect(gate.status).toBe(200);
  });
});
