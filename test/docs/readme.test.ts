import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const read = (file: string) => fs.readFileSync(file, 'utf8');
const README = read('README.md');

describe('README', () => {
  it("names every package `npm test`'s provisioning installs (the list scripts/provision.mjs prints)", () => {
    // With no PATH nothing is found and nothing can be installed: it prints the full command.
    const result = spawnSync(process.execPath, ['scripts/provision.mjs'], {
      encoding: 'utf8',
      env: { PATH: '/nonexistent' },
    });
    const commands = [
      ...result.stderr.matchAll(
        /run as root: apt-get update && apt-get install -y --no-install-recommends ([\w .-]+)\n/g,
      ),
    ];
    const packages = commands.flatMap((command) => command[1]!.trim().split(/\s+/));
    expect(packages.length).toBeGreaterThanOrEqual(6); // the system programs, fonts, and Python
    const provisioning = README.slice(README.indexOf('`npm test` first installs'), README.indexOf('## Worked example'));
    expect(packages.filter((pkg) => !provisioning.includes(`\`${pkg}\``))).toEqual([]);
  });

  it('greps the open gauge so that only state="open" matches, not half_open or closed', () => {
    const grep = /curl -s \$B\/metrics \| grep '([^']+)'/.exec(README)![1]!;
    const exposition = ['closed', 'open', 'half_open']
      .map(
        (state) =>
          `circuitlog_circuit_state{circuit="payment-gateway/charge",state="${state}"} ${state === 'open' ? 1 : 0}`,
      )
      .join('\n');
    const result = spawnSync('grep', [grep], { input: `${exposition}\n`, encoding: 'utf8' });
    expect(result.stdout).toBe('circuitlog_circuit_state{circuit="payment-gateway/charge",state="open"} 1\n');
  });
});

describe('markdown tables in README.md and docs/', () => {
  it('have no blank line inside them (a blank line ends a table; the rows after it show as text)', () => {
    const files = [
      'README.md',
      ...fs
        .readdirSync('docs')
        .filter((f) => f.endsWith('.md'))
        .map((f) => path.join('docs', f)),
    ];
    const broken: string[] = [];
    for (const file of files) {
      const lines = read(file).split('\n');
      for (let i = 1; i + 1 < lines.length; i++) {
        const continuesTable = lines[i + 1]!.startsWith('|') && !/^\|[\s|:-]+\|$/.test(lines[i + 2] ?? ''); // a row, not a new header
        if (lines[i] === '' && lines[i - 1]!.startsWith('|') && continuesTable) broken.push(`${file}:${i + 1}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
