import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../helper.js';
import { listenAsMain, rawRequest } from './served-app.js';

// The raw `GET /allowed` (http/raw-allowed.ts) remembers what it judged of a target (the
// circuit's name, or not its shape), so the name rules run once per target, not per request;
// the memo is bounded and emptied when full, and its answers stay the route's.

const names = vi.hoisted(() => ({ checked: [] as string[] }));
vi.mock('../../src/domain/circuit-name.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/domain/circuit-name.js')>();
  return {
    ...original,
    circuitNameProblem: (name: string) => {
      names.checked.push(name);
      return original.circuitNameProblem(name);
    },
  };
});

const t = buildApp();
const servers: http.Server[] = [];
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function served(): Promise<string> {
  const server = await listenAsMain(t);
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the raw GET /allowed target memo', () => {
  it("checks a target's name once however often it is asked", async () => {
    const url = await served();
    names.checked.length = 0;
    for (let i = 0; i < 5; i++) {
      const res = await rawRequest(url, 'GET', '/circuits/memo-once/allowed');
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body).allowed).toBe(true);
    }
    expect(names.checked.filter((n) => n === 'memo-once')).toEqual(['memo-once']);
  });

  it('still answers and declines as before once the memo was emptied (past 256 targets)', async () => {
    const url = await served();
    for (let i = 0; i < 300; i++) {
      const bad = i % 2 === 0 ? `/circuits/a%2${i}/allowed` : `/circuits/..${i}../x/allowed`;
      expect((await rawRequest(url, 'GET', bad)).status, bad).toBeGreaterThanOrEqual(400);
    }
    const ok = await rawRequest(url, 'GET', '/circuits/memo-after/allowed');
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toMatchObject({ allowed: true, circuit: null });
    expect((await rawRequest(url, 'GET', '/circuits/../allowed')).status).toBe(400);
  });
});
