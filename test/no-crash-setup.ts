// setupFiles of every project. An unhandled rejection in the test process itself already fails
// the run: vitest reports it as an "Unhandled Rejection" error and exits 1 although every test
// passed (its default; `dangerouslyIgnoreUnhandledErrors` is off). What it cannot see is a
// server the test spawned dying of one: this fails the test during which a spawned server
// printed Node's crash footer (an uncaught exception or an unhandled rejection).
import { afterEach } from 'vitest';
import { takeCrashes } from './server-process.js';

afterEach(() => {
  const crashes = takeCrashes();
  if (crashes.length > 0) {
    throw new Error(
      `a spawned server crashed (${crashes.length}):\n${crashes.map((c) => `pid ${c.pid}:\n${c.stderr}`).join('\n---\n')}`,
    );
  }
});
