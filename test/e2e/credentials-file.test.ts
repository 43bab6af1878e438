import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CredentialEntry, tokenSha256 } from '../../src/auth/credentials.js';
import { refusedStart } from '../refused-start.js';
import { type ServerProcess, startServer, tempDir } from '../server-process.js';

// The credentials file on the real server: a bad file at start, reload on SIGHUP in every
// worker, and a token rotated under load (issue 30).
const KEPT = 'kept-token-0123456789abcdef';
const OLD = 'old-token-0123456789abcdef';
const NEW = 'new-token-0123456789abcdef';
const NEWER = 'newer-token-0123456789abcdef';

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

const entry = (id: string, token: string): CredentialEntry => ({
  id,
  token_sha256: tokenSha256(token),
  scopes: ['read', 'report'],
});
const fileText = (...entries: CredentialEntry[]) => JSON.stringify({ credentials: entries });

/** Replace the file as a deployer does: a temp file beside it renamed over it. */
function replace(file: string, text: string) {
  const temp = `${file}.next`;
  fs.writeFileSync(temp, text);
  fs.renameSync(temp, file);
}

/** One request on a fresh connection (so a cluster spreads them over its workers): the status. */
function status(url: string, method: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${url}`)));
    req.on('error', reject);
    req.end();
  });
}

/** Poll until `token` is refused by every worker (10 refusals in a row on fresh connections), at most `withinMs`. */
async function refusedWithin(url: string, token: string, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  let inARow = 0;
  while (inARow < 10) {
    if (Date.now() > deadline) throw new Error(`the removed token was still accepted ${withinMs} ms after the change`);
    inARow = (await status(`${url}/circuits/rotated/allowed`, 'GET', token)) === 401 ? inARow + 1 : 0;
  }
}

async function acceptedWithin(url: string, token: string, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  let inARow = 0;
  while (inARow < 10) {
    if (Date.now() > deadline) throw new Error(`the added token was still refused ${withinMs} ms after the change`);
    inARow = (await status(`${url}/circuits/rotated/allowed`, 'GET', token)) === 200 ? inARow + 1 : 0;
  }
}

describe('the credentials file on the server', () => {
  it('refuses to start on a bad file: exit 2, one line naming the problem', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'credentials.yaml');
    fs.writeFileSync(file, 'credentials:\n  - id: checkout\n    token_sha256: nothex\n    scopes: [report]\n');
    const { code, stderr } = await refusedStart({ CIRCUITLOG_DB: path.join(dir, 'db'), CIRCUITLOG_CREDENTIALS: file });
    expect(code).toBe(2);
    expect(stderr).toBe(
      `circuitlog: cannot start: CIRCUITLOG_CREDENTIALS: ${file}: credentials.0.token_sha256: the hex SHA-256 of the token (64 hex digits)\n`,
    );
  });

  it('reloads in every worker on SIGHUP to the primary', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'credentials.json');
    fs.writeFileSync(file, fileText(entry('kept', KEPT)));
    const server = await startServer(
      { CIRCUITLOG_DB: path.join(dir, 'db'), CIRCUITLOG_CREDENTIALS: file, CIRCUITLOG_WORKERS: '2' },
      { detached: true },
    );
    running.push(server);
    const reloads = () => server.logs.filter((l) => l.event === 'credentials_reloaded' && l.trigger === 'signal');
    const both = new Promise<void>((resolve) => {
      const check = () => (reloads().length >= 2 ? resolve() : setTimeout(check, 10));
      check();
    });
    server.child.kill('SIGHUP');
    await both;
    expect(new Set(reloads().map((l) => l.pid)).size).toBe(2);
    expect(await status(`${server.url}/circuits`, 'GET', KEPT)).toBe(200);
  });

  it('rotates a token under load: 0 refusals for a token listed throughout, a removed one refused within 2 s', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'credentials.json');
    fs.writeFileSync(file, fileText(entry('kept', KEPT), entry('old', OLD)));
    const server = await startServer(
      { CIRCUITLOG_DB: path.join(dir, 'db'), CIRCUITLOG_CREDENTIALS: file, CIRCUITLOG_WORKERS: '2' },
      { detached: true },
    );
    running.push(server);
    const TOTAL = 2_000;
    const LANES = 8;
    const statuses: Record<number, number> = {};
    let sent = 0;
    let reached: { at: number; resolve: () => void }[] = [];
    const when = (count: number) => new Promise<void>((resolve) => reached.push({ at: count, resolve }));
    const lanes = Array.from({ length: LANES }, async (_, lane) => {
      while (sent < TOTAL) {
        const n = sent++;
        const [method, route] =
          n % 2 === 0 ? ['GET', `/circuits/lane-${lane}/allowed`] : ['POST', `/circuits/lane-${lane}/success`];
        const s = await status(`${server.url}${route}`, method, KEPT);
        statuses[s] = (statuses[s] ?? 0) + 1;
        for (const r of reached) if (sent >= r.at) r.resolve();
        reached = reached.filter((r) => sent < r.at);
      }
    });
    await when(400);
    replace(file, fileText(entry('kept', KEPT), entry('new', NEW)));
    await refusedWithin(server.url, OLD, 2_000);
    await acceptedWithin(server.url, NEW, 2_000);
    await when(1_200);
    expect(sent).toBeLessThan(TOTAL); // the second change lands while the load still runs
    replace(file, fileText(entry('newer', NEWER), entry('kept', KEPT)));
    await refusedWithin(server.url, NEW, 2_000);
    await acceptedWithin(server.url, NEWER, 2_000);
    await Promise.all(lanes);
    expect(statuses).toEqual({ 200: TOTAL });
  });

  it('logs no refused token, and counts the refusals by reason', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'credentials.json');
    fs.writeFileSync(file, fileText(entry('kept', KEPT)));
    const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db'), CIRCUITLOG_CREDENTIALS: file });
    running.push(server);
    const secret = 'refused-secret-token-0123456789';
    expect(await status(`${server.url}/circuits`, 'GET', secret)).toBe(401);
    expect(await status(`${server.url}/circuits/x/allowed`, 'GET', secret)).toBe(401);
    expect(await status(`${server.url}/circuits/x`, 'DELETE', KEPT)).toBe(403);
    const metrics = await new Promise<string>((resolve, reject) =>
      http
        .get(`${server.url}/metrics`, { headers: { authorization: `Bearer ${KEPT}` } }, (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve(text));
        })
        .on('error', reject),
    );
    expect(metrics).toContain('circuitlog_auth_refusals_total{reason="invalid"} 2');
    expect(metrics).toContain('circuitlog_auth_refusals_total{reason="insufficient_scope"} 1');
    await server.stop();
    const everything = JSON.stringify(server.logs) + server.stderr();
    expect(server.logs.filter((l) => l.event === 'request_failed')).toHaveLength(3);
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain(KEPT);
  });
});
