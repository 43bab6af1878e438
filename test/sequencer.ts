import fs from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Longest files first, by the durations a full run recorded (test/durations.json, written by
 * `VITEST_DURATIONS_OUT=test/durations.json npm test` through the slowest-files reporter).
 * On a fresh clone vitest has no cache of its own and runs larger files first; a small file that
 * takes a minute (the Python client's suite) could then start last and hold the run open on
 * one worker while the other idles. Files with no recorded duration (new, or quick enough not
 * to be listed) follow in vitest's order; each project keeps its place (projects run one after
 * another).
 */
export default class DurationSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const durations = readDurations();
    const key = (spec: TestSpecification) =>
      `${spec.project.name}:${path.relative(spec.project.config.root, spec.moduleId).split(path.sep).join('/')}`;
    const rank = (spec: TestSpecification) => durations[key(spec)] ?? -1; // unknown: after the recorded ones, in vitest's order
    const projects = [...new Set(sorted.map((s) => s.project.name))];
    const out = projects.flatMap(
      (name) => sorted.filter((s) => s.project.name === name).sort((a, b) => rank(b) - rank(a)), // stable: ties keep vitest's order
    );
    if (process.env.CIRCUITLOG_TEST_ORDER) console.error(`test order: ${out.map(key).join(' ')}`);
    return out;
  }
}

function readDurations(): Record<string, number> {
  try {
    return JSON.parse(fs.readFileSync(path.join(import.meta.dirname, 'durations.json'), 'utf8')) as Record<
      string,
      number
    >;
  } catch {
    return {};
  }
}
