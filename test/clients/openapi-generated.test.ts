/**
 * For languages without a client, the OpenAPI document is the contract. This generates a
 * client from the live document with a well-known generator (openapi-typescript for the
 * types, openapi-fetch for the calls), type-checks a consumer under `strict` (with
 * `@ts-expect-error` lines proving the types are not `any`), and runs it against the real
 * server process.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATION_IDS } from '../../src/http/operation-ids.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const TOKEN = 'generated-client-token-0123456789';
const CONSUMER = `
import createClient from 'openapi-fetch';
import type { operations, paths } from './schema.js';

const [baseUrl, token] = process.argv.slice(2) as [string, string];
const api = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${token}\` } });
const name = 'generated/client';

const patched = await api.PATCH('/circuits/{name}', { params: { path: { name } }, body: { failure_threshold: 2 } });
const batch = await api.POST('/outcomes', {
  body: { outcomes: [{ circuit: name, success: false, duration_ms: 12.5 }, { circuit: name, success: false }] },
});
const refused = await api.GET('/circuits/{name}/allowed', { params: { path: { name } } });
const circuit = await api.GET('/circuits/{name}', { params: { path: { name } } });
const threshold: number | undefined = patched.data?.failure_threshold;
const failures: number | undefined = circuit.data?.failure_count;
const states: ('closed' | 'open' | 'half_open')[] | undefined = batch.data?.results.map((r) => r.state);
type Allowed = operations['checkAllowed']['responses'][200]['content']['application/json'];
const allowedKey: keyof Allowed = 'allowed';

// The types are real: each of these is a compile error.
// @ts-expect-error success must be a boolean
void (() => api.POST('/outcomes', { body: { outcomes: [{ circuit: name, success: 'yes' }] } }));
// @ts-expect-error no such path
void (() => api.GET('/circuitz'));
// @ts-expect-error the path parameter is required
void (() => api.GET('/circuits/{name}/allowed', {}));

console.log(JSON.stringify({
  patchStatus: patched.response.status, threshold, states, failures,
  refusedStatus: refused.response.status, refusedCode: (refused.error as { code?: string } | undefined)?.code,
  circuitState: circuit.data?.state, allowedKey,
}));
`;

let server: ServerProcess;
let document: Record<string, unknown>;
beforeAll(async () => {
  const dir = tempDir();
  server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_TOKEN: TOKEN });
  document = (await (await fetch(`${server.url}/openapi.json`)).json()) as Record<string, unknown>;
});
afterAll(async () => {
  await server?.stop('SIGKILL');
});

type Operation = { operationId?: string };
const operations = (doc: Record<string, unknown>) =>
  Object.entries(doc.paths as Record<string, Record<string, Operation>>).flatMap(([p, item]) =>
    Object.entries(item).map(([method, op]) => ({ key: `${method} ${p}`, id: op.operationId })),
  );

describe('the OpenAPI document as a contract for generated clients', () => {
  it('gives every operation a unique verb-first operationId from src/http/operation-ids.ts', () => {
    const ops = operations(document);
    expect(ops.length).toBeGreaterThanOrEqual(15);
    for (const op of ops) {
      expect(op.id, op.key).toBe(OPERATION_IDS[op.key]);
      expect(op.id, op.key).toMatch(/^(list|get|update|delete|check|record|call|reset|stream|proxy|run)[A-Z]/);
    }
    expect(new Set(ops.map((o) => o.id)).size).toBe(ops.length);
  });

  it('names a relative server: the origin that served the document, whatever its port', () => {
    expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });

  it('generates a client (openapi-typescript + openapi-fetch) that type-checks and calls the real server', async () => {
    fs.mkdirSync('.scratch', { recursive: true }); // inside the repo, so the consumer resolves openapi-fetch from node_modules
    const dir = fs.mkdtempSync(path.join('.scratch', 'openapi-client-'));
    const schema = astToString(await openapiTS(JSON.stringify(document)));
    expect(schema).toContain('checkAllowed: {');
    fs.writeFileSync(path.join(dir, 'schema.d.ts'), schema);
    fs.writeFileSync(path.join(dir, 'consumer.ts'), CONSUMER);
    fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}\n');
    const program = ts.createProgram([path.join(dir, 'consumer.ts')], {
      strict: true,
      skipLibCheck: true, // the generated schema.d.ts is checked through its use; @types/node is not ours to check
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
      outDir: dir,
    });
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);
    program.emit();
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(dir, 'consumer.js'), server.url, TOKEN], {
      timeout: 15_000,
    });
    expect(JSON.parse(stdout)).toEqual({
      patchStatus: 201,
      threshold: 2,
      states: ['closed', 'open'],
      failures: 2,
      refusedStatus: 503,
      refusedCode: 'CIRCUIT_OPEN',
      circuitState: 'open',
      allowedKey: 'allowed',
    });
    fs.rmSync(dir, { recursive: true, force: true });
  }, 120_000); // generation and a type-check, on a machine busy with the rest of the suite
});
