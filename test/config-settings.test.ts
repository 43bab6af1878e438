import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { editDistance, SETTINGS, unknownSettings } from '../src/config/settings.js';

describe('the one list of settings', () => {
  it('names every variable docs/operations.md and docs/many-hosts.md document, and no other CIRCUITLOG_* one', () => {
    const documented = new Set(
      ['docs/operations.md', 'docs/many-hosts.md'].flatMap((file) =>
        [...fs.readFileSync(file, 'utf8').matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]!),
      ),
    );
    expect([...SETTINGS].sort()).toEqual([...documented].sort());
  });

  it('finds unknown CIRCUITLOG_* names and the nearest known one within three edits', () => {
    expect(
      unknownSettings({
        CIRCUITLOG_TOKN: 'x',
        CIRCUITLOG_TOEKN: 'x', // a swap of neighbours is one edit
        CIRCUITLOG_STORE_TIMEOUT: 'x',
        CIRCUITLOG_TOKEN: 'x',
        CIRCUITLOG_URL: 'x',
        CIRCUITLOG_ZZZZZZ: 'x',
        OTHER_TOKN: 'x',
      }),
    ).toEqual([
      { name: 'CIRCUITLOG_STORE_TIMEOUT', suggestion: 'CIRCUITLOG_STORE_TIMEOUT_MS' },
      { name: 'CIRCUITLOG_TOEKN', suggestion: 'CIRCUITLOG_TOKEN' },
      { name: 'CIRCUITLOG_TOKN', suggestion: 'CIRCUITLOG_TOKEN' },
      { name: 'CIRCUITLOG_ZZZZZZ', suggestion: undefined },
    ]);
  });

  it('counts edits as insertions, deletions, substitutions and swaps of neighbours', () => {
    expect([
      editDistance('', 'abc'),
      editDistance('abc', 'abc'),
      editDistance('abc', 'acb'),
      editDistance('kitten', 'sitting'),
    ]).toEqual([3, 0, 1, 3]);
  });
});
