// A small service that protects a flaky dependency with @circuitlog/client.
//
//   npm start                                   # circuitlog on http://127.0.0.1:8080
//   npm run build && node --import ./examples/use-repo-client.mjs examples/flaky-service.mjs
//   curl -s localhost:3000/users/42             # {"user":{...},"source":"users-api"} or "cache"
//
// GET /users/:id asks a "users-api" that fails or hangs now and then (here: in the same
// process, on loopback). Each call goes through the circuit `users-api/get`: a slow answer
// times out after 300 ms, a failure or a refusal is answered from the last good copy. Every
// instance of this service shares the circuit through circuitlog, so when one instance trips
// it, the others stop calling users-api too.
//
// Env: CIRCUITLOG_URL (http://127.0.0.1:8080), CIRCUITLOG_TOKEN, PORT (3000; 0 = any),
//      FAILURE_RATE (0.3: share of users-api calls that fail), SLOW_RATE (0.1: share that hang 1 s).

import http from 'node:http';
import { CircuitOpenError, createClient } from '@circuitlog/client';

const failureRate = Number(process.env.FAILURE_RATE ?? 0.3);
const slowRate = Number(process.env.SLOW_RATE ?? 0.1);

/** The flaky dependency: a tiny users API on a loopback port. */
function startUsersApi() {
  const server = http.createServer((req, res) => {
    const roll = Math.random();
    if (roll < failureRate) return res.writeHead(500).end();
    const id = req.url.split('/').pop();
    const answer = () =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id, name: `user ${id}` }));
    if (roll < failureRate + slowRate) setTimeout(answer, 1000);
    else answer();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const usersApi = await startUsersApi();
const usersApiUrl = `http://127.0.0.1:${usersApi.address().port}`;
const breakers = createClient({
  url: process.env.CIRCUITLOG_URL ?? 'http://127.0.0.1:8080',
  token: process.env.CIRCUITLOG_TOKEN,
});
breakers.on('transition', (e) => console.log(JSON.stringify({ event: 'circuit', ...e })));
breakers.on('connection', (e) => console.log(JSON.stringify({ event: 'circuitlog', state: e.state })));

const cache = new Map(); // the last good answer per user: the fallback

async function fetchUser(id, signal) {
  const res = await fetch(`${usersApiUrl}/users/${id}`, { signal });
  if (!res.ok) throw new Error(`users-api answered ${res.status}`);
  return res.json();
}

async function getUser(id) {
  const user = await breakers.call('users-api/get', (signal) => fetchUser(id, signal), {
    timeoutMs: 300,
    fallback: (error) => {
      if (!cache.has(id)) throw error; // nothing to fall back to: let the caller see why
      return { ...cache.get(id), stale: true, why: error instanceof CircuitOpenError ? 'circuit open' : error.message };
    },
  });
  if (!user.stale) cache.set(id, user);
  return user;
}

const server = http.createServer(async (req, res) => {
  const match = /^\/users\/(\d+)$/.exec(req.url ?? '');
  if (!match) return res.writeHead(404).end();
  try {
    const user = await getUser(match[1]);
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ user, source: user.stale ? 'cache' : 'users-api' }));
  } catch (error) {
    const status = error instanceof CircuitOpenError ? 503 : 502;
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: error.message }));
  }
});

server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  console.log(JSON.stringify({ event: 'listening', port: server.address().port }));
});

// Stop taking requests, then hand every recorded outcome to circuitlog before exiting.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    server.close();
    usersApi.close();
    breakers.close().then(
      () => process.exit(0),
      (error) => {
        console.error(error.message);
        process.exit(1);
      },
    );
  });
}
