import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { proxyYaml, startNodes, type FakeNode } from '../proxy/fake-node.js';
import { rawRequest, switchableBusyStore, useServedApp } from './served-app.js';

/**
 * Every documented operation is exercised against the live app (token and proxy on), and
 * each answer must match the status, media type and schema the document gives for it.
 * An operation added to the document without a case here fails the suite: add its cases.
 */

const TOKEN = 'conformance-token-0123456789';
const AUTH = { authorization: `Bearer ${TOKEN}` };

interface Case {
  /** Method and path as sent (still percent-encoded); sent raw, so dot segments stay. */
  readonly send: string;
  readonly status: number;
  readonly body?: string;
  readonly headers?: Record<string, string>;
  /** The store answers every call with storage-busy during this request. */
  readonly busy?: boolean;
  /** The process drains after SIGTERM during this request. */
  readonly draining?: boolean;
  /** A backup (of this process) is running during this request. */
  readonly backupRunning?: boolean;
}

const json = (value: unknown) => ({ body: JSON.stringify(value), headers: { 'content-type': 'application/json' } });
const text = { body: 'hello', headers: { 'content-type': 'text/plain' } };
const big = {
  body: JSON.stringify({ success: true, pad: 'x'.repeat(300) }),
  headers: { 'content-type': 'application/json' },
};
const noAuth = { headers: { authorization: '' } };

