import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  type ImportEdge,
  fileCycles,
  folderViolations,
  formatViolations,
  nodeCycles,
  parseImports,
  sourceFiles,
  subfolderViolations,
  unresolved,
} from './import-rules.js';

// The import-boundary test: the layer rules of docs/design.md, checked on every src/**/*.ts import.
// Rules and node definitions live in ./import-rules.ts (FOLDER_RULES, nodeOf).

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const files = sourceFiles(root);
const edges = files.flatMap((file) => parseImports(file, fs.readFileSync(path.join(root, file), 'utf8')));

// Circles of files known to remain, each as its sorted files (none since issue 28 item 2 landed).
const KNOWN_FILE_CYCLES: string[][] = [];

/** One paragraph per cycle: what it ties, then each import that forms it. */
function cycleReport(title: string, cycles: { members: string[]; imports: ImportEdge[] }[]): string {
  return cycles
    .map(
      (c) =>
        `${title} ${c.members.join(', ')}:\n` +
        c.imports.map((e) => `  ${e.file}:${e.line} imports '${e.specifier}'`).join('\n'),
    )
    .join('\n');
}

describe('import boundaries of src/', () => {
  it('reads the imports of every source file, each relative one naming a file that exists', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(edges.length).toBeGreaterThan(files.length);
    expect(formatViolations(unresolved(edges, new Set(files)))).toBe('');
  });

  it('keeps src/domain, src/store and src/client within what each may import', () => {
    expect(formatViolations(folderViolations(edges))).toBe('');
  });

  it('has no import cycle between top-level folders and root files of src/', () => {
    expect(
      cycleReport(
        'cycle between',
        nodeCycles(edges).map((c) => ({ ...c, members: c.nodes })),
      ),
    ).toBe('');
  });

  it('keeps src/store/ above its two stores, and the stores apart from each other', () => {
    expect(formatViolations(subfolderViolations(edges))).toBe('');
  });

  it('has no two files of src/ importing each other, directly or round a longer circle (type-only imports too)', () => {
    const known = (files: string[]) => KNOWN_FILE_CYCLES.some((k) => k.join() === files.join());
    const cycles = fileCycles(edges);
    const unknown = cycles.filter((c) => !known(c.files)).map((c) => ({ ...c, members: c.files }));
    expect(cycleReport('files importing each other:', unknown)).toBe('');
    // A known circle that is gone leaves the list, so that it cannot come back unnoticed.
    expect(KNOWN_FILE_CYCLES.filter((k) => !cycles.some((c) => c.files.join() === k.join()))).toEqual([]);
  });
});

