import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { proxyYaml, startNodes } from '../proxy/fake-node.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { BAD_TEXTS, withBadBody, withBadParam } from './invalid-requests.js';
import {
  answerProblem,
  type Answer,
  type Doc,
  DocSchemas,
  type Operation,
  requestOf,
  type Sent,
  send,
  validValues,
  valuesValid,
  type Values,
} from './openapi-requests.js';

/**
 * The OpenAPI document as a contract, tried from outside: requests generated from the
 * document itself (json-schema-faker, seeded by fast-check) against the real server, with a
 * token and without. Every valid request is accepted (2xx, or a documented state answer:
 * an open circuit, an unknown one); every invalid one gets a documented 4xx problem; every
 * answer matches its documented status, media type and schema.
 */

const TOKEN = 'contract-token-0123456789';
const RUNS = 12; // generated requests per operation and kind: bounded, the file runs in seconds

/** Problem codes that answer a valid request by the state of things, not by its shape. */
const STATE_CODES = new Set([
  'CIRCUIT_NOT_FOUND',
  'CIRCUIT_DEFINED_BY_CONFIG',
  'CIRCUIT_OPEN',
  'CIRCUIT_FORCED_OPEN',
  'CIRCUIT_THROTTLED',
  'TOO_MANY_CIRCUITS',
  'ADMIN_DISABLED',
  'BACKTEST_NOT_FOUND',
]);
/**
 * A policy patch is checked whole against the circuit's policy: rules across fields (the document's 422);
 * its shadow policy too, and `shadow: "promote"` needs a shadow to promote and is sent alone (issue 31).
 */
const CROSS_FIELD = /^(shadow\.)?(window|quorum|backoff)(\.|$)|^shadow$/;
/**
 * A backtest's proposed policy and grid candidates are patches checked whole too (a `ramp` needs
 * its `seconds`), its range must end after it starts, and its grid makes at most 100
 * combinations: rules across members, stated in words.
 */
const BACKTEST_CROSS_FIELD = /^(window|quorum|backoff|ramp|from)(\.|$)/;

const nodes = await startNodes('dc1-1', 'dc2-1');
const dir = tempDir('circuitlog-contract-');
fs.writeFileSync(path.join(dir, 'config.yaml'), proxyYaml(nodes));
const env = (db: string) => ({ CIRCUITLOG_DB: path.join(dir, db), CIRCUITLOG_CONFIG: path.join(dir, 'config.yaml') });
const servers: Record<'with a token' | 'without a token', ServerProcess> = {
  'with a token': await startServer({ ...env('token.sqlite'), CIRCUITLOG_TOKEN: TOKEN }),
  'without a token': await startServer(env('open.sqlite')),
};

afterAll(async () => {
  await Promise.all(Object.values(servers).map((s) => s.stop()));
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
  fs.rmSync(dir, { recursive: true, force: true });
});

async function documentOf(server: ServerProcess): Promise<Doc> {
  return (await (await fetch(`${server.url}/openapi.json`)).json()) as Doc;
}

const label = (request: Sent, answer: Answer) =>
  `${request.method} ${request.target} ${JSON.stringify(request.headers)} ${request.body ?? ''}\n-> ${answer.status} ${answer.headers['content-type']} ${answer.body.slice(0, 600)}`;

/** A valid answer that is not a success: a state answer the document gives. */
function isStateAnswer(method: string, answer: Answer, path = ''): boolean {
  if (!/^application\/problem\+json/.test(answer.headers['content-type'] ?? '')) return false;
  const problem = JSON.parse(answer.body) as { code?: string; errors?: { field: string }[] };
  if (STATE_CODES.has(problem.code ?? '')) return true;
  if (path.endsWith('/backtest')) {
    if (problem.code === 'TOO_MANY_COMBINATIONS') return true;
    return (
      problem.code === 'VALIDATION_FAILED' && (problem.errors ?? []).every((e) => BACKTEST_CROSS_FIELD.test(e.field))
    );
  }
  return (
    method === 'patch' &&
    problem.code === 'VALIDATION_FAILED' &&
    (problem.errors ?? []).every((e) => CROSS_FIELD.test(e.field))
  );
}

