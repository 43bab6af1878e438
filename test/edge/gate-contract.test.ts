import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { EdgeGateConfig } from '../../src/config/edge-schema.js';
import type { EdgeAnswer, EdgeDecider } from '../../src/edge/edge-types.js';
import { gateAnswer } from '../../src/edge/gate.js';
import { OPEN_UNTIL, allowedAnswer, fakeDecider, gateConfig, refusedAnswer, statusAnswer } from './gate-fakes.js';

// Contract tests of the gateway check route: the requests nginx, Envoy and Traefik send to it,
// byte for byte as their docs (and, for nginx, a real nginx 1.22 from Debian) describe, written on
// a raw socket to a real node:http server that hands them to `gateAnswer`; then the parts of the
// answer each gateway acts on. The agent's own server (src/edge/edge-server.ts) does the same
// mapping as `serveGate` below.

let servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  servers = [];
});

/** A node:http server on loopback answering every request with `gateAnswer`. */
async function serveGate(config: EdgeGateConfig, decider: EdgeDecider): Promise<number> {
  const server = http.createServer((incoming, outgoing) => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(incoming.headers))
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    void gateAnswer({ method: incoming.method ?? 'GET', target: incoming.url ?? '/', headers }, config, decider).then(
      (answer) => {
        const length = answer.status === 204 ? {} : { 'content-length': String(Buffer.byteLength(answer.body)) };
        outgoing.writeHead(answer.status, { ...answer.headers, ...length }).end(answer.body);
      },
      () => outgoing.destroy(), // gateAnswer must never reject: the exchange fails at once with "incomplete answer"
    );
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

interface RawResponse {
  readonly version: string;
  readonly status: number;
  /** Header fields in the order received, names as sent. */
  readonly fields: [string, string][];
  readonly body: string;
  header(name: string): string | undefined;
}

/** Send a request's exact lines on a new connection; read one answer (framed by Content-Length, or none for 204). */
async function exchange(port: number, lines: string[], body = ''): Promise<RawResponse> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`${lines.join('\r\n')}\r\n\r\n${body}`);
  let text = '';
  const done = new Promise<RawResponse>((resolve, reject) => {
    const settle = () => {
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return false;
      const [statusLine, ...rest] = text.slice(0, end).split('\r\n');
      const fields = rest.map((line): [string, string] => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon), line.slice(colon + 1).trim()];
      });
      const header = (name: string) => fields.find(([n]) => n.toLowerCase() === name)?.[1];
      const [version, status] = statusLine!.split(' ');
      const length = Number(header('content-length') ?? 0);
      const bodyText = text.slice(end + 4);
      if (Buffer.byteLength(bodyText) < length) return false;
      resolve({ version: version!, status: Number(status), fields, body: bodyText, header });
      return true;
    };
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (settle()) socket.destroy();
    });
    socket.on('error', reject);
    socket.on('end', () => settle() || reject(new Error(`incomplete answer: ${text}`)));
  });
  return done;
}

/** The decider's answers by circuit: `open*` refused, `bad*` a 400 (a bad caller), `down*` throws, else allowed. */
function serverLikeDecider() {
  return fakeDecider((name, id): EdgeAnswer => {
    if (name.startsWith('open')) return refusedAnswer(name, id);
    if (name.startsWith('bad')) return statusAnswer(400, 'INVALID_QUERY', id);
    if (name.startsWith('down')) throw new Error('connect ECONNREFUSED');
    return allowedAnswer(name, id);
  });
}

// ---------------------------------------------------------------------------------------------
// nginx auth_request (https://nginx.org/en/docs/http/ngx_http_auth_request_module.html): "If the
// subrequest returns a 2xx response code, the access is allowed. If it returns 401 or 403, the
// access is denied with the corresponding error code. Any other response code returned by the
// subrequest is considered an error." The subrequest is a GET (ngx_http_subrequest sets
// NGX_HTTP_GET) sent by proxy_pass as HTTP/1.0 with `Connection: close`: first the
// proxy_set_header fields, then Host ($proxy_host), then the client's own fields but the body's
// (proxy_pass_request_body off; Content-Length ""). The lines below are what Debian's nginx
// 1.22.1 sent with the docs/gateways.md snippet for `curl -X POST -d x=1 .../payments/charge?id=7`.
// ---------------------------------------------------------------------------------------------

function nginxSubrequest(port: number, circuit: string, originalUri: string, extra: string[] = []): string[] {
  return [
    `GET /gate/${circuit} HTTP/1.0`,
    `X-Original-URI: ${originalUri}`,
    'X-Circuitlog-Caller: checkout',
    `Host: 127.0.0.1:${port}`,
    'Connection: close',
    'Accept: */*',
    'X-Request-Id: abc123',
    'User-Agent: test/1',
    'Content-Type: application/x-www-form-urlencoded',
    ...extra,
  ];
}

