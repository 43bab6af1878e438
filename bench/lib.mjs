// Reusable benchmark helpers: child processes, load generators (wrk / autocannon),
// a suite runner that interleaves targets, and markdown/JSON reporting.
//
// Everything here is loopback-only and bounded in time. Other benchmarks (proxy vs
// node-http-proxy vs nginx, 1 vs 2 workers, durability modes) are meant to build on
// `startProcess`, `runLoad` and `runSuite`; see bench/README.md.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

// ---------------------------------------------------------------------------
// Small utilities

export const LOOPBACK = '127.0.0.1';

/** Integer env var with a default and bounds; throws on garbage. */
export function envInt(name, fallback, min = 1, max = 1e9) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`${name}: expected an integer from ${min} to ${max}, got '${raw}'`);
  return n;
}

export function median(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** Value at percentile `p` (0..100) of an ascending-sorted array (nearest rank). */
export function percentileSorted(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** A JSON object body of exactly `bytes` UTF-8 bytes (at least 10): {"pad":"xxx…"}. */
export function jsonBodyOfSize(bytes) {
  const shell = '{"pad":""}';
  if (bytes < shell.length) throw new Error(`jsonBodyOfSize: at least ${shell.length} bytes`);
  return `{"pad":"${'x'.repeat(bytes - shell.length)}"}`;
}

/** Ask the OS for a free loopback TCP port (tiny race until the child binds it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, LOOPBACK, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export function commandExists(cmd) {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim() !== '';
}

/** A section's result when a program it needs is missing (null when all are installed). */
export function missingPrograms(programs, { id, title, durationSec }) {
  const missing = programs.filter((p) => !commandExists(p));
  if (missing.length === 0) return null;
  const note = `skipped: ${missing.join(', ')} not installed (apt-get install redis-server redis-tools openssl)`;
  return { id, title, durationSec, results: [], notes: [note], checks: [] };
}

/** One request (fetch), returning status, headers and the body text and byte size. */
export async function probe(url, { method = 'GET', headers = {}, body } = {}) {
  const res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(5_000) });
  const text = await res.text();
  return { status: res.status, headers: Object.fromEntries(res.headers), body: text, bytes: Buffer.byteLength(text) };
}

/** Like probe() but throws unless the status is 2xx. */
export async function probeOk(url, init) {
  const r = await probe(url, init);
  if (r.status < 200 || r.status > 299)
    throw new Error(`${init?.method ?? 'GET'} ${url} -> ${r.status}: ${r.body.slice(0, 300)}`);
  return r;
}

export function makeTempDir(prefix = 'circuitlog-bench-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Consumed CPU (user+system) of a live process in ms, from /proc (Linux); null elsewhere. */
export function processCpuMs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[11] = utime, fields[12] = stime (in clock ticks), counting from field 3 "state".
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / CLOCK_TICKS;
  } catch {
    return null;
  }
}
const CLOCK_TICKS = (() => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

/** Sum of processCpuMs over several pids; null when none of them could be read. */
export function processesCpuMs(pids) {
  let total = 0;
  let any = false;
  for (const pid of pids) {
    const ms = processCpuMs(pid);
    if (ms !== null) {
      total += ms;
      any = true;
    }
  }
  return any ? total : null;
}

/** `{pid, ppid, start}` of every process in /proc (Linux); [] elsewhere. `start` guards against pid reuse. */
function processTable() {
  let entries;
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  const out = [];
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(e), ppid: Number(f[1]), start: f[19] });
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/**
 * Every live descendant of `pid` as `{pid, start}` (nginx workers, node:cluster workers).
 * Collect them before signalling the parent: once it dies they are re-parented.
 */
export function descendantProcesses(pid) {
  const table = processTable();
  const byParent = new Map();
  for (const p of table) {
    if (!byParent.has(p.ppid)) byParent.set(p.ppid, []);
    byParent.get(p.ppid).push(p);
  }
  const out = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const kid of byParent.get(queue.shift()) ?? []) {
      out.push({ pid: kid.pid, start: kid.start });
      queue.push(kid.pid);
    }
  }
  return out;
}

export const descendantPids = (pid) => descendantProcesses(pid).map((p) => p.pid);

/** SIGKILL the processes of a descendantProcesses() snapshot that are still the same processes. */
function killLeftovers(snapshot) {
  for (const { pid, start } of snapshot) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] !== start) continue; // pid reused
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

