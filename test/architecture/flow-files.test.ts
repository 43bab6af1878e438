import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// Issue 28's file counts of docs/design.md ("Three flows, file by file"), read by the script the
// doc names (scripts/flow-files.mjs) on the dist/ the global setup built: the files of src/ in
// which a function ran for one request. A flow that crosses more files than these bounds has had
// a wall put back between two halves of one idea.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The files the script lists for `flow`. */
async function flowFiles(flow: 'outcome' | 'proxy'): Promise<string[]> {
  const { stdout } = await promisify(execFile)(process.execPath, ['scripts/flow-files.mjs', flow], {
    cwd: root,
    encoding: 'utf8',
  });
  const lines = stdout.trim().split('\n');
  expect(lines.at(-1)).toBe(`${lines.length - 1} files`);
  return lines.slice(0, -1);
}

describe('scripts/flow-files.mjs', () => {
  // 22 at the end of issue 28; issue 29 added one room to it, the rules of outcome kinds
  // (domain/outcome-rules.ts: the node's answer classified, what its kind counts as); issue 31
  // one more, the history entry's codec (domain/history.ts: each outcome's text in its history).
  it('finds a proxied GET that fails over on a second node running in at most 24 files of src/', async () => {
    const files = await flowFiles('proxy');
    expect(files).toContain('src/proxy/failover.ts');
    expect(files).toContain('src/domain/outcome-rules.ts');
    expect(files.length, files.join('\n')).toBeLessThanOrEqual(24);
  });

  // 22 at the end of issue 28, 24 with issue 29 (the kinds' rules and the outcome body's kind
  // fields), 26 with issue 30 (who the request is, and the caller it may report as), 27 with
  // issue 31 (the history entry's codec, domain/history.ts; its table is in the store's file).
  it('finds the outcome that trips its circuit running in at most 27 files of src/', async () => {
    const files = await flowFiles('outcome');
    expect(files).toContain('src/store/sqlite/circuit-store.ts');
    expect(files.length, files.join('\n')).toBeLessThanOrEqual(27);
  });
});
