// Issue 32's "nginx end to end" proof: the real server (dist/main.js, temp SQLite), two real edge
// agents (dist/edge.js, each with its syslog intake) and two real nginx instances (Debian's, each
// with its own agent, configured as docs/gateways.md says: test/nginx/gateway-conf.ts), both in
// front of ONE loopback upstream the test makes fail and heal. Outcomes reach circuitlog only
// through nginx's access log over syslog.

import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEdge, type EdgeProcess } from '../edge/edge-process.js';
import { requestJson } from '../fresh-request.js';
import { gatewayHttp } from '../nginx/gateway-conf.js';
import { startNginx, type Nginx } from '../nginx/nginx.js';
import { until } from '../redis/until.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const CIRCUIT = 'orders-api';
/** The policy: opens on the 5th failure in a row, for 2 s (the API's open time is whole seconds, at least 1). */
const THRESHOLD = 5;
const OPEN_SECONDS = 2;
/** No request may take longer than this (the test client aborts it, and the test fails). */
const REQUEST_TIMEOUT_MS = 5_000;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The protected service: healthy (200 "ok"), or failing (every other request a 500, the rest a reset connection). */
async function startUpstream() {
  let failing = false;
  let hits = 0;
  let failures = 0;
  const server = http.createServer((req, res) => {
    hits++;
    if (!failing) return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    failures++;
    if (failures % 2 === 0)
      req.socket.destroy(); // nginx answers 502, and logs $upstream_status 502
    else res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return {
    port: (server.address() as net.AddressInfo).port,
    hits: () => hits,
    fail: () => (failing = true),
    heal: () => (failing = false),
  };
}

interface Answer {
  readonly via: string;
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One GET through an nginx, on a fresh connection; rejects (failing the test) past REQUEST_TIMEOUT_MS. */
function get(nginx: Nginx, via: string, target = '/orders/42'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${nginx.url}${target}`, { agent: false, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ via, status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${via} in ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
  });
}

describe('nginx end to end (issue 32): two nginx with an edge agent each, one circuitlog, one upstream', () => {
  it('stops both nginx sending to a failing upstream within the threshold, answers 503 with Retry-After while open, and lets traffic back after a half-open probe', async () => {
    const dir = tempDir();
    const server: ServerProcess = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite') }, { detached: true });
    cleanups.push(() => server.killGroup());
    const circuitUrl = `${server.url}/circuits/${CIRCUIT}`;
    const created = await requestJson(circuitUrl, 'PATCH', {
      failure_threshold: THRESHOLD,
      timeout_seconds: OPEN_SECONDS,
    });
    expect(created.status).toBe(201);
    const circuit = async () => (await requestJson(circuitUrl)).json;

    const upstream = await startUpstream();
    const fleet: { name: string; agent: EdgeProcess; nginx: Nginx }[] = [];
    for (const name of ['nginx-a', 'nginx-b']) {
      const agent = await startEdge(server.url, { args: ['--syslog', '127.0.0.1:0'] });
      cleanups.push(() => agent.stop());
      expect(agent.syslogPort).not.toBeNull();
      const nginx = await startNginx({
        http: ({ listen }) =>
          gatewayHttp({
            listen,
            circuit: CIRCUIT,
            caller: name,
            agentPort: agent.port,
            syslogPort: agent.syslogPort!,
            upstreamPort: upstream.port,
          }),
      });
      cleanups.push(() => nginx.stop());
      fleet.push({ name, agent, nginx });
    }
    const answers: Answer[] = [];
    /** Outcomes the server has taken from both agents (every upstream response is one). */
    const acknowledged = async () => {
      let sum = 0;
      for (const { agent } of fleet) sum += (await requestJson(`${agent.url}/edge/stats`)).json.outcomes_acknowledged;
      return sum;
    };
    /** What each process said, and the agents' counters, for a failure's message. */
    const diagnose = async () => {
      const parts: string[] = [];
      for (const { name, agent, nginx } of fleet) {
        const stats = await requestJson(`${agent.url}/edge/stats`).catch((e: Error) => e.message);
        parts.push(
          `${name}: nginx error log:\n${nginx.errorLog()}\nagent output:\n${agent.logs.map((l) => JSON.stringify(l)).join('\n')}\n${agent.stderr()}`,
        );
        parts.push(`${name}: agent stats: ${JSON.stringify(stats)}`);
      }
      parts.push(`circuit: ${JSON.stringify(await circuit().catch((e: Error) => e.message))}`);
      parts.push(`answers: ${JSON.stringify(answers.map((a) => `${a.via} ${a.status}`))}`);
      return parts.join('\n');
    };
    for (const { agent } of fleet)
      await until(async () => (await requestJson(`${agent.url}/health/ready`)).status === 200, 'agent ready', 10_000);

    /** One request through each nginx at once (2 in flight), all answered. */
    const round = async () => {
      const got = await Promise.all(fleet.map(({ name, nginx }) => get(nginx, name)));
      answers.push(...got);
      return got;
    };
    /** What the agent's own view says (closed: decided there, 200; open: the server's 503, relayed). */
    const agentAllows = async (agent: EdgeProcess) =>
      (await requestJson(`${agent.url}/circuits/${CIRCUIT}/allowed`)).status === 200;

    try {
      // Healthy: both nginx pass requests to the upstream.
      for (let i = 0; i < 2; i++) for (const a of await round()) expect([a.status, a.body]).toEqual([200, 'ok']);
      expect(upstream.hits()).toBe(4);
      // Their successes reach the server before anything fails: the two agents' batches are not
      // ordered with each other, and a success counted after a failure resets the failure count.
      await until(
        async () => (await acknowledged()) === upstream.hits(),
        'every outcome acknowledged by the server',
        10_000,
      );

      // Failing. Each round sends one request through each nginx at once and waits until the
      // server has counted every failure the upstream gave so far (the outcomes arrive only through
      // syslog -> agent -> server), then, once the circuit is open, until both agents' views say so.
      upstream.fail();
      const hitsBefore = upstream.hits();
      let opened: { state: string; open_until: string; failure_threshold: number } | null = null;
      for (let i = 0; i < 10 && opened === null; i++) {
        for (const a of await round()) expect([500, 502]).toContain(a.status);
        const failures = upstream.hits() - hitsBefore;
        await until(async () => (await circuit()).failure_count === failures, `${failures} failures counted`, 10_000);
        const now = await circuit();
        if (now.state === 'open') opened = now;
      }
      expect(opened).toMatchObject({ state: 'open', failure_threshold: THRESHOLD });
      // The bound: the circuit opens on the THRESHOLD-th failure the server counts; the only other
      // requests that can reach the failing upstream are those already admitted when it opened, at
      // most the other request of the same round (2 in flight): THRESHOLD..THRESHOLD + 1 hits.
      const failingHits = upstream.hits() - hitsBefore;
      expect(failingHits).toBeGreaterThanOrEqual(THRESHOLD);
      expect(failingHits).toBeLessThanOrEqual(THRESHOLD + fleet.length - 1);
      for (const { agent } of fleet) await until(async () => !(await agentAllows(agent)), 'agent sees open', 10_000);

      // Open: both nginx answer 503 problems with Retry-After themselves; the upstream sees nothing.
      const openUntil = Date.parse(opened!.open_until);
      let openRounds = 0;
      while (openRounds < 3 && Date.now() < openUntil - 500) {
        openRounds++;
        for (const a of await round()) {
          expect(a.status).toBe(503);
          expect(a.headers['content-type']).toBe('application/problem+json');
          expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1);
          expect(Number(a.headers['retry-after'])).toBeLessThanOrEqual(OPEN_SECONDS);
          expect(a.headers['x-circuit-state']).toBe('open');
          expect(JSON.parse(a.body)).toMatchObject({
            status: 503,
            code: 'CIRCUIT_OPEN',
            circuit: CIRCUIT,
            state: 'open',
            open_until: opened!.open_until,
          });
        }
      }
      expect(openRounds).toBeGreaterThan(0); // the open rounds were sent before the open time ran out
      expect(upstream.hits() - hitsBefore).toBe(failingHits);

      // Healthy again. After the open time a request is admitted as the half-open probe (the server
      // decides it: the agents ask it while the circuit is not closed), its success closes the
      // circuit, and both nginx send traffic to the upstream again.
      upstream.heal();
      const answeredBeforeHeal = answers.length;
      await until(async () => (await circuit()).state !== 'open', 'open time over', 10_000);
      let closedAt = -1;
      for (let i = 0; i < 20 && closedAt < 0; i++) {
        const got = await round();
        for (const a of got) {
          expect([200, 503]).toContain(a.status);
          if (a.status === 200) expect(a.body).toBe('ok');
        }
        if (got.every((a) => a.status === 200)) closedAt = i;
        else if (got.some((a) => a.status === 200)) {
          // A probe went through: wait until its outcome closed the circuit and both agents follow.
          await until(async () => (await circuit()).state === 'closed', 'circuit closed', 10_000);
          for (const { agent } of fleet) await until(() => agentAllows(agent), 'agent sees closed', 10_000);
        } else await until(async () => (await circuit()).state !== 'open', 'half-open again', 10_000);
      }
      expect(closedAt).toBeGreaterThanOrEqual(0);
      for (let i = 0; i < 2; i++) for (const a of await round()) expect([a.status, a.body]).toEqual([200, 'ok']);
      // Every request got an answer (none timed out), and every 200 since the heal was the upstream's.
      const healed = answers.slice(answeredBeforeHeal);
      expect(upstream.hits() - hitsBefore - failingHits).toBe(healed.filter((a) => a.status === 200).length);

      // Every upstream response became exactly one outcome on the server; the requests nginx
      // refused itself (no upstream status in their log line) became none.
      await until(async () => (await acknowledged()) === upstream.hits(), 'every outcome acknowledged', 10_000);
      let accepted = 0;
      for (const { agent } of fleet) accepted += (await requestJson(`${agent.url}/edge/stats`)).json.outcomes_accepted;
      expect(accepted).toBe(upstream.hits());

      const events = (await requestJson(`${circuitUrl}/events`)).json.events as {
        from: string;
        to: string;
        reason: string;
      }[];
      expect(events.map((e) => `${e.from}->${e.to}`).reverse()).toEqual([
        'closed->open',
        'open->half_open',
        'half_open->closed',
      ]);
      expect(events.at(-1)!.reason).toBe('failure_threshold_reached');
    } catch (error) {
      console.error(await diagnose());
      throw error;
    }
  });
});