describe('nginx auth_request', () => {
  it('allows with a 2xx (204, no body) carrying X-Circuit-State, for auth_request_set', async () => {
    const decider = serverLikeDecider();
    const port = await serveGate(gateConfig(), decider);
    const answer = await exchange(port, nginxSubrequest(port, 'payments', '/payments/charge?id=7'));
    expect(answer.status).toBe(204);
    expect(answer.body).toBe('');
    expect(answer.header('x-circuit-state')).toBe('closed');
    expect(answer.header('x-request-id')).toBe('abc123');
    expect(decider.calls).toEqual([{ name: 'payments', caller: 'checkout', requestId: 'abc123' }]);
  });

  it('refuses with 403 carrying Retry-After, X-Circuit-State and X-Circuit-Open-Until (the @circuit_open page reads them)', async () => {
    const port = await serveGate(gateConfig(), serverLikeDecider());
    const answer = await exchange(port, nginxSubrequest(port, 'open-one', '/open/charge?id=8'));
    expect(answer.status).toBe(403);
    expect(answer.header('retry-after')).toBe('7');
    expect(answer.header('x-circuit-state')).toBe('open');
    expect(answer.header('x-circuit-open-until')).toBe(OPEN_UNTIL);
  });

  it('refuses with 403 and Retry-After: 1 when the agent cannot decide', async () => {
    const port = await serveGate(gateConfig(), serverLikeDecider());
    const answer = await exchange(port, nginxSubrequest(port, 'down-one', '/down/x'));
    expect(answer.status).toBe(403);
    expect(answer.header('retry-after')).toBe('1');
  });

  it('answers a bad caller 400, which nginx turns into a 500 (neither 2xx nor 401/403)', async () => {
    const port = await serveGate(gateConfig(), serverLikeDecider());
    const answer = await exchange(port, nginxSubrequest(port, 'bad-caller', '/bad/x'));
    expect(answer.status).toBe(400);
  });

  it('names the circuit from X-Original-URI by path prefix (proxy_pass .../gate)', async () => {
    const decider = serverLikeDecider();
    const config = gateConfig({ circuit_from: { path_prefix: { '/payments/': 'payments', '/open/': 'open-one' } } });
    const port = await serveGate(config, decider);
    const lines = nginxSubrequest(port, '', '/open/charge?id=8');
    lines[0] = 'GET /gate HTTP/1.0';
    const answer = await exchange(port, lines);
    expect(answer.status).toBe(403);
    expect(decider.calls.map((c) => c.name)).toEqual(['open-one']);
  });
});

// ---------------------------------------------------------------------------------------------
// Envoy ext_authz, HTTP service (https://www.envoyproxy.io/docs/envoy/latest/api-v3/extensions/
// filters/http/ext_authz/v3/ext_authz.proto; https://www.envoyproxy.io/docs/envoy/latest/
// configuration/http/http_filters/ext_authz_filter): the check request keeps the client's method
// and its path with `path_prefix` in front; it carries `Host`, `Method`, `Path`, `Content-Length`
// (0, no body) and `Authorization`, plus the headers `allowed_headers` names and `headers_to_add`.
// "On authorization response status HTTP 200 OK, the filter will allow traffic"; any other status
// denies, its status, headers (all but Host unless `allowed_client_headers` narrows them) and body
// going to the client; except a 5xx, which the HTTP client takes for the authorization server
// failing (source/extensions/filters/common/ext_authz/ext_authz_http_impl.cc): a bare 403 to the
// client, or the request let through with `failure_mode_allow: true`.
// ---------------------------------------------------------------------------------------------

function envoyCheck(port: number, method: string, originalPath: string, extra: string[] = []): string[] {
  void port; // Envoy sends the client's Host (:authority), not the authorization server's
  return [
    `${method} /gate${originalPath} HTTP/1.1`,
    'host: shop.example.com:8443',
    'content-length: 0',
    'authorization: Bearer client-token',
    'x-request-id: 0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0',
    'x-circuitlog-caller: checkout',
    ...extra,
  ];
}

