import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CredentialEntry, tokenSha256 } from '../../src/auth/credentials.js';
import type { Scope } from '../../src/auth/identity.js';
import { type ServerProcess, startServer, tempDir } from '../server-process.js';

// The audit log on a real server with a credentials file (issue 30): who is each credential's
// id, GET /audit needs admin, and a reload seen by every worker is one entry.
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

const TOKENS = {
  deploy: 'deploy-token-0123456789abcdef',
  oncall: 'oncall-token-0123456789abcdef',
  auditor: 'auditor-token-0123456789abcdef',
  reporter: 'reporter-token-0123456789abcdef',
  newcomer: 'newcomer-token-0123456789abcdef',
};
type Who = keyof typeof TOKENS;
const entry = (id: Who, scopes: Scope[]): CredentialEntry => ({ id, token_sha256: tokenSha256(TOKENS[id]), scopes });
const FIRST = [
  entry('deploy', ['read', 'configure']),
  entry('oncall', ['read', 'operate']),
  entry('auditor', ['admin']),
  entry('reporter', ['read', 'report']),
];

/** One request on a fresh connection (a cluster spreads them over its workers): status and JSON body. */
function send(url: string, method: string, as: Who, body?: unknown): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKENS[as]}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const req = http.request(url, { method, agent: false, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text === '' ? null : JSON.parse(text) }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${url}`)));
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('the audit log with a credentials file (2 workers)', () => {
  it('names each credential, answers GET /audit to admin only, and records a reload once', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'credentials.json');
    fs.writeFileSync(file, JSON.stringify({ credentials: FIRST }));
    const server = await startServer(
      { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CREDENTIALS: file, CIRCUITLOG_WORKERS: '2' },
      { detached: true },
    );
    running.push(server);
    const { url } = server;
    expect((await send(`${url}/circuits/pay`, 'PATCH', 'deploy', { failure_threshold: 3 })).status).toBe(201);
    expect((await send(`${url}/circuits/pay`, 'PATCH', 'oncall', { forced_state: 'open' })).status).toBe(200);
    expect((await send(`${url}/audit`, 'GET', 'reporter')).status).toBe(403);
    expect((await send(`${url}/audit`, 'GET', 'oncall')).status).toBe(403);
    const before = await send(`${url}/audit`, 'GET', 'auditor');
    expect(before.status).toBe(200);
    expect(before.json.entries.map((e: { who: string; action: string }) => `${e.who}:${e.action}`)).toEqual([
      'oncall:forced_open',
      'deploy:circuit_created',
    ]);

    // A new credential: every worker reloads the file (it watches it); wait until each accepts it.
    const temp = `${file}.next`;
    fs.writeFileSync(temp, JSON.stringify({ credentials: [...FIRST, entry('newcomer', ['read'])] }));
    fs.renameSync(temp, file);
    const deadline = Date.now() + 10_000;
    for (let inARow = 0; inARow < 10; ) {
      if (Date.now() > deadline) throw new Error('the new credential was not accepted within 10 s');
      inARow = (await send(`${url}/circuits/pay`, 'GET', 'newcomer')).status === 200 ? inARow + 1 : 0;
    }
    const after = await send(`${url}/audit?action=credentials_reloaded`, 'GET', 'auditor');
    expect(after.json.entries).toHaveLength(1);
    expect(after.json.entries[0]).toMatchObject({
      who: 'system',
      circuit: null,
      before: { credentials: ['deploy', 'oncall', 'auditor', 'reporter'] },
      after: { credentials: ['deploy', 'oncall', 'auditor', 'reporter', 'newcomer'] },
    });
  });
});
