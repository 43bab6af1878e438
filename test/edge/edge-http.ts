// Requests of the edge end-to-end tests (test/e2e/edge-*.test.ts): one form for an answer
// from the agent and from the server, so the two can be compared member by member.
import fs from 'node:fs';
import path from 'node:path';
import { expect, vi } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

export interface Answer {
  readonly status: number;
  readonly type: string;
  readonly retryAfter: string | null;
  readonly requestId: string | null;
  /** The parsed JSON body, or the text when it is not JSON (or empty). */
  readonly body: unknown;
}

export interface Send {
  readonly method?: string;
  readonly body?: string;
  readonly type?: string | null;
  readonly requestId?: string;
  readonly headers?: Record<string, string>;
}

/** `method path` on `base`, with `x-request-id` when given (a well-formed one is kept by the server). */
export async function send(base: string, target: string, options: Send = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.body !== undefined && options.type !== null) headers['content-type'] = options.type ?? 'application/json';
  if (options.requestId !== undefined) headers['x-request-id'] = options.requestId;
  const res = await fetch(`${base}${target}`, { method: options.method ?? 'GET', headers, body: options.body });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: compared as text
  }
  return {
    status: res.status,
    type: (res.headers.get('content-type') ?? '').split(';')[0]!,
    retryAfter: res.headers.get('retry-after'),
    requestId: res.headers.get('x-request-id'),
    body,
  };
}

/** `POST target` with a JSON body. */
export const postJson = (base: string, target: string, body: unknown, requestId?: string) =>
  send(base, target, { method: 'POST', body: JSON.stringify(body), requestId });

/** The circuit as the server has it (null: 404). */
export async function circuitOn(server: string, name: string): Promise<Record<string, unknown> | null> {
  const res = await fetch(`${server}/circuits/${encodeURIComponent(name)}`);
  if (res.status === 404) return null;
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

/** The agent's `/edge/stats`. */
export async function edgeStats(agent: string): Promise<Record<string, number | string | Record<string, number>>> {
  const res = await fetch(`${agent}/edge/stats`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, number | string | Record<string, number>>;
}

/** A number member of `/edge/stats`. */
export async function stat(agent: string, member: string): Promise<number> {
  const value = (await edgeStats(agent))[member];
  expect(typeof value, `/edge/stats ${member}`).toBe('number');
  return value as number;
}

/** Wait until the agent's `/health/ready` answers `status`. */
export async function waitReady(agent: string, status: 200 | 503, timeout = 10_000): Promise<void> {
  await vi.waitFor(async () => expect((await fetch(`${agent}/health/ready`)).status).toBe(status), {
    timeout,
    interval: 50,
  });
}

/** PATCH a circuit's policy on the server (creating it). */
export async function patchPolicy(server: string, name: string, patch: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${server}/circuits/${encodeURIComponent(name)}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify(patch),
  });
  expect([200, 201]).toContain(res.status);
}

export interface Served {
  readonly server: ServerProcess;
  readonly dir: string;
  readonly env: Record<string, string>;
}

/** The real server on a fresh database with this config file. */
export async function serveWith(yaml: string): Promise<Served> {
  const dir = tempDir('circuitlog-edge-');
  const config = path.join(dir, 'circuitlog.yaml');
  fs.writeFileSync(config, yaml);
  const env = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config };
  return { server: await startServer(env), dir, env };
}

/** A config file for the agent (`--config`), in `dir`. */
export function edgeConfig(dir: string, file: string, yaml: string): string {
  const at = path.join(dir, file);
  fs.writeFileSync(at, yaml);
  return at;
}

/** `/circuits/<name>/<rest>`, the name percent-encoded as a client sends it. */
export const circuitPath = (name: string, rest: string) => `/circuits/${encodeURIComponent(name)}/${rest}`;