describe('Envoy ext_authz (HTTP service, path_prefix: /gate)', () => {
  const byPrefix = gateConfig({ circuit_from: { path_prefix: { '/payments/': 'payments', '/open/': 'open-one' } } });

  it('allows with exactly 200 (Envoy allows on nothing else), for any original method', async () => {
    const decider = serverLikeDecider();
    const port = await serveGate(byPrefix, decider);
    for (const method of ['POST', 'DELETE', 'GET']) {
      const answer = await exchange(port, envoyCheck(port, method, '/payments/charge?id=7'));
      expect(answer.status, method).toBe(200);
      expect(answer.header('x-circuit-state')).toBe('closed');
    }
    expect(decider.calls.map((c) => [c.name, c.caller, c.requestId])).toEqual(
      Array(3).fill(['payments', 'checkout', '0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0']),
    );
  });

  it('refuses with a 4xx (not a 5xx, which Envoy takes for a failure) carrying Retry-After and the problem for the client', async () => {
    const port = await serveGate(byPrefix, serverLikeDecider());
    const answer = await exchange(port, envoyCheck(port, 'POST', '/open/charge'));
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.status).toBeLessThan(500);
    expect(answer.status).toBe(429);
    expect(answer.header('retry-after')).toBe('7');
    expect(answer.header('content-type')).toBe('application/problem+json');
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'CIRCUIT_OPEN', status: 429, circuit: 'open-one' });
  });

  it("answers 503 when the agent cannot decide, so Envoy's failure_mode_allow decides", async () => {
    const port = await serveGate(gateConfig({ circuit_from: { header: 'x-circuitlog-circuit' } }), serverLikeDecider());
    const answer = await exchange(port, envoyCheck(port, 'GET', '/any', ['x-circuitlog-circuit: down-one']));
    expect(answer.status).toBe(503);
    expect(answer.header('retry-after')).toBe('1');
  });

  it('names the circuit from a header headers_to_add sets, or from the Host', async () => {
    const decider = serverLikeDecider();
    const byHeader = await serveGate(gateConfig({ circuit_from: { header: 'x-circuitlog-circuit' } }), decider);
    await exchange(byHeader, envoyCheck(byHeader, 'PUT', '/x', ['x-circuitlog-circuit: payments']));
    const byHost = await serveGate(gateConfig({ circuit_from: 'host' }), decider);
    await exchange(byHost, envoyCheck(byHost, 'GET', '/x'));
    expect(decider.calls.map((c) => c.name)).toEqual(['payments', 'shop.example.com']);
  });
});

// ---------------------------------------------------------------------------------------------
// Traefik ForwardAuth (https://doc.traefik.io/traefik/middlewares/http/forwardauth/): "If the
// service answers with a 2XX code, access is granted, and the original request is performed.
// Otherwise, the response from the authentication server is returned." The check is a GET to
// `address` (pkg/middlewares/auth/forward.go: http.NewRequest(http.MethodGet, ...); v3.4 adds
// `preserveRequestMethod`) with the client's headers (all of them, or only `authRequestHeaders`)
// in Go's canonical casing, a repeated field sent as several lines, and X-Forwarded-Method,
// -Proto, -Host, -Uri and -For describing the original request.
// ---------------------------------------------------------------------------------------------

function traefikCheck(port: number, address: string, originalUri: string, extra: string[] = []): string[] {
  return [
    `GET ${address} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    'User-Agent: curl/8.5.0',
    'Accept: */*',
    'Authorization: Bearer client-token',
    'X-Circuitlog-Caller: checkout',
    'X-Request-Id: traefik-1',
    'X-Forwarded-For: 203.0.113.7',
    'X-Forwarded-Host: shop.example.com',
    'X-Forwarded-Method: POST',
    'X-Forwarded-Proto: https',
    `X-Forwarded-Uri: ${originalUri}`,
    ...extra,
    'Accept-Encoding: gzip',
  ];
}

describe('Traefik ForwardAuth', () => {
  it('allows with a 2xx (address: .../gate/<circuit>)', async () => {
    const decider = serverLikeDecider();
    const port = await serveGate(gateConfig(), decider);
    const answer = await exchange(port, traefikCheck(port, '/gate/payments', '/payments/charge?id=7'));
    expect(answer.status).toBe(200);
    expect(answer.header('x-circuit-state')).toBe('closed');
    expect(decider.calls).toEqual([{ name: 'payments', caller: 'checkout', requestId: 'traefik-1' }]);
  });

  it('refuses with the 503 problem and Retry-After, which Traefik returns to the client as is', async () => {
    const port = await serveGate(gateConfig(), serverLikeDecider());
    const answer = await exchange(port, traefikCheck(port, '/gate/open-one', '/open/charge'));
    expect(answer.status).toBe(503);
    expect(answer.header('retry-after')).toBe('7');
    expect(answer.header('content-type')).toBe('application/problem+json');
    expect(answer.header('x-request-id')).toBe('traefik-1');
    expect(JSON.parse(answer.body)).toMatchObject({ status: 503, code: 'CIRCUIT_OPEN', circuit: 'open-one' });
  });

  it('names the circuit from X-Forwarded-Uri by prefix, or X-Forwarded-Host (address: .../gate)', async () => {
    const decider = serverLikeDecider();
    const byPrefix = await serveGate(gateConfig({ circuit_from: { path_prefix: { '/open/': 'open-one' } } }), decider);
    expect((await exchange(byPrefix, traefikCheck(byPrefix, '/gate', '/open/charge?x=/payments/'))).status).toBe(503);
    const byHost = await serveGate(gateConfig({ circuit_from: 'host' }), decider);
    expect((await exchange(byHost, traefikCheck(byHost, '/gate', '/x'))).status).toBe(200);
    expect(decider.calls.map((c) => c.name)).toEqual(['open-one', 'shop.example.com']);
  });

  it("hands a repeated caller field on as one joined value: the server's 400 reaches the client", async () => {
    const decider = serverLikeDecider();
    const port = await serveGate(gateConfig(), decider);
    const answer = await exchange(port, traefikCheck(port, '/gate/bad-caller', '/x', ['X-Circuitlog-Caller: second']));
    expect(decider.calls[0]!.caller).toBe('checkout, second');
    expect(answer.status).toBe(400);
  });
});