describe('the import checker', () => {
  const edge = (file: string, specifier: string): ImportEdge =>
    parseImports(file, `import x from '${specifier}';\n`)[0] as ImportEdge;

  it('parses static, type-only, re-export and dynamic imports with their lines', () => {
    const text = [
      "import type { A } from './a.js';",
      "export { b } from '../store/b.js';",
      "const c = await import('node:fs');",
      "import d from '@hono/zod-openapi';",
    ].join('\n');
    expect(parseImports('src/domain/x.ts', text)).toEqual([
      { file: 'src/domain/x.ts', line: 1, specifier: './a.js', target: 'src/domain/a.ts' },
      { file: 'src/domain/x.ts', line: 2, specifier: '../store/b.js', target: 'src/store/b.ts' },
      { file: 'src/domain/x.ts', line: 3, specifier: 'node:fs', target: null },
      { file: 'src/domain/x.ts', line: 4, specifier: '@hono/zod-openapi', target: null },
    ]);
  });

  it('reports the file, the import and the rule it breaks', () => {
    const found = folderViolations([
      edge('src/domain/circuit.ts', 'node:crypto'),
      edge('src/domain/circuit.ts', './types.js'),
      edge('src/store/redis/x.ts', 'hono'),
      edge('src/store/redis/x.ts', 'zod'),
      edge('src/store/redis/x.ts', '../../http/problem.js'),
      edge('src/store/redis/x.ts', '@redis/client'),
      edge('src/store/x.ts', '../domain/types.js'),
      edge('src/client/x.ts', '../config.js'),
      edge('src/client/x.ts', 'undici'),
      edge('src/http/x.ts', 'zod'),
    ]);
    expect(formatViolations(found).split('\n')).toEqual([
      "src/domain/circuit.ts:1 imports 'node:crypto': src/domain is pure: it imports nothing outside src/domain (no node:, no npm package)",
      "src/store/redis/x.ts:1 imports 'hono': src/store imports only src/domain and its drivers (node:*, better-sqlite3, @redis/client, pino; zod to validate Redis answers)",
      "src/store/redis/x.ts:1 imports '../../http/problem.js': src/store imports only src/domain and its drivers (node:*, better-sqlite3, @redis/client, pino; zod to validate Redis answers)",
      "src/client/x.ts:1 imports '../config.js': src/client imports only src/domain and node:*, undici (nothing of the server)",
    ]);
  });

  it('finds a cycle through a root file and names the imports that close it', () => {
    const cycles = nodeCycles([
      edge('src/http/a.ts', '../observe/b.js'),
      edge('src/observe/b.ts', '../config.js'),
      edge('src/config.ts', './http/c.js'),
      edge('src/store/d.ts', '../domain/e.js'),
      edge('src/main.ts', './store/d.js'),
    ]);
    expect(cycles.map((c) => c.nodes)).toEqual([['config.ts', 'http', 'observe']]);
    expect(cycles[0]?.imports.map((e) => e.file)).toEqual(['src/http/a.ts', 'src/observe/b.ts', 'src/config.ts']);
  });

  it('finds a circle of files through a type-only import and a re-export, and names the imports that close it', () => {
    const text = (...lines: string[]) => lines.join('\n');
    const cycles = fileCycles([
      ...parseImports('src/domain/a.ts', text("import type { B } from './b.js';")),
      ...parseImports('src/domain/b.ts', text("export { c } from './c.js';", "import { d } from './d.js';")),
      ...parseImports('src/domain/c.ts', text("import { a } from './a.js';")),
      ...parseImports('src/domain/d.ts', text("import type { C } from './c.js';")),
      ...parseImports('src/http/e.ts', text("import { a } from '../domain/a.js';")),
    ]);
    expect(cycles.map((c) => c.files)).toEqual([
      ['src/domain/a.ts', 'src/domain/b.ts', 'src/domain/c.ts', 'src/domain/d.ts'],
    ]);
    expect(cycles[0]?.imports.map((e) => `${e.file}:${e.line}`)).toEqual([
      'src/domain/a.ts:1',
      'src/domain/b.ts:1',
      'src/domain/b.ts:2',
      'src/domain/c.ts:1',
      'src/domain/d.ts:1',
    ]);
  });

  it('reports a store/ file importing a store, and one store importing the other', () => {
    const found = subfolderViolations([
      edge('src/store/store-choice.ts', './redis/tls-url.js'),
      edge('src/store/circuit-store.ts', './sqlite/database.js'),
      edge('src/store/redis/x.ts', '../sqlite/y.js'),
      edge('src/store/sqlite/x.ts', '../redis/y.js'),
      edge('src/store/redis/x.ts', '../circuit-store.js'),
      edge('src/store/sqlite/x.ts', '../../domain/types.js'),
      edge('src/config/store-choice.ts', '../store/redis/tls-url.js'),
    ]);
    expect(formatViolations(found).split('\n')).toEqual([
      "src/store/store-choice.ts:1 imports './redis/tls-url.js': src/store (the port and what every store shares) imports neither src/store/redis nor src/store/sqlite",
      "src/store/circuit-store.ts:1 imports './sqlite/database.js': src/store (the port and what every store shares) imports neither src/store/redis nor src/store/sqlite",
      "src/store/redis/x.ts:1 imports '../sqlite/y.js': src/store/redis does not import src/store/sqlite",
      "src/store/sqlite/x.ts:1 imports '../redis/y.js': src/store/sqlite does not import src/store/redis",
    ]);
  });

  it('flags a relative import that names no file', () => {
    const found = unresolved([edge('src/http/a.ts', './gone.js')], new Set(['src/http/a.ts']));
    expect(formatViolations(found)).toBe(
      "src/http/a.ts:1 imports './gone.js': relative import resolves to no src/ file (src/http/gone.ts)",
    );
  });
});
