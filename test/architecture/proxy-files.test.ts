import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseImports, sourceFiles } from './import-rules.js';

// The files of src/proxy/ import each other in one direction only (type-only imports
// included): a loop of files is one room cut in two, and the proxy's headers, errors and
// upstream table sit below what uses them.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const files = sourceFiles(root).filter((f) => f.startsWith('src/proxy/'));
const imports = new Map(
  files.map((file) => [
    file,
    parseImports(file, fs.readFileSync(path.join(root, file), 'utf8')).flatMap((e) =>
      e.target?.startsWith('src/proxy/') ? [e.target] : [],
    ),
  ]),
);

/** One import path from `from` back to `to` inside src/proxy/, or null. */
function pathBetween(from: string, to: string): string[] | null {
  const seen = new Set<string>([from]);
  const queue: string[][] = [[from]];
  while (queue.length > 0) {
    const trail = queue.shift()!;
    for (const next of imports.get(trail.at(-1)!) ?? []) {
      if (next === to) return [...trail, next];
      if (seen.has(next)) continue;
      seen.add(next);
      queue.push([...trail, next]);
    }
  }
  return null;
}

describe('files of src/proxy/', () => {
  it('form no import circle', () => {
    const circles = files.flatMap((file) => {
      const back = pathBetween(file, file);
      return back === null ? [] : [back.join(' -> ')];
    });
    expect(files.length).toBeGreaterThan(20);
    expect(circles).toEqual([]);
  });
});
