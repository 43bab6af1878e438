/**
 * The one list of environment variables the server reads. `readEnv` sees the environment
 * through `SettingsEnv`, typed by this list, so it cannot read a name that is not on it; and a
 * `CIRCUITLOG_*` variable that is not on it is a misspelling, warned about at start.
 */
import { STORE_SETTINGS } from './store-choice.js';

export const SETTINGS = [
  'PORT',
  'HOST',
  'CIRCUITLOG_CONFIG',
  'CIRCUITLOG_TOKEN',
  'CIRCUITLOG_CREDENTIALS',
  'CIRCUITLOG_LOG_LEVEL',
  'CIRCUITLOG_SYNCHRONOUS',
  'CIRCUITLOG_GROUP_COMMIT',
  'CIRCUITLOG_WORKERS',
  'CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE',
  ...STORE_SETTINGS,
] as const;

export type Setting = (typeof SETTINGS)[number];

/** The environment as the config reads it: the listed names only. */
export type SettingsEnv = Readonly<Partial<Record<Setting, string>>>;

/**
 * `CIRCUITLOG_*` names other circuitlog programs read from the same environment, so never
 * warned about: the examples' and clients' server URL, and the test suites' own.
 */
const OTHER_PROGRAMS: readonly string[] = ['CIRCUITLOG_URL', 'CIRCUITLOG_SERVER_DIST', 'CIRCUITLOG_TEST_REDIS_URL'];

/** A suggestion is made only this close (edits); farther, it would be a guess. */
const MAX_SUGGESTION_EDITS = 3;

export interface UnknownSetting {
  readonly name: string;
  /** The nearest known name, when one is close enough. */
  readonly suggestion: Setting | undefined;
}

/** Every `CIRCUITLOG_*` variable set (even empty) that the server does not read, in name order. */
export function unknownSettings(env: NodeJS.ProcessEnv): UnknownSetting[] {
  const known = new Set<string>([...SETTINGS, ...OTHER_PROGRAMS]);
  return Object.keys(env)
    .filter((name) => name.startsWith('CIRCUITLOG_') && env[name] !== undefined && !known.has(name))
    .sort()
    .map((name) => ({ name, suggestion: nearestSetting(name) }));
}

/** The one line logged for it; never the value, which may be a token. */
export function describeUnknownSetting({ name, suggestion }: UnknownSetting): string {
  return suggestion === undefined
    ? `${name}: unknown setting (the settings are listed in docs/operations.md#configuration)`
    : `${name}: unknown setting, did you mean ${suggestion}?`;
}

function nearestSetting(name: string): Setting | undefined {
  if (name.length > 100) return undefined; // no setting is that long; and the table grows with it
  let best: Setting | undefined;
  let bestEdits = MAX_SUGGESTION_EDITS + 1;
  for (const setting of SETTINGS) {
    const edits = editDistance(name.toUpperCase(), setting);
    if (edits < bestEdits) [best, bestEdits] = [setting, edits];
  }
  return best;
}

/**
 * Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`: the optimal string
 * alignment distance, the Damerau-Levenshtein variant that counts a swap (`TOEKN`) as one.
 */
export function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
