// The `redis-tls` section of `npm run bench` (issue 19): the cost of TLS to Redis, in the same run.
//
//   GET /allowed (closed): rediss:// vs redis://    goal ≥ 0.9x (answered from the host's copy: no round trip)
//   failure outcomes:      rediss:// vs redis://    (report: every write is a script over the TLS connection)
//
// Each scenario runs plain, TLS, plain again (A-B-A), and TLS is compared with the mean of the two
// plain runs around it: on this shared machine a later target of a run often gets less than an
// earlier one (the same target measured again moved by 10 to 30 % while this was written).
//
// Two redis-servers of the bench's own on loopback (random ports, temp dirs, no persistence): one
// plain-text, one TLS only with client certificates required (mutual TLS), with a throwaway CA
// made here with openssl (as test/redis/tls.ts does for the tests). Bounded durations.

import { execFile, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { missingPrograms, startProcess } from './lib.mjs';

const exec = promisify(execFile);
const JSON_HEADERS = { 'content-type': 'application/json' };
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** `ctx`: helpers of run.mjs (as for the redis-modes section). */
export async function redisTlsSection(ctx) {
  const durationSec = ctx.durationFor('redis-tls');
  const skipped = missingPrograms(['redis-server', 'redis-cli', 'openssl'], {
    id: 'redis-tls',
    title: 'Redis over TLS',
    durationSec,
  });
  if (skipped) return skipped;
  const tmp = ctx.tempDir('circuitlog-bench-tls-');
  const procs = [];
  const servers = [];
  try {
    const files = await makeCertificates(tmp);
    const plain = await redisServer(tmp, null);
    servers.push(plain);
    const secure = await redisServer(tmp, files);
    servers.push(secure);
    const start = async (name, store) => {
      const p = await startProcess({
        name,
        args: [ctx.dist],
        cwd: ctx.repoRoot,
        port: 'auto',
        readyPath: '/health',
        timeoutMs: 30_000,
        env: {
          HOST: '127.0.0.1',
          CIRCUITLOG_LOG_LEVEL: 'warn',
          CIRCUITLOG_CONFIG: '',
          CIRCUITLOG_TOKEN: '',
          CIRCUITLOG_STORE: store,
        },
      });
      procs.push(p);
      return p;
    };
    const tlsQuery = `tls_ca=${files.ca}&tls_cert=${files.clientCert}&tls_key=${files.clientKey}`;
    const hPlain = await start('circuitlog-redis', `redis://127.0.0.1:${plain.port}/0`);
    const hTls = await start('circuitlog-rediss', `rediss://127.0.0.1:${secure.port}/0?${tlsQuery}`);
    for (const h of [hPlain, hTls]) await ctx.setupBenchCircuits(h.url);
    const allowed = (id, label, h, goal = null) => ({
      id,
      label,
      url: `${h.url}/circuits/bench-ok/allowed`,
      goal,
      pid: h.pid,
    });
    const fail = (id, label, h) => ({
      id,
      label,
      url: `${h.url}/circuits/bench-fail/outcomes`,
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":false}',
      goal: null,
      pid: h.pid,
    });
    const scenarios = [
      {
        id: 'tls-allowed',
        title: 'redis-tls: GET /allowed (closed) over rediss:// vs redis://',
        baseline: 'plain-allowed',
        targets: [
          allowed('plain-allowed', 'redis://: GET /circuits/bench-ok/allowed', hPlain),
          allowed('tls-allowed', 'rediss:// (mutual TLS): the same', hTls),
          allowed('plain-allowed-2', 'redis:// again', hPlain),
        ],
      },
      {
        id: 'tls-fail',
        title: 'redis-tls: failure outcomes over rediss:// vs redis://',
        baseline: 'plain-fail',
        targets: [
          fail('plain-fail', 'redis://: POST /circuits/bench-fail/outcomes {"success":false}', hPlain),
          fail('tls-fail', 'rediss:// (mutual TLS): the same', hTls),
          fail('plain-fail-2', 'redis:// again', hPlain),
        ],
      },
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));
    const [allowedAba, failAba] = results.map(aba);
    return {
      id: 'redis-tls',
      title: 'Redis over TLS: rediss:// vs redis://',
      durationSec,
      results,
      notes: [
        `GET /allowed over TLS: ${allowedAba.text}. Failure outcomes over TLS: ${failAba.text}.`,
        `redis-server ${
          spawnSync('redis-server', ['--version'])
            .stdout.toString()
            .match(/v=(\S+)/)?.[1] ?? '?'
        } without persistence, one plain-text and one TLS only (tls-auth-clients yes, P-256 certificates of a CA made by the bench); ${
          spawnSync('openssl', ['version']).stdout.toString().trim() || 'openssl'
        } on the redis-server side, Node's OpenSSL on circuitlog's.`,
      ],
      checks: [
        {
          what: 'GET /allowed (closed) over rediss:// ≥ 0.9x the mean of the redis:// runs around it',
          ok: allowedAba.ratio >= 0.9 && allowedAba.errors === 0,
          detail: `${allowedAba.ratio.toFixed(2)}x`,
        },
        { what: 'no errors', ok: allowedAba.errors === 0 && failAba.errors === 0, detail: `${failAba.errors}` },
      ],
    };
  } finally {
    await ctx.stopEach(procs);
    for (const s of servers) s.stop();
    ctx.removeTemp(tmp);
  }
}

