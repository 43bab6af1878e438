/** The directories searched for `PATH`, in order: each entry, then its sbin sibling (`…/bin` → `…/sbin`). */
export function searchDirs(pathEnv?: string): string[];
/** The absolute path of `command` (an executable file) on PATH or in an sbin next to a PATH bin; null when none. */
export function findProgram(command: string, pathEnv?: string): string | null;
