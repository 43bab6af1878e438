/**
 * The Node client as a package of its own (clients/node, `@circuitlog/client`), tried as a
 * new user would: `npm pack`, then install the tarball into fresh projects outside the
 * repository (ES module and CommonJS), check that nothing but undici came along and no
 * install script (no native build) ran, type-check consumers under `moduleResolution`
 * node16, bundler and node, and make a call against the real server from each runtime.
 * The install time is measured and printed (a number to report, not an assertion).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const run = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const REPO = process.cwd();
const PACKAGE_DIR = path.join(REPO, 'clients/node');

let server: ServerProcess;
let tarball: string;
let packedFiles: string[];
let tarballBytes: number;
const projects: Record<'esm' | 'cjs', string> = { esm: '', cjs: '' };
const installSeconds: Record<string, number> = {};

/** `npm install` of the tarball into a fresh project; returns its directory. */
async function freshProject(type: 'module' | 'commonjs'): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `circuitlog-client-${type}-`));
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: `consumer-${type}`, version: '1.0.0', private: true, type }),
  );
  const started = performance.now();
  await run(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], {
    cwd: dir,
    timeout: 90_000,
  });
  installSeconds[type] = (performance.now() - started) / 1000;
  return dir;
}

beforeAll(async () => {
  server = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
  const packDir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-pack-'));
  // prepack builds dist/ from src/client and src/domain (clients/node/build.mjs).
  const { stdout } = await run(NPM, ['pack', '--json', '--pack-destination', packDir], {
    cwd: PACKAGE_DIR,
    timeout: 120_000,
  });
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as {
    filename: string;
    size: number;
    files: { path: string }[];
  }[];
  tarball = path.join(packDir, packed!.filename);
  tarballBytes = packed!.size;
  packedFiles = packed!.files.map((f) => f.path);
  projects.esm = await freshProject('module');
  projects.cjs = await freshProject('commonjs');
  console.log(
    `@circuitlog/client install from tarball: ESM project ${installSeconds.module!.toFixed(2)} s, CommonJS project ${installSeconds.commonjs!.toFixed(2)} s`,
  );
}, 240_000);

afterAll(async () => {
  await server?.stop('SIGKILL');
});

/** Parsed files shared by the four type-checks (@types/node is most of the work). */
const parsed = new Map<string, ts.SourceFile | undefined>();

/** Type-check `consumer.ts` in `dir` with these options; answers the errors and the client .d.ts files used. */
function typecheck(dir: string, options: ts.CompilerOptions): { errors: string[]; typesFrom: string[] } {
  const file = path.join(dir, 'consumer.ts');
  const all: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    // As most projects do; a broken .d.ts still shows, as the @ts-expect-error below turning unused.
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    types: ['node'],
    typeRoots: [path.join(REPO, 'node_modules/@types')],
    ...options,
  };
  const host = ts.createCompilerHost(all);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, onError, fresh) => {
    const key = `${name}|${JSON.stringify(version)}`;
    if (name === file || !parsed.has(key)) parsed.set(key, read(name, version, onError, fresh));
    return parsed.get(key);
  };
  const program = ts.createProgram([file], all, host);
  const errors = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  const typesFrom = program
    .getSourceFiles()
    .map((f) => f.fileName)
    .filter((f) => f.includes('@circuitlog/client/dist/') && f.endsWith('/client/index.d.ts'))
    .map((f) => f.slice(f.indexOf('dist/')));
  return { errors, typesFrom };
}

const CONSUMER_TS = `import { CircuitOpenError, createClient, type CircuitlogClient, type ClientOptions } from '@circuitlog/client';
const options: ClientOptions = { url: 'http://127.0.0.1:8080', failOpen: true };
export function use(client: CircuitlogClient = createClient(options)): Promise<number> {
  const fallback: Promise<number | string> = client.call('users-api/get', async () => 1, { fallback: () => 'cached' });
  // @ts-expect-error the result is a number, not a string
  const wrong: Promise<string> = client.call('users-api/get', async () => 1);
  void [fallback, wrong, CircuitOpenError];
  return client.call('users-api/get', async (signal: AbortSignal) => (signal.aborted ? 0 : 1), { timeoutMs: 2000 });
}
`;

/** A call on a fresh circuit, a failure that opens it, a refusal, then close(): printed as JSON. */
const scriptBody = (url: string, circuit: string) => `
const breakers = createClient({ url: ${JSON.stringify(url)} });
const first = await breakers.call(${JSON.stringify(circuit)}, async () => 'ran');
let refused = null;
try { await breakers.call(${JSON.stringify(circuit)}, async () => { throw new Error('boom'); }); } catch (e) { refused = e.message; }
await breakers.close();
console.log(JSON.stringify({ first, refused, isOpenError: typeof CircuitOpenError === 'function' }));
`;

