import fs from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

const SHOWN = 10;

/**
 * Prints the ten slowest test files at the end of a run (each file's tests and hooks, per
 * vitest project), so the suite's time budget (10 minutes on 2 cores) has its culprits named,
 * and with VITEST_DURATIONS_OUT every file's, for the sequencer (test/sequencer.ts).
 */
export default class SlowestFilesReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    // With VITEST_DURATIONS_OUT=<file>: every file's duration, for test/sequencer.ts.
    const out = process.env.VITEST_DURATIONS_OUT;
    if (out) {
      const all = Object.fromEntries(
        testModules
          .map((m) => [`${m.project.name}:${m.relativeModuleId}`, Math.round(m.diagnostic().duration)] as const)
          .sort((a, b) => b[1] - a[1]),
      );
      fs.writeFileSync(out, `${JSON.stringify(all, null, 2)}\n`);
    }
    const rows = testModules
      .map((m) => ({ file: `${m.project.name} ${m.relativeModuleId}`, ms: m.diagnostic().duration }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, SHOWN);
    if (rows.length === 0) return;
    const lines = rows.map((r) => `  ${(r.ms / 1000).toFixed(1).padStart(6)} s  ${r.file}`);
    process.stdout.write(`\nThe ${rows.length} slowest test files (tests and hooks):\n${lines.join('\n')}\n`);
  }
}
