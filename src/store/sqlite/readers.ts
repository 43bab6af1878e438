import type Database from 'better-sqlite3';
import type { SnapshotReader } from '../snapshot-reader.js';
import type { TransitionReader } from '../transition-reader.js';
import { CircuitSnapshot } from './circuit-snapshot.js';
import { TransitionLog } from './transition-log.js';

/** The observers' readers over one SQLite connection; `snapshot` is only called with metrics on. */
export function sqliteReaders(db: Database.Database): {
  readonly transitions: TransitionReader;
  readonly snapshot: () => SnapshotReader;
} {
  return { transitions: new TransitionLog(db), snapshot: () => new CircuitSnapshot(db) };
}