/** A-B-A: the TLS target (the second) against the mean of the plain ones (the first and third). */
function aba(scenario) {
  const [a1, b, a2] = scenario.targets;
  const mean = (f) => (f(a1) + f(a2)) / 2;
  const ratio = b.rps / mean((t) => t.rps);
  const cpu = b.cpuUsPerReq !== null && a1.cpuUsPerReq !== null ? b.cpuUsPerReq - mean((t) => t.cpuUsPerReq) : null;
  const errors = [a1, b, a2].reduce((n, t) => n + t.non2xx + t.errors, 0);
  const text = `${ratio.toFixed(2)}x the mean of the plain runs around it (${Math.round(a1.rps)} / ${Math.round(b.rps)} / ${Math.round(a2.rps)} req/s)${
    cpu === null ? '' : `, ${cpu >= 0 ? '+' : ''}${cpu.toFixed(1)} µs of circuitlog CPU per request`
  }`;
  return { ratio, errors, text };
}

/** A CA, a server certificate for 127.0.0.1, a client certificate (one day). */
async function makeCertificates(tmp) {
  const dir = fs.mkdtempSync(path.join(tmp, 'tls-'));
  const openssl = (...args) => exec('openssl', args, { cwd: dir });
  await openssl('req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=bench-ca');
  for (const [name, ext] of [
    ['server', 'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n'],
    ['client', 'extendedKeyUsage=clientAuth\n'],
  ]) {
    fs.writeFileSync(path.join(dir, `${name}.ext`), `basicConstraints=CA:FALSE\n${ext}`);
    await openssl('req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    await openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '1',
      '-extfile',
      `${name}.ext`,
    );
  }
  const file = (f) => path.join(dir, f);
  return {
    ca: file('ca.pem'),
    serverCert: file('server.pem'),
    serverKey: file('server.key'),
    clientCert: file('client.pem'),
    clientKey: file('client.key'),
  };
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = net.createServer().once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** A redis-server on a free loopback port: plain text, or (with `files`) TLS only. */
async function redisServer(tmp, files) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(tmp, 'r-'));
  const listen =
    files === null
      ? ['--port', String(port)]
      : [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--tls-cert-file',
          files.serverCert,
          '--tls-key-file',
          files.serverKey,
          '--tls-ca-cert-file',
          files.ca,
          '--tls-auth-clients',
          'yes',
        ];
  const child = spawn(
    'redis-server',
    [...listen, '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const tlsArgs =
    files === null ? [] : ['--tls', '--cacert', files.ca, '--cert', files.clientCert, '--key', files.clientKey];
  const deadline = Date.now() + 20_000;
  for (;;) {
    const pong = await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...tlsArgs, 'PING']).then(
      (r) => r.stdout.trim() === 'PONG',
      () => false,
    );
    if (pong) break;
    if (Date.now() > deadline) throw new Error('redis-tls: a redis-server did not come up');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { port, stop: () => child.kill('SIGKILL') };
}