/** Keyed by `<method> <documented path>`; state comes from `seed` below. */
const CASES: Record<string, Case[]> = {
  'get /circuits': [
    { send: 'GET /circuits?limit=2', status: 200 },
    { send: 'GET /circuits?limit=0', status: 400 },
    { send: 'GET /circuits', status: 401, ...noAuth },
    { send: 'PUT /circuits', status: 405 },
    { send: 'GET /circuits', status: 503, busy: true },
  ],
  'get /circuits/{name}': [
    { send: 'GET /circuits/svc', status: 200 },
    { send: 'GET /circuits/payment-gateway%2Fcharge', status: 200 },
    { send: 'GET /circuits/bad%20name', status: 400 },
    { send: 'GET /circuits/nobody', status: 404 },
    { send: 'PUT /circuits/svc', status: 405 },
    { send: 'GET /circuits/svc', status: 503, busy: true },
  ],
  'post /circuits/{name}/call': [
    { send: 'POST /circuits/called/call', status: 200, ...json({ success: false, threshold: 3 }) },
    {
      send: 'POST /circuits/called/call',
      status: 400,
      headers: { 'content-type': 'application/json' },
      body: '{"success":',
    },
    { send: 'POST /circuits/called/call', status: 413, ...big },
    { send: 'POST /circuits/called/call', status: 415, ...text },
    { send: 'POST /circuits/called/call', status: 422, ...json({ success: 'yes' }) },
    { send: 'POST /circuits/open/call', status: 503 },
  ],
  'post /circuits/{name}/success': [
    { send: 'POST /circuits/svc/success', status: 200 },
    { send: 'POST /circuits/x/%2e%2e/svc/success', status: 400 },
    { send: 'POST /circuits/svc/success', status: 413, ...big },
    { send: 'POST /circuits/svc/success', status: 415, ...text },
    { send: 'POST /circuits/svc/success', status: 503, busy: true },
  ],
  'post /circuits/{name}/failure': [
    { send: 'POST /circuits/svc/failure', status: 200, ...json({ timeout_seconds: 60 }) },
    { send: 'POST /circuits/svc/failure', status: 422, ...json({ timeout_seconds: 0 }) },
    { send: 'POST /circuits/svc/failure', status: 503, busy: true },
  ],
  'post /circuits/{name}/reset': [
    { send: 'POST /circuits/svc/reset', status: 200 },
    { send: 'POST /circuits/nobody/reset', status: 404 },
    { send: 'POST /circuits/svc/reset', status: 415, ...text },
    { send: 'POST /circuits/svc/reset', status: 401, ...noAuth },
  ],
  'get /circuits/{name}/allowed': [
    { send: 'GET /circuits/never-recorded/allowed', status: 200 },
    { send: 'GET /circuits/svc/allowed', status: 200 },
    { send: 'GET /circuits/%2e%2e/allowed', status: 400 },
    { send: 'POST /circuits/svc/allowed', status: 405 },
    { send: 'GET /circuits/open/allowed', status: 503 },
    { send: 'GET /circuits/svc/allowed', status: 503, busy: true },
  ],
  'post /circuits/{name}/outcomes': [
    { send: 'POST /circuits/svc/outcomes', status: 200, ...json({ success: true, duration_ms: 4.5 }) },
    { send: 'POST /circuits/svc/outcomes', status: 400, headers: { 'content-type': 'application/json' }, body: 'nope' },
    { send: 'POST /circuits/svc/outcomes', status: 413, ...big },
    { send: 'POST /circuits/svc/outcomes', status: 415, ...text },
    { send: 'POST /circuits/svc/outcomes', status: 422, ...json({ success: 'true' }) },
  ],
  'post /circuits/{name}/backtest': [
    { send: 'POST /circuits/svc/backtest', status: 200, ...json({ policy: { failure_threshold: 8 } }) },
    { send: 'POST /circuits/svc/backtest', status: 400, headers: { 'content-type': 'application/json' }, body: '{' },
    {
      send: 'POST /circuits/svc/backtest',
      status: 400,
      ...json({
        grid: {
          failure_threshold: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
          timeout_seconds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        },
      }),
    },
    { send: 'POST /circuits/svc/backtest', status: 401, ...noAuth },
    { send: 'POST /circuits/nobody/backtest', status: 404 },
    { send: 'GET /circuits/svc/backtest', status: 405 },
    { send: 'POST /circuits/svc/backtest', status: 413, ...big },
    { send: 'POST /circuits/svc/backtest', status: 415, ...text },
    { send: 'POST /circuits/svc/backtest', status: 422, ...json({ policy: { failure_threshold: 0 } }) },
    { send: 'POST /circuits/svc/backtest', status: 503, busy: true },
  ],
  'get /circuits/{name}/backtest/{id}.svg': [
    { send: 'GET /circuits/bad%20name/backtest/x.svg', status: 400 },
    { send: 'GET /circuits/svc/backtest/x.svg', status: 401, ...noAuth },
    { send: 'GET /circuits/svc/backtest/unknown-id.svg', status: 404 },
    { send: 'POST /circuits/svc/backtest/x.svg', status: 405 },
    { send: 'GET /circuits/svc/backtest/x.svg', status: 503, busy: true },
  ],
  'get /circuits/{name}/events': [
    { send: 'GET /circuits/open/events', status: 200 },
    { send: 'GET /circuits/open/events?limit=501', status: 400 },
    { send: 'GET /circuits/nobody/events', status: 404 },
  ],
  'patch /circuits/{name}': [
    {
      send: 'PATCH /circuits/patched',
      status: 201,
      body: '{"success_threshold":2}',
      headers: { 'content-type': 'application/merge-patch+json' },
    },
    {
      send: 'PATCH /circuits/patched',
      status: 200,
      ...json({ window: { type: 'time', size: 60 }, backoff: { multiplier: 3 } }),
    },
    { send: 'PATCH /circuits/patched', status: 400, headers: { 'content-type': 'application/json' }, body: '{' },
    { send: 'PATCH /circuits/patched', status: 401, ...noAuth },
    { send: 'PATCH /circuits/patched', status: 413, ...big },
    { send: 'PATCH /circuits/patched', status: 415, ...text },
    { send: 'PATCH /circuits/patched', status: 422, ...json({ success_threshold: 0, colour: 'red' }) },
    { send: 'PATCH /circuits/patched', status: 503, busy: true, ...json({ failure_threshold: 9 }) },
  ],
  'delete /circuits/{name}': [
    { send: 'DELETE /circuits/patched', status: 204 },
    { send: 'DELETE /circuits/patched', status: 404 },
    { send: 'DELETE /circuits/users%2Fdc1-1', status: 409 },
    { send: 'DELETE /circuits/bad%20name', status: 400 },
    { send: 'DELETE /circuits/svc', status: 503, busy: true },
  ],
  'post /outcomes': [
    {
      send: 'POST /outcomes',
      status: 200,
      ...json({
        outcomes: [
          { circuit: 'batched', success: false, duration_ms: 3 },
          { circuit: 'svc', success: true },
        ],
      }),
    },
    { send: 'POST /outcomes', status: 400, headers: { 'content-type': 'application/json' }, body: '[' },
    { send: 'POST /outcomes', status: 401, ...noAuth },
    { send: 'GET /outcomes', status: 405 },
    { send: 'POST /outcomes', status: 413, ...json({ outcomes: [], pad: 'x'.repeat(1024 * 1024) }) },
    { send: 'POST /outcomes', status: 415, ...text },
    { send: 'POST /outcomes', status: 422, ...json({ outcomes: [{ circuit: 'a', success: 'no' }] }) },
    { send: 'POST /outcomes', status: 503, busy: true, ...json({ outcomes: [{ circuit: 'svc', success: false }] }) },
  ],
  'get /health': [
    { send: 'GET /health', status: 200, ...noAuth },
    { send: 'POST /health', status: 405 },
    { send: 'GET /health', status: 503, busy: true },
  ],
  'get /admin/backup': [
    { send: 'GET /admin/backup', status: 200 },
    { send: 'GET /admin/backup', status: 401, ...noAuth },
    { send: 'POST /admin/backup', status: 405 },
    { send: 'GET /admin/backup', status: 409, backupRunning: true },
  ],
  'get /whoami': [
    { send: 'GET /whoami', status: 200 },
    { send: 'GET /whoami', status: 401, ...noAuth },
    { send: 'POST /whoami', status: 405 },
  ],
  'get /audit': [
    { send: 'GET /audit?limit=10', status: 200 },
    { send: 'GET /audit?limit=0', status: 400 },
    { send: 'GET /audit', status: 401, ...noAuth },
    { send: 'POST /audit', status: 405 },
  ],
  'get /health/ready': [
    { send: 'GET /health/ready', status: 200, ...noAuth },
    { send: 'POST /health/ready', status: 405 },
    { send: 'GET /health/ready', status: 503, draining: true },
  ],
  'get /problems/{kind}': [
    { send: 'GET /problems/circuit-open', status: 200 },
    { send: 'GET /problems/nope', status: 404 },
    { send: 'DELETE /problems/circuit-open', status: 405 },
  ],
  'get /proxy/{upstream}/{path}': [
    { send: 'GET /proxy/users/a/b?c=1', status: 200, ...noAuth },
    { send: 'GET /proxy/users/a/%2e%2e/b', status: 400 },
    { send: 'GET /proxy/nope/a', status: 404 },
  ],
  'head /proxy/{upstream}/{path}': [{ send: 'HEAD /proxy/users/a', status: 200 }],
  'post /proxy/{upstream}/{path}': [{ send: 'POST /proxy/users/a', status: 200, body: 'raw bytes' }],
  'put /proxy/{upstream}/{path}': [{ send: 'PUT /proxy/users/a', status: 200, ...json({ a: 1 }) }],
  'patch /proxy/{upstream}/{path}': [{ send: 'PATCH /proxy/users/a', status: 200, ...json({ a: 1 }) }],
  'delete /proxy/{upstream}/{path}': [{ send: 'DELETE /proxy/users/a', status: 200 }],
  'options /proxy/{upstream}/{path}': [{ send: 'OPTIONS /proxy/users/a', status: 200 }],
};

