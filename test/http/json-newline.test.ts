import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

/** Every .ts file under a folder. */
function sources(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));
}

describe('JSON answers end with a newline', () => {
  it("are made by json(c, ...) in the server: no route calls Hono's c.json, which ends without one", () => {
    const offenders = sources('src').filter(
      (file) => !file.startsWith(path.join('src', 'client')) && /\bc\.json\(/.test(fs.readFileSync(file, 'utf8')),
    );
    expect(offenders).toEqual([]);
  });

  it.each([
    ['GET', '/health'],
    ['GET', '/health/ready'],
    ['GET', '/circuits'],
    ['POST', '/circuits/a/failure'],
    ['GET', '/circuits/a'],
    ['GET', '/circuits/a/allowed'],
    ['GET', '/circuits/never/allowed'],
    ['GET', '/circuits/nobody'],
    ['GET', '/problems/circuit-open'],
    ['GET', '/openapi.json'],
  ])('%s %s', async (method, target) => {
    const t = buildApp();
    await t.request('POST', '/circuits/a/failure');
    const res = await t.request(method, target);
    expect(res.headers.get('content-type')).toMatch(/^application\/(problem\+)?json/);
    expect((await res.text()).slice(-2)).toMatch(/^[}\]]\n$/);
  });
});