/**
 * The one rule across parameters, which a JSON Schema per parameter cannot state and the
 * document states in words: /events/stream takes `circuit` or `prefix`, not both.
 */
function acrossParameters(values: Values): Values {
  const names = [...values.params.keys()].map((p) => p.name);
  if (!names.includes('circuit') || !names.includes('prefix')) return values;
  return { ...values, params: new Map([...values.params].filter(([p]) => p.name !== 'prefix')) };
}

for (const [name, server] of Object.entries(servers)) {
  const doc = await documentOf(server);
  const schemas = new DocSchemas(doc);
  const auth: Record<string, string> = name === 'with a token' ? { authorization: `Bearer ${TOKEN}` } : {};
  const operations = Object.entries(doc.paths).flatMap(([p, item]) =>
    Object.entries(item).map(([method, op]) => ({ key: `${method} ${p}`, method, path: p, op })),
  );

  /** Valid values for the operation, the seed first, then a few after it (a lookahead json-schema-faker ignores). */
  const validFor = (op: Operation, seed: number): Values | null => {
    const latest = new Date(Date.now() - 60_000); // outcome times: the server takes at most 60 s ahead
    for (let i = 0; i < 8; i++) {
      const values = acrossParameters(validValues(schemas, op, seed + i * 7_919, latest));
      if (valuesValid(schemas, op, values)) return values;
    }
    return null;
  };

  describe(`generated requests, ${name}`, () => {
    it('cover every documented operation', () => {
      expect(operations.length).toBeGreaterThan(20);
    });

    it.each(operations.map((o) => [o.key, o] as const))('%s: valid ones are accepted', async (_key, o) => {
      await fc.assert(
        fc.asyncProperty(fc.nat(), async (seed) => {
          const values = validFor(o.op, seed);
          const request = values && requestOf(o.method, o.path, values, auth);
          fc.pre(request !== null);
          const answer = await send(server.url, request!);
          expect(answerProblem(schemas, o.op, answer, request!.method), label(request!, answer)).toBeNull();
          const accepted = answer.status < 300 || isStateAnswer(o.method, answer, o.path);
          expect(accepted, label(request!, answer)).toBe(true);
        }),
        { numRuns: RUNS },
      );
    });

    it.each(operations.map((o) => [o.key, o] as const))(
      '%s: invalid ones get a documented 4xx problem',
      async (_key, o) => {
        const methods = Object.keys(doc.paths[o.path]!);
        const otherMethod = ['get', 'put', 'post', 'delete', 'patch'].find((m) => !methods.includes(m));
        const input = fc.record({
          seed: fc.nat(),
          how: fc.constantFrom('param', 'body', 'auth', 'method'),
          pick: fc.nat(),
          text: fc.oneof(fc.constantFrom(...BAD_TEXTS), fc.string({ maxLength: 40 })),
        });
        await fc.assert(
          fc.asyncProperty(input, async ({ seed, how, pick, text }) => {
            const values = validFor(o.op, seed);
            fc.pre(values !== null);
            let bad: Values | null = values;
            let method = o.method;
            let headers = auth;
            if (how === 'param') bad = withBadParam(schemas, o.op, values!, pick, text);
            else if (how === 'body') bad = withBadBody(schemas, o.op, values!, pick);
            else if (how === 'auth') {
              fc.pre(o.op.security !== undefined && auth.authorization !== undefined);
              headers = {};
            } else {
              fc.pre(otherMethod !== undefined && o.op.responses['405'] !== undefined);
              method = otherMethod!;
            }
            const request = bad && requestOf(method, o.path, bad, headers);
            fc.pre(request !== null);
            const answer = await send(server.url, request!);
            expect(answer.status, label(request!, answer)).toBeGreaterThanOrEqual(400);
            expect(answer.status, label(request!, answer)).toBeLessThan(500);
            expect(answer.headers['content-type'], label(request!, answer)).toBe('application/problem+json');
            expect(answerProblem(schemas, o.op, answer, request!.method), label(request!, answer)).toBeNull();
          }),
          { numRuns: RUNS },
        );
      },
    );
  });
}
