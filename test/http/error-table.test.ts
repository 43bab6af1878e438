import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PROBLEMS } from '../../src/domain/problem-codes.js';

/** `| status | code | when |` rows of docs/api.md's error table, as [code, status] pairs. */
function documentedCodes(): [string, number][] {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const rows = doc.split('\n').filter((line) => /^\| \d{3} \|/.test(line));
  return rows.flatMap((row) => {
    const [, status, codes] = row.split('|').map((cell) => cell.trim());
    return [...codes!.matchAll(/`([A-Z_]+)`/g)].map((m): [string, number] => [m[1]!, Number(status)]);
  });
}

describe('docs/api.md error table', () => {
  it('lists every code the service can answer, with its status', () => {
    const documented = new Map(documentedCodes());
    for (const [code, { status }] of Object.entries(PROBLEMS)) expect(documented.get(code), code).toBe(status);
  });

  it('lists no code the service does not have', () => {
    expect(
      documentedCodes()
        .map(([code]) => code)
        .filter((code) => !(code in PROBLEMS)),
    ).toEqual([]);
  });
});
