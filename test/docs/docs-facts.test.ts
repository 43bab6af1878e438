import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import type { CircuitPolicy } from '../../src/domain/policy.js';
import { policyToWire } from '../../src/domain/policy-wire.js';
import { policyFields } from '../../src/policy-schema.js';

// Facts the docs state that the code can check: the package names their imports use, and
// how many policy fields there are.

const read = (file: string) => fs.readFileSync(file, 'utf8');
const json = (file: string) => JSON.parse(read(file)) as { name: string; exports?: Record<string, unknown> };

/** Every file under a directory (recursively) whose name ends with one of `exts`. */
function filesUnder(dir: string, exts: string[]): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => exts.some((ext) => f.endsWith(ext)))
    .map((f) => path.join(dir, f));
}

const DOCS = ['README.md', 'clients/node/README.md', 'clients/python/README.md', ...filesUnder('docs', ['.md'])];
const EXAMPLES = filesUnder('examples', ['.mjs', '.js', '.cjs', '.ts']);

/** The module specifiers of `import ... from`, `import(...)` and `require(...)` in a text. */
function jsSpecifiers(text: string): string[] {
  return [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\brequire\s*\(\s*|^import\s+)['"]([^'"]+)['"]/gm)].map(
    (m) => m[1]!,
  );
}

/** A bare specifier's package name (`@scope/name` or `name`); null for relative paths and Node's own modules. */
function packageOf(specifier: string): string | null {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return null;
  if (builtinModules.includes(specifier)) return null;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

const clientPackage = json('clients/node/package.json').name;
const serverPackage = json('package.json');

describe('package names in examples/ and the docs', () => {
  it('examples/ import the Node client by its package name, @circuitlog/client, and nothing else of ours', () => {
    expect(clientPackage).toBe('@circuitlog/client');
    const wrong = EXAMPLES.flatMap((file) =>
      jsSpecifiers(read(file))
        .filter((s) => packageOf(s) !== null && s !== clientPackage)
        .map((s) => `${file}: ${s}`),
    );
    expect(wrong).toEqual([]);
    expect(EXAMPLES.some((file) => jsSpecifiers(read(file)).includes(clientPackage))).toBe(true);
  });

  it("the docs import only @circuitlog/client, or the server package's own exports (circuitlog/client)", () => {
    const serverExports = Object.keys(serverPackage.exports ?? {}).map((sub) => `${serverPackage.name}${sub.slice(1)}`);
    const wrong = DOCS.flatMap((file) =>
      jsSpecifiers(read(file))
        .filter((s) => packageOf(s) !== null && s !== clientPackage && !serverExports.includes(s))
        .map((s) => `${file}: ${s}`),
    );
    expect(wrong).toEqual([]);
  });

  it('Python imports in the docs name the Python package that clients/python builds', () => {
    const project = /^\[project\][^[]*?^name = "([^"]+)"/ms.exec(read('clients/python/pyproject.toml'))![1]!;
    expect(fs.existsSync(path.join('clients/python/src', project))).toBe(true);
    const wrong = DOCS.flatMap((file) =>
      [...read(file).matchAll(/^\s*(?:from|import)\s+(circuitlog\w*)/gm)]
        .map((m) => m[1]!)
        .filter((name) => name !== project)
        .map((name) => `${file}: ${name}`),
    );
    expect(wrong).toEqual([]);
  });
});

const NUMBER_WORDS = [
  'zero',
  'one',
  'two',
  'three',
  'four',
  'five',
  'six',
  'seven',
  'eight',
  'nine',
  'ten',
  'eleven',
  'twelve',
];

describe('the policy fields the docs count', () => {
  const fields = Object.keys(policyFields);

  it("are the policy wire's fields (policy-wire.ts), every one in docs/api.md's table", () => {
    const policy: CircuitPolicy = {
      ...POLICY_DEFAULTS.circuit,
      quorum: { minCallers: 2, windowSeconds: 60, maxCallers: 100 },
    };
    const wire = policyToWire(policy, true);
    expect(Object.keys(wire).sort()).toEqual([...fields].sort());
    const api = read('docs/api.md');
    const table = api.slice(api.indexOf('## Policy fields'), api.indexOf('## Soft throttling'));
    const rows = [...table.matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]!);
    expect(rows).toEqual(fields);
  });

  it('are counted right wherever the docs say how many there are', () => {
    const counts = DOCS.flatMap((file) =>
      [...read(file).matchAll(/\b(\w+) policy fields\b/gi)]
        .map((m) => m[1]!.toLowerCase())
        .filter((word) => NUMBER_WORDS.includes(word) || /^\d+$/.test(word))
        .map((word) => ({ file, word })),
    );
    expect(counts.length).toBeGreaterThan(0);
    const expected = NUMBER_WORDS[fields.length];
    expect(counts.filter(({ word }) => word !== expected && word !== String(fields.length))).toEqual([]);
  });
});

describe("docs/api.md's table of errors", () => {
  it('lists each status and code once', () => {
    const api = read('docs/api.md');
    const table = api.slice(api.indexOf('## Errors'));
    const rows = [...table.matchAll(/^\| (\d{3}) \| (`[A-Z_]+`(?: \/ `[A-Z_]+`)*) \|/gm)].map((m) => `${m[1]} ${m[2]}`);
    expect(rows.length).toBeGreaterThan(10);
    expect(rows.filter((row, i) => rows.indexOf(row) !== i)).toEqual([]);
  });
});

describe('.gitignore', () => {
  it("ignores npm pack's tarballs (the client's and the server package's)", () => {
    const clientTarball = `clients/node/${clientPackage.slice(1).replace('/', '-')}-0.1.0.tgz`;
    const result = spawnSync('git', ['check-ignore', '--no-index', clientTarball, 'circuitlog-0.1.0.tgz'], {
      encoding: 'utf8',
    });
    expect(result.stdout.trim().split('\n')).toEqual([clientTarball, 'circuitlog-0.1.0.tgz']);
  });
});
