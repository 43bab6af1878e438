import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { needsToken, TOKEN_PATHS } from '../../src/auth/bearer.js';
import { buildObservedApp } from '../observe/observe-app.js';

const TOKEN = 'a-very-secret-token-123';
type Operation = { security?: unknown; responses: Record<string, unknown> };

/** The app with everything that has a documented path: observability, the dashboard, backups. */
function fullApp(token?: string) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-token-paths-'));
  return buildObservedApp({
    deps: { token, backup: { backup: async () => undefined, workDir: path.join(folder, '.circuitlog-backup-db') } },
  });
}

async function documentedOperations(t: ReturnType<typeof fullApp>) {
  const doc = (await (await t.request('GET', '/openapi.json')).json()) as {
    paths: Record<string, Record<string, Operation>>;
  };
  return Object.entries(doc.paths).flatMap(([template, item]) =>
    Object.entries(item).map(([method, operation]) => ({ template, method: method.toUpperCase(), operation })),
  );
}

describe('the token-protected paths (TOKEN_PATHS in src/http/request-guard.ts, listed once)', () => {
  it('are exactly the documented operations that answer 401 without the token, and the ones the document marks', async () => {
    const t = fullApp(TOKEN);
    const operations = await documentedOperations(t);
    expect(operations.length).toBeGreaterThan(15);
    for (const { template, method, operation } of operations) {
      const concrete = template.replace('{name}', 'svc').replace('{kind}', 'circuit-open');
      const res = await t.request(method, concrete);
      const label = `${method} ${template}`;
      expect(res.status === 401, label).toBe(needsToken(template));
      expect(operation.security !== undefined, label).toBe(needsToken(template));
    }
    const open = new Set(operations.filter((o) => !needsToken(o.template)).map((o) => o.template));
    expect([...open].sort()).toEqual(['/dashboard', '/health', '/health/ready', '/problems/{kind}']);
    const guarded = new Set(
      operations.filter((o) => needsToken(o.template) && !o.template.startsWith('/circuits')).map((o) => o.template),
    );
    expect([...guarded].sort()).toEqual([
      '/admin/backup',
      '/audit',
      '/dashboard/api/state',
      '/events/stream',
      '/metrics',
      '/outcomes',
      '/whoami',
    ]);
  });

  it('each guard a documented path (no stale entry in the list)', async () => {
    const templates = (await documentedOperations(fullApp(TOKEN))).map((o) => o.template);
    for (const pattern of TOKEN_PATHS) {
      const prefix = pattern.endsWith('/*') ? pattern.slice(0, -1) : null;
      expect(
        templates.some((p) => (prefix === null ? p === pattern : p.startsWith(prefix))),
        pattern,
      ).toBe(true);
    }
  });

  it('leave the document without 401 answers when no token is set, except the backup that always needs one', async () => {
    const operations = await documentedOperations(fullApp());
    const with401 = operations
      .filter((o) => o.operation.responses['401'] !== undefined)
      .map((o) => `${o.method} ${o.template}`);
    expect(with401).toEqual(['GET /admin/backup']);
  });
});
