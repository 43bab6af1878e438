/**
 * Every case of clients/spec/client-cases.json, run by the Node client against the real
 * server process (a fresh one per case, on a temp database).
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { CaseRun, type ClientCase } from './case-runner.js';

const spec = JSON.parse(readFileSync('clients/spec/client-cases.json', 'utf8')) as {
  format: string;
  version: number;
  cases: ClientCase[];
};

let current: CaseRun | null = null;
afterEach(async () => {
  await current?.stop();
  current = null;
});

describe('clients/spec/client-cases.json', () => {
  it('is version 1 of the format, with unique ids', () => {
    expect([spec.format, spec.version]).toEqual(['circuitlog-client-cases', 1]);
    expect(new Set(spec.cases.map((c) => c.id)).size).toBe(spec.cases.length);
  });
});

describe('every client case through the Node client against the real server', () => {
  it.each(spec.cases)('$id', async (clientCase) => {
    current = new CaseRun(clientCase);
    await current.start();
    await current.run();
  });
});