describe('@circuitlog/client (clients/node) packed and installed as a user would', () => {
  it('packs a tarball of the size docs/client.md states (within 15%)', () => {
    const docs = fs.readFileSync(path.join(REPO, 'docs/client.md'), 'utf8');
    const stated = /circuitlog-client-[\d.]+\.tgz \(about (\d+) kB\)/.exec(docs);
    expect(stated, 'docs/client.md names the tarball and its size').not.toBeNull();
    const kB = tarballBytes / 1000;
    expect(Math.abs(kB - Number(stated![1])) / kB, `packed ${kB.toFixed(1)} kB`).toBeLessThanOrEqual(0.15);
  });

  it('packs only the built JavaScript, its types, README and package.json', () => {
    expect(packedFiles).toContain('dist/esm/client/index.js');
    expect(packedFiles).toContain('dist/cjs/client/index.d.ts');
    expect(packedFiles).toContain('dist/esm/domain/circuit.js'); // the domain, built from src/domain
    const stray = packedFiles.filter(
      (f) => !/^(dist\/(esm|cjs)\/.+\.(js|d\.ts)|dist\/(esm|cjs)\/package\.json|README\.md|package\.json)$/.test(f),
    );
    expect(stray).toEqual([]);
    expect(packedFiles.some((f) => f.includes('/server/') || f.includes('/store/') || f.includes('/http/'))).toBe(
      false,
    );
  });

  it('installs undici and nothing else, with no install script and no native build', () => {
    for (const dir of Object.values(projects)) {
      const lock = JSON.parse(fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { hasInstallScript?: boolean }>;
      };
      expect(Object.keys(lock.packages).sort()).toEqual(['', 'node_modules/@circuitlog/client', 'node_modules/undici']);
      expect(Object.values(lock.packages).filter((p) => p.hasInstallScript === true)).toEqual([]);
      const binaries = fs
        .readdirSync(path.join(dir, 'node_modules'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.node') || f.includes('build/Release'));
      expect(binaries).toEqual([]);
    }
    expect(Object.keys(installSeconds).sort()).toEqual(['commonjs', 'module']);
  });

  it('calls the real server from an ES module (import)', async () => {
    fs.writeFileSync(
      path.join(projects.esm, 'index.mjs'),
      `import { createClient, CircuitOpenError } from '@circuitlog/client';\n${scriptBody(server.url, 'pkg/esm')}`,
    );
    const { stdout } = await run(process.execPath, ['index.mjs'], { cwd: projects.esm, timeout: 20_000 });
    expect(JSON.parse(stdout)).toEqual({ first: 'ran', refused: 'boom', isOpenError: true });
    const circuit = (await (await fetch(`${server.url}/circuits/pkg%2Fesm`)).json()) as { failure_count: number };
    expect(circuit.failure_count).toBe(1);
  });

  it('calls the real server from CommonJS (require)', async () => {
    const body = scriptBody(server.url, 'pkg/cjs');
    fs.writeFileSync(
      path.join(projects.cjs, 'index.cjs'),
      `const { createClient, CircuitOpenError } = require('@circuitlog/client');\n(async () => {${body}})();`,
    );
    const { stdout } = await run(process.execPath, ['index.cjs'], { cwd: projects.cjs, timeout: 20_000 });
    expect(JSON.parse(stdout)).toEqual({ first: 'ran', refused: 'boom', isOpenError: true });
    const circuit = (await (await fetch(`${server.url}/circuits/pkg%2Fcjs`)).json()) as { failure_count: number };
    expect(circuit.failure_count).toBe(1);
  });

  it.each([
    ['module', 'node16', 'esm', { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }],
    ['module', 'bundler', 'esm', { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler }],
    ['commonjs', 'node16', 'cjs', { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }],
    ['commonjs', 'node', 'cjs', { module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10 }],
  ] as const)(
    'type-checks a consumer in a %s project with moduleResolution %s, from the %s types',
    (type, _resolution, tree, options) => {
      const dir = type === 'module' ? projects.esm : projects.cjs;
      fs.writeFileSync(path.join(dir, 'consumer.ts'), CONSUMER_TS);
      const { errors, typesFrom } = typecheck(dir, options);
      expect(errors).toEqual([]);
      expect(typesFrom).toEqual([`dist/${tree}/client/index.d.ts`]);
    },
  );
});