/** The file system type of `dir` (`stat -f -c %T`), e.g. ext2/ext3, tmpfs, overlayfs; 'unknown' if stat fails. */
export function fsType(dir) {
  const r = spawnSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : 'unknown';
}

// ---------------------------------------------------------------------------
// Child processes

const children = new Set();
let handlersInstalled = false;

function killAllSync() {
  for (const p of children) {
    // Grand-children first (nginx workers survive a SIGKILLed master; cluster workers usually follow the primary).
    const kids = p.child.pid ? descendantProcesses(p.child.pid) : [];
    if (p.child.exitCode === null && p.child.signalCode === null) {
      try {
        p.child.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
    killLeftovers(kids);
  }
}

/**
 * Make sure every child started through startProcess() dies with us: on normal exit,
 * on SIGINT/SIGTERM (graceful stop, then exit 130/143) and on uncaught errors.
 */
export function installCleanupHandlers() {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', killAllSync);
  for (const [sig, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ]) {
    process.on(sig, () => {
      process.stderr.write(`\nbench: ${sig}, stopping children\n`);
      stopAll().finally(() => process.exit(code));
      setTimeout(() => process.exit(code), 3_000).unref();
    });
  }
}

export async function stopAll() {
  await Promise.all([...children].map((p) => p.stop()));
}

/**
 * Spawn a child process and resolve once it is ready.
 *
 * Readiness: the first JSON stdout line with `event: "listening"` and a numeric `port`
 * (what circuitlog and bare-server.mjs print), or — when `readyPath` is given — the
 * first 2xx/4xx answer to GET http://127.0.0.1:<port><readyPath>. The latter is for
 * processes that do not log (circuitlog with CIRCUITLOG_LOG_LEVEL=warn, nginx…): pass
 * `port: 'auto'` to get a free port, given to the child as `env.PORT` (or through
 * `args` as a function of the port).
 *
 * @param {object} o
 * @param {string} o.name            label for messages
 * @param {string} [o.command]       default: this node binary
 * @param {string[]|((port:number)=>string[])} [o.args]
 * @param {Record<string,string>} [o.env]   merged over process.env
 * @param {number|'auto'} [o.port]   'auto' = pick a free port and set env.PORT
 * @param {string} [o.readyPath]     poll this path until it answers
 * @param {number} [o.timeoutMs]
 * @param {string} [o.cwd]
 */
export async function startProcess({
  name,
  command = process.execPath,
  args = [],
  env = {},
  port,
  readyPath,
  timeoutMs = 15_000,
  cwd,
}) {
  installCleanupHandlers();
  const fixedPort = port === 'auto' ? await freePort() : port;
  const childEnv = { ...process.env, ...env };
  if (fixedPort !== undefined) childEnv.PORT = String(fixedPort);
  const argv = typeof args === 'function' ? args(fixedPort) : args;
  const child = spawn(command, argv, { env: childEnv, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs = [];
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += chunk.toString();
    if (stderr.length > 64_000) stderr = stderr.slice(-32_000);
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));

  const proc = {
    name,
    child,
    pid: child.pid,
    port: fixedPort,
    url: undefined,
    logs,
    get stderr() {
      return stderr;
    },
    exited,
    /** SIGTERM, then SIGKILL after graceMs. Resolves with the exit {code, signal}. */
    async stop(graceMs = 5_000) {
      if (child.exitCode === null && child.signalCode === null) {
        const kids = descendantProcesses(child.pid);
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        const r = await exited;
        clearTimeout(timer);
        await sleep(100);
        killLeftovers(kids); // anything the parent did not take down with it
        children.delete(proc);
        return r;
      }
      children.delete(proc);
      return exited;
    },
    /** This process and its live descendants (for CPU accounting of nginx / cluster workers). */
    pids() {
      return [child.pid, ...descendantPids(child.pid)];
    },
  };
  children.add(proc);

  let resolveReady;
  const ready = new Promise((r) => (resolveReady = r));
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      return;
    }
    if (logs.length < 1000) logs.push(entry);
    proc.onLog?.(entry); // every line, past the 1,000 kept
    if (entry && entry.event === 'listening' && typeof entry.port === 'number') resolveReady(entry.port);
  });

  let polling = true;
  if (readyPath !== undefined && fixedPort !== undefined) {
    (async () => {
      while (polling) {
        try {
          const res = await fetch(`http://${LOOPBACK}:${fixedPort}${readyPath}`, {
            signal: AbortSignal.timeout(1_000),
          });
          await res.arrayBuffer();
          if (res.status < 500) return resolveReady(fixedPort);
        } catch {
          /* not yet */
        }
        await sleep(50);
      }
    })();
  }

  let timer;
  try {
    const readyPort = await Promise.race([
      ready,
      exited.then(({ code, signal }) => {
        throw new Error(`${name} exited (${code ?? signal}) before it was ready; stderr:\n${stderr}`);
      }),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${name} not ready in ${timeoutMs} ms; stderr:\n${stderr}`)),
          timeoutMs,
        );
      }),
    ]);
    proc.port = readyPort;
    proc.url = `http://${LOOPBACK}:${readyPort}`;
    return proc;
  } catch (error) {
    await proc.stop(1_000);
    throw error;
  } finally {
    polling = false;
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------
// Load generators

/** 'wrk' when installed (it needs far less CPU than autocannon), else 'autocannon'; BENCH_TOOL overrides. */
export function pickTool(override = process.env.BENCH_TOOL) {
  if (override) {
    if (override !== 'wrk' && override !== 'autocannon')
      throw new Error(`BENCH_TOOL: expected wrk or autocannon, got '${override}'`);
    if (override === 'wrk' && !commandExists('wrk')) throw new Error('BENCH_TOOL=wrk but wrk is not on PATH');
    return override;
  }
  return commandExists('wrk') ? 'wrk' : 'autocannon';
}

export function toolVersion(tool) {
  if (tool === 'wrk') {
    const r = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
    const first = ((r.stdout || '') + (r.stderr || '')).split('\n')[0];
    return first.replace(/\s*Copyright.*$/, '').trim() || 'wrk';
  }
  try {
    const pkg = JSON.parse(
      fs.readFileSync(new URL('../node_modules/autocannon/package.json', import.meta.url), 'utf8'),
    );
    return `autocannon ${pkg.version}`;
  } catch {
    return 'autocannon';
  }
}

/**
 * Drive one target for `durationSec` seconds with `connections` keep-alive connections.
 * Returns { tool, requests, rps, p50, p99 (ms), non2xx, errors, timeouts, durationSec }.
 * `non2xx` for wrk counts statuses >= 400 (wrk's own "Non-2xx or 3xx" counter).
 *
 * @param {object} o
 * @param {'wrk'|'autocannon'} o.tool
 * @param {string} o.url
 * @param {string} [o.method]
 * @param {Record<string,string>} [o.headers]
 * @param {string} [o.body]
 * @param {number} o.connections
 * @param {number} o.durationSec
 * @param {number} [o.wrkThreads]
 */
export async function runLoad(o) {
  const method = o.method ?? 'GET';
  const url = new URL(o.url);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname))
    throw new Error(`refusing to load a non-loopback host: ${url.hostname}`);
  return o.tool === 'wrk' ? runWrk({ ...o, method }) : runAutocannon({ ...o, method });
}

async function runAutocannon({ url, method, headers = {}, body, connections, durationSec }) {
  const { default: autocannon } = await import('autocannon');
  // autocannon's own histogram has 1 ms resolution; record exact latencies too.
  let lat = new Float64Array(1 << 16);
  let n = 0;
  const started = process.hrtime.bigint();
  const instance = autocannon({ url, method, headers, body, connections, duration: durationSec, timeout: 10 });
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    if (statusCode < 200 || statusCode > 299) return;
    if (n === lat.length) {
      const bigger = new Float64Array(lat.length * 2);
      bigger.set(lat);
      lat = bigger;
    }
    lat[n++] = responseTime;
  });
  const result = await instance;
  const elapsedSec = Number(process.hrtime.bigint() - started) / 1e9;
  const sorted = lat.subarray(0, n).sort();
  const requests = result['2xx'] + result.non2xx;
  const seconds = result.duration || elapsedSec;
  return {
    tool: 'autocannon',
    requests,
    rps: requests / seconds,
    p50: percentileSorted(sorted, 50),
    p99: percentileSorted(sorted, 99),
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([k, v]) => [k, v.count])),
    durationSec: seconds,
  };
}

