// The edge agent (issue 32) against real processes: the server (`dist/main.js`) on a temp
// database, two agents (`dist/edge.js`) on loopback. Agent A reaches the server through a
// counting relay (test/edge/relay-proxy.ts), so what it asks of the server is counted; agent
// B reaches it directly. The outage proof is in edge-outage.test.ts.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  circuitOn,
  circuitPath,
  edgeStats,
  patchPolicy,
  postJson,
  send,
  serveWith,
  stat,
  waitReady,
  type Answer,
  type Send,
} from '../edge/edge-http.js';
import { startEdge, type EdgeProcess } from '../edge/edge-process.js';
import { startRelay, type RelayProxy } from '../edge/relay-proxy.js';
import type { ServerProcess } from '../server-process.js';

let server: ServerProcess;
let relay: RelayProxy;
let a: EdgeProcess;
let b: EdgeProcess;

beforeAll(async () => {
  ({ server } = await serveWith('circuit_defaults:\n  failure_threshold: 3\n  timeout_seconds: 60\n'));
  relay = await startRelay(server.url);
  [a, b] = await Promise.all([startEdge(relay.url), startEdge(server.url)]);
  await Promise.all([waitReady(a.url, 200), waitReady(b.url, 200)]);
});

afterAll(async () => {
  await Promise.allSettled([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
  await relay?.close();
  await server?.stop('SIGKILL');
});

/** The same request to the agent and to the server, with one request id: [agent's answer, server's]. */
async function both(agent: EdgeProcess, target: string, id: string, init: Omit<Send, 'requestId'> = {}) {
  const viaAgent = await send(agent.url, target, { ...init, requestId: id });
  const direct = await send(server.url, target, { ...init, requestId: id });
  return [viaAgent, direct] as const;
}

/** The agent relayed the server's answer: same status, media type, request id and body. */
function expectSame(viaAgent: Answer, direct: Answer): void {
  expect({ status: viaAgent.status, type: viaAgent.type, requestId: viaAgent.requestId }).toEqual({
    status: direct.status,
    type: direct.type,
    requestId: direct.requestId,
  });
  expect(viaAgent.body).toEqual(direct.body);
}

const keys = (value: unknown) => Object.keys(value as object).sort();

const FAR_AHEAD = '2099-01-01T00:00:00Z';

/** The answer with the clock reading left out of its errors' messages ("ahead of the server's clock (…)"). */
function withoutClock(answer: Answer): Answer {
  const body = answer.body as { errors?: { field: string; message: string }[] };
  if (!Array.isArray(body?.errors)) return answer;
  const errors = body.errors.map((e) => ({ ...e, message: e.message.replace(/\(\d{4}-[^)]*\)/, '(…)') }));
  return { ...answer, body: { ...body, errors } };
}

describe('edge agent: answers are the server’s own', () => {
  it('answers /allowed on a closed circuit with the server’s members, the first time and once decided locally', async () => {
    await postJson(server.url, circuitPath('answers/closed', 'outcomes'), { success: true });
    const target = circuitPath('answers/closed', 'allowed');
    const direct = await send(server.url, target);
    expect(direct).toMatchObject({ status: 200, type: 'application/json' });
    for (let i = 0; i < 3; i++) {
      const viaAgent = await send(a.url, target);
      expect(viaAgent).toMatchObject({ status: 200, type: 'application/json' });
      expect(keys(viaAgent.body)).toEqual(keys(direct.body));
      const body = viaAgent.body as { allowed: boolean; state: string; circuit: Record<string, unknown> };
      expect(body).toMatchObject({ allowed: true, state: 'closed', circuit: { name: 'answers/closed' } });
      expect(keys(body.circuit)).toEqual(keys((direct.body as { circuit: unknown }).circuit));
    }
    // A circuit never recorded: the server's `circuit: null`, and nothing created.
    const [unknown, unknownDirect] = await both(a, circuitPath('answers/never', 'allowed'), 'edge-never-1');
    expect(unknown.status).toBe(200);
    expect(unknown.body).toEqual(unknownDirect.body);
    expect(await circuitOn(server.url, 'answers/never')).toBeNull();
  });

  it('relays the server’s 503 for a circuit opened by outcomes, with Retry-After and open_until', async () => {
    for (let i = 0; i < 3; i++) await postJson(server.url, circuitPath('answers/open', 'outcomes'), { success: false });
    expect(await circuitOn(server.url, 'answers/open')).toMatchObject({ state: 'open' });
    for (const id of ['edge-open-1', 'edge-open-2']) {
      const [viaAgent, direct] = await both(a, circuitPath('answers/open', 'allowed'), id);
      expect(viaAgent).toMatchObject({ status: 503, type: 'application/problem+json', requestId: id });
      expect(viaAgent.body).toMatchObject({ code: 'CIRCUIT_OPEN', state: 'open', open_until: expect.any(String) });
      expectSame(viaAgent, direct);
      expect(Number(viaAgent.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Math.abs(Number(viaAgent.retryAfter) - Number(direct.retryAfter))).toBeLessThanOrEqual(1);
    }
  });

  it('passes ?caller= to the server: an isolated caller is refused as the server refuses it, the others allowed', async () => {
    const name = 'answers/quorum';
    await patchPolicy(server.url, name, { quorum: { min_callers: 2 }, failure_threshold: 3, timeout_seconds: 60 });
    const ask = (caller: string) => send(a.url, `${circuitPath(name, 'allowed')}?caller=${caller}`);
    expect((await ask('good')).status).toBe(200);
    expect((await ask('bad')).status).toBe(200); // the agent has the closed circuit now
    for (let i = 0; i < 3; i++)
      await postJson(server.url, circuitPath(name, 'outcomes'), { success: false, caller: 'bad' });
    const direct = await send(server.url, `${circuitPath(name, 'allowed')}?caller=bad`);
    expect(direct.body).toMatchObject({ status: 503, scope: 'caller', caller: 'bad' });
    // The circuit stays closed for everyone (the trip was withheld); only `bad` is refused.
    await vi.waitFor(async () => expect((await ask('bad')).status).toBe(503), { timeout: 10_000, interval: 50 });
    const refused = await ask('bad');
    expect(refused.body).toMatchObject({ code: 'CIRCUIT_OPEN', scope: 'caller', caller: 'bad' });
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(await ask('good')).toMatchObject({ status: 200, body: { allowed: true, state: 'closed' } });
    const [badCaller, badCallerDirect] = await both(
      a,
      `${circuitPath(name, 'allowed')}?caller=no%20spaces`,
      'edge-caller-1',
    );
    expect(badCaller.status).toBe(400);
    expectSame(badCaller, badCallerDirect);
  });

  it('answers a name that breaks the rules with the server’s 400 problem', async () => {
    for (const [i, target] of [
      circuitPath('bad name', 'allowed'),
      circuitPath('x'.repeat(201), 'allowed'),
      '/circuits/a%2F%2Fb/allowed',
    ].entries()) {
      const [viaAgent, direct] = await both(a, target, `edge-name-${i}`);
      expect(viaAgent).toMatchObject({ status: 400, type: 'application/problem+json', body: { code: 'INVALID_NAME' } });
      expectSame(viaAgent, direct);
    }
  });

  it('relays every other route as is: same status and body as the server', async () => {
    const cases: [string, { method?: string; body?: string }][] = [
      ['/circuits?limit=500', {}],
      [`/circuits/${encodeURIComponent('answers/open')}`, {}],
      [`/circuits/${encodeURIComponent('answers/open')}/events`, {}],
      ['/circuits/x/policy', { method: 'PUT', body: '{}' }],
      ['/no/such/route', {}],
    ];
    for (const [i, [target, init]] of cases.entries()) {
      const [viaAgent, direct] = await both(a, target, `edge-relay-${i}`, init);
      expectSame(viaAgent, direct);
    }
  });
});

describe('edge agent: /call', () => {
  it('answers /call like the server: 200 {result, circuit} with the server’s members, also for a circuit the server does not know yet', async () => {
    const direct = await postJson(server.url, circuitPath('call/direct', 'call'), { success: true });
    expect(direct).toMatchObject({ status: 200, body: { result: 'success', circuit: { name: 'call/direct' } } });
    const circuitKeys = keys((direct.body as { circuit: unknown }).circuit);
    await postJson(server.url, circuitPath('call/known', 'outcomes'), { success: true });
    for (const name of ['call/known', 'call/new']) {
      // The agent has the circuit's snapshot (call/new: the server's `circuit: null`) and decides /call itself.
      for (let i = 0; i < 2; i++) expect((await send(a.url, circuitPath(name, 'allowed'))).status).toBe(200);
      const viaAgent = await postJson(a.url, circuitPath(name, 'call'), { success: false });
      expect(viaAgent, name).toMatchObject({ status: 200, type: 'application/json', body: { result: 'failure' } });
      const body = viaAgent.body as { circuit: Record<string, unknown> | null };
      expect(body.circuit, name).toMatchObject({ name });
      expect(keys(body.circuit)).toEqual(circuitKeys);
      await vi.waitFor(async () => expect(await circuitOn(server.url, name)).toMatchObject({ failure_count: 1 }), {
        timeout: 10_000,
        interval: 50,
      });
    }
  });
});

describe('edge agent: closed circuits decided locally', () => {
  it('answers 200 more /allowed on a closed circuit without asking the server', async () => {
    const name = 'local/closed';
    await postJson(server.url, circuitPath(name, 'outcomes'), { success: true });
    const target = circuitPath(name, 'allowed');
    const before = await edgeStats(a.url);
    expect((await send(a.url, target)).status).toBe(200);
    const asked = relay.count('GET', target);
    expect(asked).toBe(1);
    for (let i = 0; i < 200; i++) {
      const answer = await send(a.url, target);
      expect(answer).toMatchObject({ status: 200, body: { allowed: true, state: 'closed' } });
    }
    expect(relay.count('GET', target)).toBe(asked); // the server was not asked again
    const after = await edgeStats(a.url);
    expect((after.local_decisions as number) - (before.local_decisions as number)).toBe(200);
    expect((after.server_checks as number) - (before.server_checks as number)).toBe(1);
  });
});

describe('edge agent: many agents, one truth', () => {
  it('counts each of 600 outcomes posted through 2 agents exactly once, single and batch routes', async () => {
    const name = 'many/counted';
    await patchPolicy(server.url, name, { failure_threshold: 1_000_000_000 });
    const before = await Promise.all([a, b].map((agent) => edgeStats(agent.url)));
    const through = async (agent: EdgeProcess) => {
      const singles = Array.from({ length: 150 }, () =>
        postJson(agent.url, circuitPath(name, 'outcomes'), { success: false }),
      );
      const batches = Array.from({ length: 3 }, () =>
        postJson(agent.url, '/outcomes', {
          outcomes: Array.from({ length: 50 }, () => ({ circuit: name, success: false })),
        }),
      );
      const answers = await Promise.all([...singles, ...batches]);
      return answers.map((x) => `${x.status} ${JSON.stringify(x.body)}`);
    };
    const [viaA, viaB] = await Promise.all([through(a), through(b)]);
    const expected = [...Array(150).fill('202 {"accepted":1}'), ...Array(3).fill('202 {"accepted":50}')];
    expect(viaA).toEqual(expected);
    expect(viaB).toEqual(expected);
    await vi.waitFor(
      async () => {
        const now = await Promise.all([a, b].map((agent) => edgeStats(agent.url)));
        expect(
          now.map((s, i) => (s.outcomes_acknowledged as number) - (before[i]!.outcomes_acknowledged as number)),
        ).toEqual([300, 300]);
        expect(now.map((s) => s.outcomes_pending)).toEqual([0, 0]);
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(await circuitOn(server.url, name)).toMatchObject({ state: 'closed', failure_count: 600 });
  });

  it('counts a batch once when the server took it but its answer was lost and the agent sent it again', async () => {
    const name = 'many/lost-answer';
    await patchPolicy(server.url, name, { failure_threshold: 1_000_000_000 });
    const sent = relay.count('POST', '/outcomes');
    relay.loseAnswers('/outcomes', 2); // agent A's next 2 batches: committed, answers lost
    for (let i = 0; i < 20; i++) {
      expect(await postJson(a.url, circuitPath(name, 'outcomes'), { success: false })).toMatchObject({ status: 202 });
    }
    await vi.waitFor(async () => expect(await stat(a.url, 'outcomes_pending')).toBe(0), {
      timeout: 15_000,
      interval: 50,
    });
    expect(relay.count('POST', '/outcomes') - sent).toBeGreaterThanOrEqual(3); // 2 lost, then sent again
    expect(await circuitOn(server.url, name)).toMatchObject({ failure_count: 20 });
  });

  it('refuses on agent B a circuit tripped through agent A, once the stream has carried it', async () => {
    const name = 'many/trip';
    await patchPolicy(server.url, name, { failure_threshold: 3, timeout_seconds: 60 });
    const target = circuitPath(name, 'allowed');
    for (let i = 0; i < 3; i++) expect((await send(b.url, target)).status).toBe(200); // B decides it locally
    for (let i = 0; i < 3; i++) {
      expect(await postJson(a.url, circuitPath(name, 'outcomes'), { success: false })).toMatchObject({ status: 202 });
    }
    await vi.waitFor(async () => expect((await send(b.url, target)).status).toBe(503), {
      timeout: 10_000,
      interval: 25,
    });
    const [viaB, direct] = await both(b, target, 'edge-trip-1');
    expect(viaB).toMatchObject({ status: 503, type: 'application/problem+json', body: { code: 'CIRCUIT_OPEN' } });
    expectSame(viaB, direct);
    expect(Number(viaB.retryAfter)).toBeGreaterThanOrEqual(1);
  });
});

describe('edge agent: bad input', () => {
  it('answers malformed, oversized and invalid outcomes with the server’s own problem, queues nothing and creates nothing', async () => {
    const good = (circuit: string) => ({ circuit, success: false });
    const cases: [string, string, string, number][] = [
      ['malformed single', circuitPath('bad-in/a', 'outcomes'), '{"success": fal', 400],
      ['malformed batch', '/outcomes', '{"outcomes": [', 400],
      ['oversized single', circuitPath('bad-in/b', 'outcomes'), `{"success":false}${' '.repeat(20 * 1024)}`, 413],
      [
        'oversized batch',
        '/outcomes',
        `{"outcomes":[${JSON.stringify(good('bad-in/c'))}]}${' '.repeat(1_100_000)}`,
        413,
      ],
      ['bad name', circuitPath('bad in', 'outcomes'), '{"success":false}', 400],
      ['bad name in a batch', '/outcomes', JSON.stringify({ outcomes: [good('bad-in/d'), good('bad in')] }), 422],
      [
        'bad item in a batch',
        '/outcomes',
        JSON.stringify({ outcomes: [good('bad-in/e'), { circuit: 'bad-in/f', success: 'yes' }] }),
        422,
      ],
      ['unknown field', circuitPath('bad-in/g', 'outcomes'), '{"success":false,"sucess":true}', 422],
      ['at far ahead', circuitPath('bad-in/h', 'outcomes'), JSON.stringify({ success: false, at: FAR_AHEAD }), 422],
      [
        'at far ahead in a batch',
        '/outcomes',
        JSON.stringify({ outcomes: [good('bad-in/i'), { ...good('bad-in/j'), at: FAR_AHEAD }] }),
        422,
      ],
    ];
    // The same with other headers: a Content-Type that is not JSON (415, even with no body),
    // a browser's cross-site request (403): what a page on another site can send without a preflight.
    const plain = { 'content-type': 'text/plain' };
    const headed: [string, string, string, Record<string, string>, number][] = [
      ['text/plain outcome', circuitPath('bad-in/l', 'outcomes'), '{"success":false}', plain, 415],
      ['text/plain batch', '/outcomes', JSON.stringify({ outcomes: [good('bad-in/l')] }), plain, 415],
      ['text/plain empty call', circuitPath('bad-in/csrf', 'call'), '', plain, 415],
      ['text/plain empty outcome', circuitPath('bad-in/csrf', 'outcomes'), '', plain, 415],
      [
        'cross-site call',
        circuitPath('bad-in/csrf', 'call'),
        '{"success":true}',
        { 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' },
        403,
      ],
      [
        'cross-site outcome',
        circuitPath('bad-in/csrf', 'outcomes'),
        '{"success":true}',
        { 'content-type': 'application/json', origin: 'http://evil.example' },
        403,
      ],
    ];
    // bad-in/csrf is a closed circuit the agent knows: its /call would be decided (and recorded) here.
    await postJson(server.url, circuitPath('bad-in/csrf', 'outcomes'), { success: false });
    for (let i = 0; i < 2; i++) expect((await send(a.url, circuitPath('bad-in/csrf', 'allowed'))).status).toBe(200);
    const before = await edgeStats(a.url);
    for (const [what, target, body, headers, status] of headed) {
      const [viaAgent, direct] = await both(a, target, `edge-bad-${what.replaceAll(/[ /]/g, '-')}`, {
        method: 'POST',
        body,
        type: null,
        headers,
      });
      expect(viaAgent.status, what).toBe(status);
      expect({ what, ...viaAgent }).toEqual({ what, ...direct });
    }
    for (const [what, target, body, status] of cases) {
      const [viaAgent, direct] = await both(a, target, `edge-bad-${what.replaceAll(' ', '-')}`, {
        method: 'POST',
        body,
      });
      expect(viaAgent.status, what).toBe(status);
      expect(viaAgent.type, what).toBe('application/problem+json');
      expect({ what, ...withoutClock(viaAgent) }).toEqual({ what, ...withoutClock(direct) });
    }
    const after = await edgeStats(a.url);
    for (const member of ['outcomes_accepted', 'outcomes_pending', 'outcomes_dropped']) {
      expect(after[member], member).toEqual(before[member]);
    }
    // An outcome with a bad `at` sent beside another client's good one (one batch to the server,
    // within flush_ms): refused alone, it cannot make the server refuse the other's.
    const [victim, late] = await Promise.all([
      postJson(a.url, circuitPath('bad-in/victim', 'outcomes'), { success: false }),
      postJson(a.url, circuitPath('bad-in/k', 'outcomes'), { success: false, at: FAR_AHEAD }),
    ]);
    expect([victim.status, late.status]).toEqual([202, 422]);
    // A good outcome after them arrives; anything queued before it would have arrived too.
    expect(await postJson(a.url, circuitPath('bad-in/sentinel', 'outcomes'), { success: false })).toMatchObject({
      status: 202,
    });
    await vi.waitFor(
      async () => expect(await circuitOn(server.url, 'bad-in/sentinel')).toMatchObject({ failure_count: 1 }),
      {
        timeout: 10_000,
        interval: 50,
      },
    );
    for (const name of ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l'].map((x) => `bad-in/${x}`)) {
      expect(await circuitOn(server.url, name), name).toBeNull();
    }
    expect(await circuitOn(server.url, 'bad-in/csrf')).toMatchObject({ failure_count: 1 }); // no success recorded
    expect(await circuitOn(server.url, 'bad-in/victim')).toMatchObject({ failure_count: 1 });
    expect(await stat(a.url, 'outcomes_accepted')).toBe((before.outcomes_accepted as number) + 2);
  });
});
