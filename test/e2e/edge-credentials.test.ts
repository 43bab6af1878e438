// The edge agent with a credential of its own (issue 30's credentials file on the real server):
// what the server would refuse of that credential the agent refuses at once, with the server's
// own 403, instead of acknowledging it and losing, with the batch the server then refuses
// whole, other clients' outcomes sent beside it.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { tokenSha256 } from '../../src/auth/credentials.js';
import { circuitPath, edgeStats, send, waitReady, type Answer } from '../edge/edge-http.js';
import { startEdge, type EdgeProcess } from '../edge/edge-process.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const TOKEN = 'edge-token-0123456789abcdef';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const ADMIN_TOKEN = 'admin-token-0123456789abcdef'; // the test's own reads of every circuit
const QUOTA_TOKEN = 'quota-token-0123456789abcdef';
let server: ServerProcess;
let agent: EdgeProcess;
/** An agent whose credential may create one circuit (`max_new_circuits`: counted on the server only). */
let quota: EdgeProcess;

beforeAll(async () => {
  const dir = tempDir('circuitlog-edge-');
  const credentials = path.join(dir, 'credentials.json');
  const entry = { id: 'edge', token_sha256: tokenSha256(TOKEN), scopes: ['read', 'report'], circuits: ['pay/*'] };
  const admin = { id: 'ops', token_sha256: tokenSha256(ADMIN_TOKEN), scopes: ['admin'] };
  const limited = {
    id: 'quota',
    token_sha256: tokenSha256(QUOTA_TOKEN),
    scopes: ['read', 'report'],
    circuits: ['quota/*'],
    max_new_circuits: 1,
  };
  fs.writeFileSync(credentials, JSON.stringify({ credentials: [entry, admin, limited] }));
  server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CREDENTIALS: credentials });
  [agent, quota] = await Promise.all([
    startEdge(server.url, { env: { CIRCUITLOG_TOKEN: TOKEN } }),
    startEdge(server.url, { env: { CIRCUITLOG_TOKEN: QUOTA_TOKEN } }),
  ]);
  await Promise.all([waitReady(agent.url, 200), waitReady(quota.url, 200)]);
  // The agent has asked the server who it is (GET /whoami, once it follows the stream).
  await vi.waitFor(async () => expect((await edgeStats(agent.url)).credential).toBe('edge'), { interval: 20 });
});

afterAll(async () => {
  await Promise.allSettled([agent?.stop('SIGKILL'), quota?.stop('SIGKILL')]);
  await server?.stop('SIGKILL');
});

/** POST a JSON body to the agent (no token: the agent's own is what the server sees) and, with the token, to the server. */
async function both(target: string, body: unknown, id: string): Promise<[Answer, Answer]> {
  const text = JSON.stringify(body);
  const viaAgent = await send(agent.url, target, { method: 'POST', body: text, requestId: id });
  const direct = await send(server.url, target, { method: 'POST', body: text, requestId: id, headers: AUTH });
  return [viaAgent, direct];
}

async function failures(name: string): Promise<number | null> {
  const res = await fetch(`${server.url}/circuits/${encodeURIComponent(name)}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  if (res.status === 404) return null;
  return ((await res.json()) as { failure_count: number }).failure_count;
}

it('refuses with the server’s 403 an outcome for a circuit or caller outside its credential, and loses no one else’s', async () => {
  const before = await edgeStats(agent.url);
  const cases: [string, string, unknown, string][] = [
    ['circuit outside', circuitPath('other/b', 'outcomes'), { success: false }, 'CIRCUIT_NOT_PERMITTED'],
    ['caller outside', circuitPath('pay/b', 'outcomes'), { success: false, caller: 'someone' }, 'CALLER_NOT_PERMITTED'],
    [
      'batch with a circuit outside',
      '/outcomes',
      {
        outcomes: [
          { circuit: 'pay/b', success: false },
          { circuit: 'other/c', success: false },
        ],
      },
      'CIRCUIT_NOT_PERMITTED',
    ],
    [
      'batch with a caller outside',
      '/outcomes',
      {
        outcomes: [
          { circuit: 'pay/b', success: false, caller: 'edge/pod-1' },
          { circuit: 'pay/b', success: false, caller: 'x' },
        ],
      },
      'CALLER_NOT_PERMITTED',
    ],
  ];
  for (const [what, target, body, code] of cases) {
    const [viaAgent, direct] = await both(target, body, `edge-cred-${what.replaceAll(' ', '-')}`);
    expect(viaAgent, what).toMatchObject({ status: 403, type: 'application/problem+json', body: { code } });
    expect({ what, ...viaAgent }).toEqual({ what, ...direct });
  }
  expect((await edgeStats(agent.url)).outcomes_accepted).toBe(before.outcomes_accepted);
  // Sent at the same moment (one batch to the server): the permitted ones arrive.
  const answers = await Promise.all([
    send(agent.url, circuitPath('pay/a', 'outcomes'), { method: 'POST', body: '{"success":false}' }),
    send(agent.url, circuitPath('other/a', 'outcomes'), { method: 'POST', body: '{"success":false}' }),
    send(agent.url, circuitPath('pay/a', 'outcomes'), {
      method: 'POST',
      body: '{"success":false,"caller":"edge/pod-1"}',
    }),
    send(agent.url, circuitPath('pay/a', 'outcomes'), { method: 'POST', body: '{"success":false,"caller":"nobody"}' }),
  ]);
  expect(answers.map((a) => a.status)).toEqual([202, 403, 202, 403]);
  await vi.waitFor(async () => expect(await failures('pay/a')).toBe(2), { timeout: 10_000, interval: 50 });
  expect(await edgeStats(agent.url)).toMatchObject({ outcomes_pending: 0, outcomes_rejected: 0 });
  expect(await failures('other/a')).toBeNull();
});

it('refuses an admission for a caller outside its credential, even on a circuit it decides locally', async () => {
  const target = circuitPath('pay/a', 'allowed');
  for (let i = 0; i < 2; i++) expect((await send(agent.url, target)).status).toBe(200);
  const viaAgent = await send(agent.url, `${target}?caller=nobody`, { requestId: 'edge-cred-admission' });
  const direct = await send(server.url, `${target}?caller=nobody`, { requestId: 'edge-cred-admission', headers: AUTH });
  expect(viaAgent).toMatchObject({ status: 403, body: { code: 'CALLER_NOT_PERMITTED' } });
  expect(viaAgent).toEqual(direct);
  expect((await send(agent.url, `${target}?caller=edge/pod-1`)).status).toBe(200);
});

it('delivers the rest of a batch the server refused for one item (a circuit past max_new_circuits), in parts', async () => {
  // One request, so one batch: the agent cannot know the quota and acknowledges all three.
  const batch = ['quota/one', 'quota/two', 'quota/one'].map((circuit) => ({ circuit, success: false }));
  expect(
    await send(quota.url, '/outcomes', { method: 'POST', body: JSON.stringify({ outcomes: batch }) }),
  ).toMatchObject({
    status: 202,
  });
  await vi.waitFor(async () => expect((await edgeStats(quota.url)).outcomes_pending).toBe(0), {
    timeout: 10_000,
    interval: 50,
  });
  expect(await failures('quota/one')).toBe(2);
  expect(await failures('quota/two')).toBeNull();
  expect(await edgeStats(quota.url)).toMatchObject({ outcomes_acknowledged: 2, outcomes_rejected: 1 });
  expect(quota.logs.find((l) => l.event === 'edge_outcomes_rejected')).toMatchObject({ count: 1, status: 403 });
});