function luaString(s) {
  // Decimal byte escapes are valid in Lua 5.1/LuaJIT and need no further quoting.
  return `"${[...Buffer.from(s, 'utf8')].map((b) => `\\${b}`).join('')}"`;
}

async function runWrk({ url, method, headers = {}, body, connections, durationSec, wrkThreads }) {
  const threads = Math.max(1, Math.min(wrkThreads ?? envInt('BENCH_WRK_THREADS', 1), connections));
  const dir = makeTempDir('circuitlog-wrk-');
  const script = path.join(dir, 'req.lua');
  const lines = [`wrk.method = ${luaString(method)}`];
  if (body !== undefined) lines.push(`wrk.body = ${luaString(body)}`);
  for (const [k, v] of Object.entries(headers)) lines.push(`wrk.headers[${luaString(k)}] = ${luaString(v)}`);
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format(\'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\\n\',',
    '    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,',
    '    latency:percentile(50), latency:percentile(99), latency.max))',
    'end',
  );
  fs.writeFileSync(script, lines.join('\n') + '\n');
  try {
    const args = [
      '-t',
      String(threads),
      '-c',
      String(connections),
      '-d',
      `${durationSec}s`,
      '--timeout',
      '10s',
      '-s',
      script,
      url,
    ];
    const { code, stdout, stderr } = await new Promise((resolve, reject) => {
      installCleanupHandlers();
      const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      const tracked = { child, stop: async () => void child.kill('SIGKILL') };
      children.add(tracked);
      child.once('exit', () => children.delete(tracked));
      const killer = setTimeout(() => child.kill('SIGKILL'), (durationSec + 30) * 1000);
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      child.once('error', reject);
      child.once('exit', (c) => {
        clearTimeout(killer);
        resolve({ code: c, stdout: out, stderr: err });
      });
    });
    const line = stdout.split('\n').find((l) => l.startsWith('BENCH_JSON '));
    if (code !== 0 || !line) throw new Error(`wrk failed (exit ${code}): ${stderr || stdout}`);
    const r = JSON.parse(line.slice('BENCH_JSON '.length));
    const seconds = r.duration_us / 1e6;
    return {
      tool: 'wrk',
      requests: r.requests,
      rps: r.requests / seconds,
      p50: r.p50_us / 1000,
      p99: r.p99_us / 1000,
      non2xx: r.status,
      errors: r.connect + r.read + r.write,
      timeouts: r.timeout,
      statusCodes: undefined,
      durationSec: seconds,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------
// Suite runner

/**
 * @typedef {object} Target
 * @property {string} id             unique within its scenario
 * @property {string} label          shown in the table
 * @property {string} url
 * @property {string} [method]
 * @property {Record<string,string>} [headers]
 * @property {string} [body]
 * @property {number} [goal]         minimum req/s ratio vs the scenario baseline
 * @property {number|number[]|(()=>number[])} [pid]  process(es) to charge CPU time to (CPU µs/req
 *                                   column); a function is called per run, e.g. `proc.pids` for a
 *                                   parent with workers (nginx, node:cluster)
 *
 * @typedef {object} Scenario
 * @property {string} id
 * @property {string} title
 * @property {string} baseline       id of the baseline target
 * @property {Target[]} targets
 * @property {{subject:string, baseline:string, goal?:number, label?:string, skipped?:string}[]} [comparisons]
 *                                   extra ratios between two targets (see markdownComparisons)
 */

/**
 * Warm every target up, then run `rounds` rounds; in each round every scenario runs its
 * targets back to back (order reversed on odd rounds) so that drift on a shared machine
 * hits baseline and subject alike. Per target the median over rounds is reported.
 * With `settleSec` > 0 each measured run is preceded by an unmeasured run of that length on
 * the same target: a Node process that sat idle for a while (other targets ran) spends its
 * first second re-optimising its hot code, and that cost would land on whichever target of
 * the process runs first after the idle time instead of on its steady state.
 */
export async function runSuite(
  scenarios,
  {
    tool,
    connections,
    durationSec,
    warmupSec = 2,
    settleSec = 0,
    rounds = 1,
    pauseMs = 500,
    log = (m) => process.stderr.write(`${m}\n`),
  },
) {
  const raw = new Map(); // `${scenario.id}/${target.id}` -> runs[]
  const key = (s, t) => `${s.id}/${t.id}`;
  const once = async (s, t, seconds) => {
    const pids = typeof t.pid === 'function' ? t.pid() : Array.isArray(t.pid) ? t.pid : t.pid ? [t.pid] : [];
    const cpuBefore = pids.length ? processesCpuMs(pids) : null;
    const r = await runLoad({
      tool,
      url: t.url,
      method: t.method,
      headers: t.headers,
      body: t.body,
      connections,
      durationSec: seconds,
    });
    const cpuAfter = pids.length ? processesCpuMs(pids) : null;
    r.cpuUsPerReq =
      cpuBefore !== null && cpuAfter !== null && r.requests > 0 ? ((cpuAfter - cpuBefore) * 1000) / r.requests : null;
    return r;
  };

  if (warmupSec > 0) {
    for (const s of scenarios) {
      for (const t of s.targets) {
        log(`warm-up  ${s.title} :: ${t.label} (${warmupSec}s)`);
        const r = await once(s, t, warmupSec);
        if (r.non2xx || r.errors || r.timeouts)
          log(`  warning: warm-up saw non2xx=${r.non2xx} errors=${r.errors} timeouts=${r.timeouts}`);
        await sleep(pauseMs);
      }
    }
  }
  for (let round = 0; round < rounds; round++) {
    for (const s of scenarios) {
      const order = round % 2 === 0 ? s.targets : [...s.targets].reverse();
      for (const t of order) {
        if (settleSec > 0) {
          const w = await once(s, t, settleSec);
          if (w.non2xx || w.errors || w.timeouts)
            log(`  warning: settling run saw non2xx=${w.non2xx} errors=${w.errors} timeouts=${w.timeouts}`);
        }
        log(`round ${round + 1}/${rounds}  ${s.title} :: ${t.label} (${durationSec}s)`);
        const r = await once(s, t, durationSec);
        log(
          `  ${fmt(r.rps, 0)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  non2xx ${r.non2xx}  errors ${r.errors + r.timeouts}`,
        );
        if (!raw.has(key(s, t))) raw.set(key(s, t), []);
        raw.get(key(s, t)).push(r);
        await sleep(pauseMs);
      }
    }
  }

  return scenarios.map((s) => {
    const summarize = (t) => {
      const runs = raw.get(key(s, t)) ?? [];
      return {
        id: t.id,
        label: t.label,
        method: t.method ?? 'GET',
        url: t.url,
        goal: t.goal ?? null,
        // A target whose refusals are the point (a ramping circuit's 503s): its non-2xx answers are expected, not errors.
        expectsNon2xx: t.expectsNon2xx === true,
        rps: median(runs.map((r) => r.rps)),
        p50: median(runs.map((r) => r.p50)),
        p99: median(runs.map((r) => r.p99)),
        cpuUsPerReq: runs.some((r) => r.cpuUsPerReq !== null) ? median(runs.map((r) => r.cpuUsPerReq ?? NaN)) : null,
        requests: runs.reduce((a, r) => a + r.requests, 0),
        non2xx: runs.reduce((a, r) => a + r.non2xx, 0),
        errors: runs.reduce((a, r) => a + r.errors + r.timeouts, 0),
        runs,
      };
    };
    const targets = s.targets.map(summarize);
    const base = targets.find((t) => t.id === s.baseline);
    if (!base) throw new Error(`scenario ${s.id}: no baseline target '${s.baseline}'`);
    for (const t of targets) {
      t.isBaseline = t === base;
      t.ratio = t.rps / base.rps;
      t.valid =
        (t.expectsNon2xx || t.non2xx === 0) &&
        t.errors === 0 &&
        base.non2xx === 0 &&
        base.errors === 0 &&
        t.requests > 0;
      t.met = t.goal === null ? null : t.valid && t.ratio >= t.goal;
    }
    const comparisons = (s.comparisons ?? []).map((cmp) => compareTargets(targets, cmp));
    return { id: s.id, title: s.title, baseline: s.baseline, targets, comparisons };
  });
}

/**
 * A ratio between two targets of one scenario besides the scenario baseline, e.g.
 * circuitlog vs node-http-proxy. `cmp`: {subject, baseline, goal?, label?, skipped?}; with
 * `skipped` (a reason) or a missing target the row reports why instead of a ratio.
 */
function compareTargets(targets, cmp) {
  const subject = targets.find((t) => t.id === cmp.subject);
  const base = targets.find((t) => t.id === cmp.baseline);
  const label = cmp.label ?? `${cmp.subject} vs ${cmp.baseline}`;
  const goal = cmp.goal ?? null;
  if (cmp.skipped || !subject || !base) {
    return {
      label,
      subject: cmp.subject,
      baseline: cmp.baseline,
      goal,
      skipped: cmp.skipped ?? `target '${!subject ? cmp.subject : cmp.baseline}' did not run`,
      met: null,
      valid: true,
    };
  }
  const valid = subject.valid && base.valid;
  const ratio = subject.rps / base.rps;
  return {
    label,
    subject: cmp.subject,
    baseline: cmp.baseline,
    subjectLabel: subject.label,
    baselineLabel: base.label,
    subjectRps: subject.rps,
    baselineRps: base.rps,
    ratio,
    p50: [subject.p50, base.p50],
    p99: [subject.p99, base.p99],
    goal,
    valid,
    met: goal === null ? null : valid && ratio >= goal,
  };
}

// ---------------------------------------------------------------------------
// Reporting

export function fmt(n, digits = 2) {
  return Number.isFinite(n) ? n.toFixed(digits) : 'n/a';
}

/** The goal table (one row per target) in markdown. */
export function markdownTable(results) {
  const rows = [
    '| scenario | target | req/s | p50 ms | p99 ms | ratio vs baseline | goal | met? |',
    '|---|---|---:|---:|---:|---:|---:|:---:|',
  ];
  for (const s of results) {
    for (const t of s.targets) {
      const goal = t.isBaseline ? 'baseline' : t.goal === null ? '—' : `≥ ${t.goal.toFixed(2)}x`;
      const met = !t.valid ? 'INVALID (errors)' : t.met === null ? '—' : t.met ? 'yes' : 'NO';
      rows.push(
        `| ${s.title} | ${t.label} | ${fmt(t.rps, 0)} | ${fmt(t.p50)} | ${fmt(t.p99)} | ${fmt(t.ratio)}x | ${goal} | ${met} |`,
      );
    }
  }
  return rows.join('\n');
}

/** The extra comparisons of every scenario (subject vs another target, with goals). */
export function markdownComparisons(results) {
  const rows = [
    '| scenario | comparison | subject req/s | baseline req/s | ratio (req/s) | p50 ms subject / baseline | p99 ms subject / baseline | goal | met? |',
    '|---|---|---:|---:|---:|---:|---:|---:|:---:|',
  ];
  let any = false;
  for (const s of results) {
    for (const c of s.comparisons ?? []) {
      any = true;
      const goal = c.goal === null ? '— (reference)' : `≥ ${c.goal.toFixed(2)}x`;
      if (c.skipped) {
        rows.push(`| ${s.title} | ${c.label} | — | — | — | — | — | ${goal} | skipped: ${c.skipped} |`);
        continue;
      }
      const met = !c.valid ? 'INVALID (errors)' : c.met === null ? '—' : c.met ? 'yes' : 'NO';
      rows.push(
        `| ${s.title} | ${c.label} | ${fmt(c.subjectRps, 0)} | ${fmt(c.baselineRps, 0)} | ${fmt(c.ratio)}x | ${fmt(c.p50[0])} / ${fmt(c.p50[1])} | ${fmt(c.p99[0])} / ${fmt(c.p99[1])} | ${goal} | ${met} |`,
      );
    }
  }
  return any ? rows.join('\n') : '';
}

/** Validity and cost details: requests, non-2xx, errors, server CPU per request. */
export function markdownDetails(results) {
  const rows = [
    '| scenario | target | requests | non-2xx | errors/timeouts | process CPU µs/req | runs req/s |',
    '|---|---|---:|---:|---:|---:|---|',
  ];
  for (const s of results) {
    for (const t of s.targets) {
      rows.push(
        `| ${s.title} | ${t.label} | ${t.requests} | ${t.non2xx} | ${t.errors} | ${t.cpuUsPerReq === null ? 'n/a' : fmt(t.cpuUsPerReq, 1)} | ${t.runs.map((r) => fmt(r.rps, 0)).join(', ')} |`,
      );
    }
  }
  return rows.join('\n');
}

export function environmentInfo(tool) {
  const cpus = os.cpus();
  return {
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpus: cpus.length,
    availableParallelism: os.availableParallelism?.() ?? cpus.length,
    cpuModel: cpus[0]?.model?.trim() ?? 'unknown',
    loadavg: os.loadavg().map((x) => Number(x.toFixed(2))),
    tool,
    toolVersion: toolVersion(tool),
  };
}

export function writeJson(file, data) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(data, null, 2) + '\n');
}
