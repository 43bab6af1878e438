// The documented nginx setup (test/nginx/gateway-conf.ts) in a real nginx, in front of a stand-in
// for the agent that answers the check route as its contract says (204 allowed; 403 with
// Retry-After and X-Circuit-State refused) and a UDP socket in place of its syslog intake: what
// nginx sends to the agent, and what it makes of the agent's answers, independent of the agent.
// The whole chain with the real agent and server: test/e2e/edge-nginx.test.ts.

import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { nginxOutcomes, syslogMessage } from '../../src/edge/nginx-log.js';
import { gatewayHttp } from './gateway-conf.js';
import { startNginx, type Nginx } from './nginx.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

interface Seen {
  /** nginx's side of the connection the check came on. */
  remotePort: number | undefined;
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

async function fixture() {
  const gate = {
    verdict: 'allow' as 'allow' | 'refuse',
    /** The refusal's headers besides Retry-After (the agent's, for an open circuit). */
    refusal: { 'x-circuit-state': 'open', 'x-circuit-open-until': '2026-12-05T03:30:41.123Z' } as Record<
      string,
      string
    >,
    seen: [] as Seen[],
  };
  const agent = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      gate.seen.push({
        remotePort: req.socket.remotePort,
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body,
      });
      if (gate.verdict === 'allow') {
        res.writeHead(204, { 'x-circuit-state': 'closed' }).end();
      } else {
        res
          .writeHead(403, { 'content-type': 'application/problem+json', 'retry-after': '7', ...gate.refusal })
          .end('{"status":503,"code":"CIRCUIT_OPEN"}');
      }
    });
  });
  let upstreamHits = 0;
  const upstream = http.createServer((_req, res) => {
    upstreamHits++;
    res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
  });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  const syslog = dgram.createSocket('udp4');
  syslog.on('message', (msg) => {
    const next = waiting.shift();
    if (next) next(msg.toString());
    else lines.push(msg.toString());
  });
  const nextLine = () =>
    new Promise<string>((resolve) => (lines.length > 0 ? resolve(lines.shift()!) : waiting.push(resolve)));
  await new Promise<void>((resolve) => syslog.bind(0, '127.0.0.1', resolve));
  for (const s of [agent, upstream]) await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s: net.Server) => (s.address() as net.AddressInfo).port;
  const nginx: Nginx = await startNginx({
    http: ({ listen }) =>
      gatewayHttp({
        listen,
        circuit: 'orders',
        caller: 'nginx-a',
        agentPort: port(agent),
        syslogPort: syslog.address().port,
        upstreamPort: port(upstream),
      }),
  });
  closers.push(async () => {
    await nginx.stop();
    syslog.close();
    for (const s of [agent, upstream]) await new Promise((resolve) => s.close(resolve));
  });
  return { gate, nginx, nextLine, upstreamHits: () => upstreamHits };
}

/** The syslog datagram nginx sends: `<PRI>Mmm dd hh:mm:ss tag: message` (RFC 3164, `nohostname`). */
function logLine(datagram: string): Record<string, string> {
  const m = /^<(\d{1,3})>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d circuitlog: (.*)$/s.exec(datagram);
  expect(m, datagram).not.toBeNull();
  return JSON.parse(m![2]!) as Record<string, string>;
}

describe('the documented nginx setup in a real nginx (stand-in agent)', () => {
  it('asks the check route with the original URI and caller, then proxies and logs the upstream status to syslog', async () => {
    const { gate, nginx, nextLine, upstreamHits } = await fixture();
    const response = await fetch(`${nginx.url}/pay?x=1`, { method: 'POST', body: 'card=4242' });
    expect(response.status).toBe(500); // the upstream's own answer, passed through
    expect(await response.text()).toBe('boom');
    expect(upstreamHits()).toBe(1);
    expect(gate.seen).toHaveLength(1);
    // auth_request's subrequest is always a GET, without the body, whatever the original method.
    expect(gate.seen[0]).toMatchObject({ method: 'GET', url: '/gate/orders', body: '' });
    expect(gate.seen[0]!.headers).toMatchObject({ 'x-original-uri': '/pay?x=1', 'x-circuitlog-caller': 'nginx-a' });

    const datagram = await nextLine();
    const line = logLine(datagram);
    expect(line).toMatchObject({ v: 1, circuit: 'orders', caller: 'nginx-a', status: '500', retry_after: '' });
    expect(line.time).toMatch(/^\d+\.\d{3}$/);
    expect(Number(line.msec) * 1000).toBeGreaterThan(Date.now() - 60_000);
    // What the agent's syslog intake makes of it: one failure, for this nginx as the caller.
    expect(nginxOutcomes(syslogMessage(datagram)!.message, Date.now())).toMatchObject({
      kind: 'outcomes',
      items: [{ circuit: 'orders', success: false, caller: 'nginx-a' }],
    });
  });

  it("turns the agent's 403 into a 503 problem with Retry-After, without the upstream, and logs no upstream status", async () => {
    const { gate, nginx, nextLine, upstreamHits } = await fixture();
    gate.verdict = 'refuse';
    const response = await fetch(`${nginx.url}/pay`);
    expect(response.status).toBe(503);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(response.headers.get('retry-after')).toBe('7');
    expect(response.headers.get('x-circuit-state')).toBe('open');
    expect(await response.json()).toEqual({
      type: '/problems/circuit-open',
      title: 'Circuit is open',
      status: 503,
      detail: 'Circuit orders refuses calls; retry after 7 s.',
      code: 'CIRCUIT_OPEN',
      circuit: 'orders',
      state: 'open',
      open_until: '2026-12-05T03:30:41.123Z',
    });
    expect(upstreamHits()).toBe(0);
    const refusedLine = await nextLine();
    expect(logLine(refusedLine)).toMatchObject({ circuit: 'orders', caller: 'nginx-a', status: '', time: '' });
    expect(nginxOutcomes(syslogMessage(refusedLine)!.message, Date.now())).toEqual({
      kind: 'none',
      reason: 'no_upstream',
    });

    // A refusal naming no state or open time (the agent could not decide): null members, still JSON.
    gate.refusal = {};
    const undecided = await fetch(`${nginx.url}/pay`);
    expect(undecided.status).toBe(503);
    expect(await undecided.json()).toMatchObject({ status: 503, state: null, open_until: null });
    expect(upstreamHits()).toBe(0);
  });

  it('keeps its connections to the agent alive between checks', async () => {
    const { gate, nginx } = await fixture();
    for (let i = 0; i < 3; i++) expect((await fetch(`${nginx.url}/pay`)).status).toBe(500);
    const ports = new Set(gate.seen.map((s) => s.remotePort));
    expect(gate.seen).toHaveLength(3);
    expect(ports.size).toBe(1);
  });

  it('is the configuration docs/gateways.md shows (its ports, circuit and caller)', () => {
    const docs = fs.readFileSync('docs/gateways.md', 'utf8');
    const section = docs.slice(docs.indexOf('\n## nginx\n'));
    const shown = /```nginx\n([\s\S]*?)```/.exec(section)![1]!;
    const ours = gatewayHttp({
      listen: '127.0.0.1:8080',
      circuit: 'orders-api',
      caller: 'nginx-a',
      agentPort: 8090,
      syslogPort: 8514,
      upstreamPort: 9000,
    });
    const dedented = ours
      .split('\n')
      .map((line) => line.replace(/^ {4}/, ''))
      .join('\n');
    expect(shown.trim()).toBe(dedented.trim());
  });
});
