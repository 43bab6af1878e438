/**
 * The house's import rules, as data plus a checker (used by imports.test.ts).
 *
 * Nodes: every top-level folder of src/ (`domain`, `store`, `http`, ...) is one node, and every
 * file directly in src/ (`main.ts`, `app.ts`, `config.ts`, ...) is a node of its own, named by its
 * file name. Imports between nodes must form no cycle, and neither may imports between files.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** One import statement (or `export ... from`, or `import()`), as written in `file`. */
export interface ImportEdge {
  /** Importing file, relative to the repo root with `/` separators: `src/store/database.ts`. */
  file: string;
  /** 1-based line of the import. */
  line: number;
  /** The specifier as written: `'../domain/types.js'`, `'node:fs'`. */
  specifier: string;
  /** For a relative specifier: the imported file (`src/domain/types.ts`); `null` for a package. */
  target: string | null;
}

export interface Violation {
  file: string;
  line: number;
  specifier: string;
  rule: string;
}

/** A folder that may import only itself, the folders listed, and the npm packages listed. */
interface FolderRule {
  folder: string;
  mayImportFolders: string[];
  /** Package names (`better-sqlite3`, `@redis/client`); `node:*` stands for every Node built-in. */
  mayImportPackages: string[];
  why: string;
}

/**
 * What each guarded folder may import. Folders not named here (http, proxy, service, observe,
 * server, dashboard and the root files) are free apart from the no-cycle rule.
 */
export const FOLDER_RULES: FolderRule[] = [
  {
    folder: 'domain',
    mayImportFolders: [],
    mayImportPackages: [],
    why: 'src/domain is pure: it imports nothing outside src/domain (no node:, no npm package)',
  },
  {
    folder: 'store',
    mayImportFolders: ['domain'],
    // The drivers, Node built-ins, and pino's Logger type (the logger is injected). zod is allowed
    // for one edge only: what a shared Redis hands back is outside input (another host's write, a
    // hand edit), validated on read (src/store/redis/stored-circuit.ts). HTTP (hono) is not.
    mayImportPackages: ['node:*', 'better-sqlite3', '@redis/client', 'pino', 'zod'],
    why: 'src/store imports only src/domain and its drivers (node:*, better-sqlite3, @redis/client, pino; zod to validate Redis answers)',
  },
  {
    folder: 'client',
    mayImportFolders: ['domain'],
    // The client library ships to callers: its HTTP client and Node built-ins, nothing of the server.
    mayImportPackages: ['node:*', 'undici'],
    why: 'src/client imports only src/domain and node:*, undici (nothing of the server)',
  },
];

/** A folder of src/ whose files directly in it may not import the folders listed (its sub-folders, or a sibling). */
interface SubfolderRule {
  /** Repo-relative folder: the rule applies to files directly in it, not in its sub-folders. */
  folder: string;
  mayNotImport: string[];
  why: string;
}

/** The stores sit below their port: `src/store/` names neither store, and the two stores never import each other. */
export const SUBFOLDER_RULES: SubfolderRule[] = [
  {
    folder: 'src/store',
    mayNotImport: ['src/store/redis', 'src/store/sqlite'],
    why: 'src/store (the port and what every store shares) imports neither src/store/redis nor src/store/sqlite',
  },
  {
    folder: 'src/store/redis',
    mayNotImport: ['src/store/sqlite'],
    why: 'src/store/redis does not import src/store/sqlite',
  },
  {
    folder: 'src/store/sqlite',
    mayNotImport: ['src/store/redis'],
    why: 'src/store/sqlite does not import src/store/redis',
  },
];

/** The node a src/ file belongs to: its top-level folder, or its own file name for a root file. */
export function nodeOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] !== 'src' || parts.length < 2) throw new Error(`not a src/ file: ${file}`);
  return parts[1] as string;
}

/** The package an import names: `@hono/zod-openapi/x` -> `@hono/zod-openapi`, `node:fs/promises` -> `node:*`. */
export function packageOf(specifier: string): string {
  if (specifier.startsWith('node:')) return 'node:*';
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
}

/** Every `src/**\/*.ts` file under `root`, as repo-relative paths. */
export function sourceFiles(root: string): string[] {
  const entries = fs.readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' });
  return entries
    .filter((entry) => entry.endsWith('.ts'))
    .map((entry) => `src/${entry.split(path.sep).join('/')}`)
    .sort();
}

