// Issue 29: the Python client's `_domain.py` mirrors `src/domain/outcome-kind.ts` (kindOfStatus,
// retryAfterSeconds, rampPercent, rampAdmits). The same inputs through both, compared whole.
// `.venv-python/` is made by scripts/provision.mjs (`pretest`); without it this fails with the command.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { rampAdmits, rampPercent } from '../../src/domain/outcome-kind.js';
import { kindOfStatus, retryAfterSeconds } from '../../src/domain/outcome-rules.js';

const root = path.resolve(import.meta.dirname, '../..');
const python = path.join(root, '.venv-python', 'bin', 'python');
const NOW = Date.parse('2030-01-01T00:00:00Z');

const RETRY_AFTERS = [
  null,
  '',
  '0',
  '7',
  ' 120 ',
  '1.5',
  '-1',
  '12345678901',
  'soon',
  '2030-01-01T00:00:30Z',
  'Tue, 01 Jan 2030 00:00:30 GMT',
  'Tue, 01 Jan 2030 00:00:29 GMT',
  'tue, 01 jan 2030 00:01:00 gmt',
  'Tue, 1 Jan 2030 00:00:30 GMT',
  'Tue, 01 Jan 2030 01:00:30 +0100',
  'Tuesday, 01-Jan-30 00:00:30 GMT',
  'Sun, 06 Nov 1994 08:49:37 GMT',
  'Mon, 31 Feb 2030 00:00:00 GMT',
  'Wed, 99 Oct 2015 07:28:00 GMT',
  'Tue Jan  1 00:00:30 2030',
  'Tue, 01 Foo 2030 00:00:30 GMT',
];
const STATUSES = [
  100, 200, 204, 301, 304, 400, 401, 403, 404, 408, 409, 422, 429, 499, 500, 501, 502, 503, 504, 505, 599,
];
const RAMPS: [number | null, number, number, number][] = [
  [null, 10, 10, NOW],
  [NOW + 10_000, 10, 10, NOW],
  [NOW + 10_000, 10, 10, NOW - 5_000],
  [NOW + 10_000, 10, 10, NOW + 2_500],
  [NOW + 10_000, 10, 25, NOW + 9_999],
  [NOW + 10_000, 10, 10, NOW + 10_000],
  [NOW + 3_600_000, 3600, 1, NOW + 1_800_000],
];
const DRAWS: [number, number][] = [
  [10, 0.05],
  [10, 0.1],
  [55, 0.5499],
  [55, 0.55],
  [100, 0.9999],
  [0, 0],
];

function typescript() {
  return {
    retry_after: RETRY_AFTERS.map((v) => retryAfterSeconds(v, NOW)),
    kinds: STATUSES.flatMap((s) =>
      RETRY_AFTERS.map((v) => {
        const c = kindOfStatus(s, v, NOW);
        return [c.kind, c.retryAfterSeconds ?? null];
      }),
    ),
    ramp: RAMPS.map(([until, seconds, start, now]) => rampPercent(until, seconds, start, now)),
    draws: DRAWS.map(([p, r]) => rampAdmits(p, r)),
  };
}

const SCRIPT = `
import json, sys
from circuitlog import _domain as d
i = json.load(sys.stdin)
now = i["now"]
print(json.dumps({
    "retry_after": [d.retry_after_seconds(v, now) for v in i["retry_afters"]],
    "kinds": [list(d.kind_of_status(s, v, now)) for s in i["statuses"] for v in i["retry_afters"]],
    "ramp": [d.ramp_percent(*r) for r in i["ramps"]],
    "draws": [d.ramp_admits(p, r) for p, r in i["draws"]],
}))
`;

describe('the Python mirror of outcome-kind.ts', () => {
  it('gives the same kind, Retry-After seconds, ramp share and draw for the same inputs', () => {
    if (!fs.existsSync(python))
      throw new Error(`${python} missing: run \`node scripts/provision.mjs\` (npm test does)`);
    const input = { now: NOW, retry_afters: RETRY_AFTERS, statuses: STATUSES, ramps: RAMPS, draws: DRAWS };
    const run = spawnSync(python, ['-c', SCRIPT], {
      cwd: path.join(root, 'clients', 'python'),
      input: JSON.stringify(input),
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.stderr).toBe('');
    const fromPython = JSON.parse(run.stdout) as ReturnType<typeof typescript>;
    const fromTs = typescript();
    // One input at a time, so a mismatch names it.
    expect(Object.fromEntries(RETRY_AFTERS.map((v, i) => [String(v), fromPython.retry_after[i]]))).toEqual(
      Object.fromEntries(RETRY_AFTERS.map((v, i) => [String(v), fromTs.retry_after[i]])),
    );
    expect(fromPython).toEqual(fromTs);
  });
});