/** Answers no documented operation gives: they must still be problems. */
const UNROUTED: Case[] = [
  { send: 'GET /circuits/a/b/allowed', status: 404 },
  { send: 'GET /nowhere', status: 404 },
  { send: 'POST /docs/../circuits/svc/reset', status: 404 },
];

type Doc = {
  paths: Record<
    string,
    Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>
  >;
  components: Record<string, unknown>;
};

const serveApp = useServedApp('all');
let nodes: Record<string, FakeNode> = {};
const client = createUndiciClient();
let app: Awaited<ReturnType<typeof serveApp>>;
let busy: ReturnType<typeof switchableBusyStore>;
let doc: Doc;
let backupDir: string;
const readiness = { draining: false };
// ajv-formats is CommonJS: its default export is the module object under TypeScript's view.
const addFormats = ajvFormats as unknown as typeof ajvFormats.default;
const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));

beforeAll(async () => {
  nodes = await startNodes('dc1-1', 'dc2-1');
  const cfg = parseConfigText(proxyYaml(nodes), 'test');
  busy = switchableBusyStore();
  backupDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-conformance-')), '.circuitlog-backup-db');
  const backup = { backup: (file: string) => busy.db.backup(file), workDir: backupDir };
  app = await serveApp({
    token: TOKEN,
    readiness,
    backup,
    store: busy.store,
    apiBodyLimitBytes: 200,
    proxy: { localDc: 'dc1', upstreams: cfg.upstreams, client },
  });
  doc = (await (await fetch(`${app.url}/openapi.json`)).json()) as Doc;
  await seed();
});

afterAll(async () => {
  await client.close();
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});

