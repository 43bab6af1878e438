import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

export const TOKEN = 'faults-e2e-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };

/** A node as the config names it. */
export interface NodeRef {
  readonly id: string;
  readonly url: string;
}

/** Settings every upstream of the fault suite shares: short per-attempt timeout, no health checks. */
export const FAULT_SETTINGS = {
  requestTimeoutMs: 500,
  retries: 1,
  failureThreshold: 3,
  timeoutSeconds: 60, // 60 s: an opened node stays open for the rest of the test
};

export type FaultSettings = typeof FAULT_SETTINGS & { readonly maxConcurrent?: number };

/** A healthy upstream's timeout: far over any scheduling hiccup of a loaded machine, so only faults fail. */
export const HEALTHY_SETTINGS = { requestTimeoutMs: 5_000 }; // 5 s

/**
 * Config YAML: one upstream per entry with `settings`, overridden per upstream by `only`;
 * all nodes in dc1, health checks off so only traffic counts.
 */
export function faultYaml(
  upstreams: Record<string, readonly NodeRef[]>,
  settings: FaultSettings = FAULT_SETTINGS,
  only: Record<string, Partial<FaultSettings>> = {},
): string {
  const blocks = Object.entries(upstreams).map(([name, nodes]) => {
    const s = { ...settings, ...only[name] };
    return [
      `  ${name}:`,
      '    nodes:',
      ...nodes.map((n) => `      - { id: ${n.id}, dc: dc1, url: "${n.url}" }`),
      `    request_timeout_ms: ${s.requestTimeoutMs}`,
      `    retries: ${s.retries}`,
      `    failure_threshold: ${s.failureThreshold}`,
      `    timeout_seconds: ${s.timeoutSeconds}`,
      '    health_check: { enabled: false }',
      ...(s.maxConcurrent === undefined ? [] : [`    max_concurrent: ${s.maxConcurrent}`]),
    ].join('\n');
  });
  return `local_dc: dc1\nupstreams:\n${blocks.join('\n')}\n`;
}

/** Start the built server over `upstreams` on a temp database. */
export async function startFaultServer(
  upstreams: Record<string, readonly NodeRef[]>,
  settings: FaultSettings = FAULT_SETTINGS,
  only: Record<string, Partial<FaultSettings>> = {},
): Promise<ServerProcess> {
  const dir = tempDir('circuitlog-faults-');
  const configPath = path.join(dir, 'faults.yaml');
  fs.writeFileSync(configPath, faultYaml(upstreams, settings, only));
  return startServer({
    CIRCUITLOG_CONFIG: configPath,
    CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
    CIRCUITLOG_TOKEN: TOKEN,
  });
}

/** What a caller saw of one proxied GET. */
export interface Seen {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  /** The whole announced body arrived. */
  readonly complete: boolean;
  readonly ms: number;
}

/**
 * A GET on its own connection (a cut answer must not poison a pooled socket). Resolves
 * also when the answer is cut after its head; rejects only if no head arrived.
 */
export function get(url: string): Promise<Seen> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('error', () => {}); // 'aborted': reported through `complete`
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          complete: res.complete,
          ms: performance.now() - started,
        }),
      );
    });
    req.on('error', reject);
  });
}

export async function circuitState(
  server: ServerProcess,
  name: string,
): Promise<{ state: string; failureCount: number }> {
  const res = await fetch(`${server.url}/circuits/${encodeURIComponent(name)}`, { headers: auth });
  const body = (await res.json()) as { state: string; failure_count: number };
  return { state: body.state, failureCount: body.failure_count };
}

export async function resetCircuit(server: ServerProcess, name: string): Promise<void> {
  const res = await fetch(`${server.url}/circuits/${encodeURIComponent(name)}/reset`, {
    method: 'POST',
    headers: auth,
  });
  await res.text();
  if (res.status !== 200) throw new Error(`reset ${name}: ${res.status}`);
}

/** Resident set size of a process in bytes, from /proc (Linux). */
export function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmRSS for ${pid}`);
  return Number(match[1]) * 1024;
}

/** Log lines that mean the server hurt itself rather than reporting an upstream fault. */
export function internalErrors(server: ServerProcess): Record<string, unknown>[] {
  return server.logs.filter(
    (l) => l.code === 'INTERNAL' || l.status === 500 || (typeof l.level === 'number' && l.level >= 50),
  );
}