/** The imports of one file's text, parsed by the TypeScript scanner (static, `export from`, `import()`). */
export function parseImports(file: string, text: string): ImportEdge[] {
  const info = ts.preProcessFile(text, true, true);
  return info.importedFiles.map((ref) => {
    const line = text.slice(0, ref.pos).split('\n').length;
    const specifier = ref.fileName;
    if (!specifier.startsWith('.')) return { file, line, specifier, target: null };
    const joined = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
    return { file, line, specifier, target: joined.replace(/\.js$/, '.ts') };
  });
}

/** Relative imports that name no file in the tree (a parser or resolver slip would hide violations). */
export function unresolved(edges: ImportEdge[], files: Set<string>): Violation[] {
  return edges
    .filter((edge) => edge.target !== null && !edge.target.endsWith('.json') && !files.has(edge.target))
    .map((edge) => ({ ...edge, rule: `relative import resolves to no src/ file (${edge.target})` }));
}

/** Imports that break a folder rule. */
export function folderViolations(edges: ImportEdge[], rules = FOLDER_RULES): Violation[] {
  const out: Violation[] = [];
  for (const edge of edges) {
    const rule = rules.find((r) => nodeOf(edge.file) === r.folder);
    if (rule === undefined) continue;
    const allowed =
      edge.target === null
        ? rule.mayImportPackages.includes(packageOf(edge.specifier))
        : edge.target.startsWith('src/') && [rule.folder, ...rule.mayImportFolders].includes(nodeOf(edge.target));
    if (!allowed) out.push({ file: edge.file, line: edge.line, specifier: edge.specifier, rule: rule.why });
  }
  return out;
}

/** Imports that break a sub-folder rule. */
export function subfolderViolations(edges: ImportEdge[], rules = SUBFOLDER_RULES): Violation[] {
  const out: Violation[] = [];
  for (const edge of edges) {
    const rule = rules.find((r) => path.posix.dirname(edge.file) === r.folder);
    if (rule === undefined || edge.target === null) continue;
    const target = edge.target;
    if (rule.mayNotImport.some((folder) => target.startsWith(`${folder}/`)))
      out.push({ file: edge.file, line: edge.line, specifier: edge.specifier, rule: rule.why });
  }
  return out;
}

/**
 * Cycles between files (type-only imports and re-exports included): each strongly connected set
 * of two or more files, sorted, with the imports that form it.
 */
export function fileCycles(edges: ImportEdge[]): { files: string[]; imports: ImportEdge[] }[] {
  const within = edges.filter((e) => e.target?.startsWith('src/') === true && e.target !== e.file);
  const graph = new Map<string, Set<string>>();
  for (const e of within) {
    if (!graph.has(e.file)) graph.set(e.file, new Set());
    graph.get(e.file)?.add(e.target as string);
  }
  return stronglyConnected(graph)
    .filter((set) => set.length > 1)
    .map((set) => ({
      files: set.sort(),
      imports: within.filter((e) => set.includes(e.file) && set.includes(e.target as string)),
    }))
    .sort((a, b) => (a.files[0] as string).localeCompare(b.files[0] as string));
}

/** Cycles between nodes: each strongly connected set of two or more nodes, with the imports that form it. */
export function nodeCycles(edges: ImportEdge[]): { nodes: string[]; imports: ImportEdge[] }[] {
  const between = edges.filter((e) => e.target?.startsWith('src/') === true && nodeOf(e.file) !== nodeOf(e.target));
  const graph = new Map<string, Set<string>>();
  for (const e of between) {
    const from = nodeOf(e.file);
    if (!graph.has(from)) graph.set(from, new Set());
    graph.get(from)?.add(nodeOf(e.target as string));
  }
  return stronglyConnected(graph)
    .filter((set) => set.length > 1)
    .map((set) => ({
      nodes: set.sort(),
      imports: between.filter((e) => set.includes(nodeOf(e.file)) && set.includes(nodeOf(e.target as string))),
    }));
}

/** Tarjan's strongly connected components. */
function stronglyConnected(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) === index.get(v)) {
      const set: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        set.push(w);
      } while (w !== v);
      out.push(set);
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

/** One line per violation: `src/store/x.ts:2 imports 'zod': <rule>`. */
export function formatViolations(violations: Violation[]): string {
  return violations.map((v) => `${v.file}:${v.line} imports '${v.specifier}': ${v.rule}`).join('\n');
}