/** `svc` with a failure, `payment-gateway/charge`, and `open` open. */
async function seed(): Promise<void> {
  for (const c of ['POST /circuits/svc/failure', 'POST /circuits/payment-gateway%2Fcharge/failure'])
    expect((await send({ send: c, status: 200 })).status).toBe(200);
  expect(
    (await send({ send: 'POST /circuits/open/call', status: 200, ...json({ success: false, threshold: 1 }) })).status,
  ).toBe(200);
}

async function send(c: Case) {
  const [method, path] = c.send.split(' ') as [string, string];
  const headers: Record<string, string> = { ...AUTH, ...c.headers };
  if (headers.authorization === '') delete headers.authorization;
  busy.state.busy = c.busy ?? false;
  readiness.draining = c.draining ?? false;
  if (c.backupRunning) {
    fs.mkdirSync(backupDir, { recursive: true }); // the 200 case's folder may not be gone yet
    fs.writeFileSync(`${backupDir}/owner`, String(process.pid)); // this process holds it
  }
  try {
    return await rawRequest(app.url, method, path, headers, c.body);
  } finally {
    busy.state.busy = false;
    readiness.draining = false;
    if (c.backupRunning) fs.rmSync(backupDir, { recursive: true, force: true });
  }
}

/** The schema for `status` and `contentType` of an operation, or a reason it has none. */
function documented(key: string, status: number, contentType: string | undefined): object | string | null {
  const [method, path] = key.split(' ') as [string, string];
  const responses = doc.paths[path]?.[method]?.responses;
  const response = responses?.[String(status)] ?? responses?.default;
  if (!response) return `status ${status} is not documented for ${key}`;
  if (!response.content) return null; // e.g. a proxied answer: whatever the node sent
  const mediaType = contentType?.split(';')[0]?.trim() ?? '';
  // The most specific media range that covers it (RFC 9110 section 12.5.1): a proxied answer is `*/*`.
  const media =
    response.content[mediaType] ?? response.content[`${mediaType.split('/')[0]}/*`] ?? response.content['*/*'];
  if (!media) return `${key} ${status}: '${mediaType}' is not one of ${Object.keys(response.content).join(', ')}`;
  return media.schema;
}

function expectConforms(label: string, schema: object, body: string): void {
  const validate = ajv.compile({ ...schema, components: doc.components });
  const value: unknown = JSON.parse(body);
  expect(validate(value), `${label}: ${ajv.errorsText(validate.errors)}\n${body}`).toBe(true);
}

/** A JSON or problem+json answer ends with "\n" (curl's output then ends its line). */
function expectNewlineIfJson(contentType: string | undefined, body: string): void {
  if (/^application\/(problem\+)?json/.test(contentType ?? ''))
    expect(JSON.stringify(body.slice(-2))).toMatch(/^"[}\]]\\n"$/);
}

const documentedOperations = () =>
  Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`));

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(doc) as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('has conformance cases for every documented operation, and none for undocumented ones', () => {
    const operations = documentedOperations();
    expect(
      operations.filter((op) => !(op in CASES)),
      'documented operations without cases: add them to CASES',
    ).toEqual([]);
    expect(
      Object.keys(CASES).filter((op) => !operations.includes(op)),
      'cases for operations the document lacks',
    ).toEqual([]);
  });
});

describe('live answers match the document', () => {
  const cases = Object.entries(CASES).flatMap(([key, list]) => list.map((c) => [key, c.send, c.status, c] as const));

  it.each(cases)('%s: %s -> %i', async (key, _send, _status, c) => {
    const res = await send(c);
    expect(res.status, res.body).toBe(c.status);
    if (!key.includes('/proxy/')) expectNewlineIfJson(res.headers['content-type'], res.body); // a proxied answer is the node's
    const schema = documented(key, res.status, res.headers['content-type']);
    expect(typeof schema === 'string' ? schema : null).toBeNull();
    // An empty schema (a proxied answer) takes any bytes, JSON or not.
    if (schema !== null && typeof schema === 'object' && Object.keys(schema).length > 0)
      expectConforms(`${c.send} -> ${res.status}`, schema, res.body);
  });

  it.each(UNROUTED.map((c) => [c.send, c] as const))('unrouted %s is a Problem', async (_send, c) => {
    const res = await send(c);
    expect(res.status).toBe(c.status);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expectNewlineIfJson(res.headers['content-type'], res.body);
    expectConforms(c.send, { $ref: '#/components/schemas/Problem' }, res.body);
  });
});
