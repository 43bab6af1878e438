// Where a system program is, the way scripts/provision.mjs and the tests that run it look:
// every directory on PATH, and next to each `…/bin` its `…/sbin`. Debian installs daemons such
// as nginx in /usr/sbin, which a non-root user's PATH often leaves out; `command -v` alone
// would call an installed nginx missing there.

import fs from 'node:fs';
import path from 'node:path';

/** The directories searched for `PATH`, in order: each entry, then its sbin sibling. */
export function searchDirs(pathEnv = process.env.PATH ?? '') {
  const dirs = [];
  for (const dir of pathEnv.split(path.delimiter)) {
    if (dir === '') continue;
    dirs.push(dir);
    if (path.basename(dir) === 'bin') dirs.push(path.join(path.dirname(dir), 'sbin'));
  }
  return [...new Set(dirs)];
}

/** The absolute path of `command` (an executable file), or null when none is found. */
export function findProgram(command, pathEnv = process.env.PATH ?? '') {
  for (const dir of searchDirs(pathEnv)) {
    const file = path.join(dir, command);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      /* not here */
    }
  }
  return null;
}
