import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Circuit, Step } from '../../domain/circuit.js';
import { AppError } from '../../domain/errors.js';
import type { CircuitStore, HealthReport } from '../circuit-store.js';
import type { SqliteCircuitStore } from './circuit-store.js';

export type { HealthReport } from '../circuit-store.js';

/** Free space at which a disk that was full counts as usable again. */
const RECOVERED_FREE_BYTES = 1024 * 1024; // 1 MiB

/**
 * Watches the database file under a store. A write first checks that the file on disk is
 * still the one we opened: once it is deleted (or replaced), SQLite would go on writing
 * into an unlinked inode and acknowledge changes a restart loses, so writes are refused
 * with 503 from then on. A full disk is remembered until a write commits again or the
 * disk has room, so `/health` can say so even when no write is being tried.
 */
export class StorageHealth {
  private readonly file: string;
  private readonly identity: { dev: number; ino: number };
  private lost: 'deleted' | 'replaced' | null = null;
  private full = false;

  constructor(
    file: string,
    private readonly logger: Logger,
    private readonly freeBytes: (folder: string) => number = (folder) => {
      const s = fs.statfsSync(folder);
      return s.bavail * s.bsize;
    },
  ) {
    this.file = path.resolve(file);
    const stat = fs.statSync(this.file);
    this.identity = { dev: stat.dev, ino: stat.ino };
  }

  /** The store with these checks around every write. */
  wrap(store: SqliteCircuitStore): CircuitStore & { health(): HealthReport } {
    const apply = <S extends Step>(name: string, step: (current: Circuit | null) => S | null): S | null => {
      let writes = false;
      // The step runs just before its result is written (and once more under the lock).
      const checked = (current: Circuit | null) => {
        const result = step(current);
        writes = result !== null && result.circuit !== current;
        if (writes) this.assertFileIntact();
        return result;
      };
      try {
        const result = store.apply(name, checked);
        if (writes) this.noteRoom('a write committed');
        return result;
      } catch (error) {
        if (error instanceof AppError && error.code === 'STORAGE_FULL') this.noteFull();
        throw error;
      }
    };
    // A batch (group commit) and a delete are writes whatever their steps say.
    const write = <T>(run: () => T): T => {
      this.assertFileIntact();
      try {
        const result = run();
        this.noteRoom('a write committed');
        return result;
      } catch (error) {
        if (error instanceof AppError && error.code === 'STORAGE_FULL') this.noteFull();
        throw error;
      }
    };
    return {
      find: (name) => store.find(name),
      peek: (name) => store.peek(name),
      apply,
      applyBatch: (items) => write(() => store.applyBatch(items)),
      delete: (name) => write(() => store.delete(name)),
      list: (query) => store.list(query),
      events: (id, limit) => store.events(id, limit),
      ping: () => store.ping(),
      count: () => store.count(),
      dueOpen: (now, limit) => store.dueOpen(now, limit),
      health: () => this.report(() => store.ping()),
    };
  }

  /** For `/health`: failed once the file is gone, degraded while the disk is full. */
  report(ping: () => boolean): HealthReport {
    this.checkIdentity();
    if (this.lost) {
      return {
        status: 'failed',
        storage: this.lost,
        detail: `the database file was ${this.lost} while the service ran; restart it`,
      };
    }
    if (this.full && this.freeBytes(path.dirname(this.file)) >= RECOVERED_FREE_BYTES)
      this.noteRoom('the disk has room again');
    if (this.full)
      return {
        status: 'degraded',
        storage: 'full',
        detail: 'the disk holding the database is full; writes answer 503',
      };
    return { status: ping() ? 'ok' : 'unavailable' };
  }

  private assertFileIntact(): void {
    this.checkIdentity();
    if (this.lost) {
      throw new AppError(
        'STORAGE_UNAVAILABLE',
        `The database file was ${this.lost} while the service ran; nothing was written.`,
      );
    }
  }

  /** One stat of the path: gone, or another inode, means our open file is no longer the database. */
  private checkIdentity(): void {
    if (this.lost) return;
    const stat = fs.statSync(this.file, { throwIfNoEntry: false });
    if (stat !== undefined && stat.dev === this.identity.dev && stat.ino === this.identity.ino) return;
    this.lost = stat === undefined ? 'deleted' : 'replaced';
    this.logger.error(
      { event: 'storage_lost', db: this.file, reason: this.lost },
      `the database file was ${this.lost}; refusing writes until restart`,
    );
  }

  private noteFull(): void {
    if (this.full) return;
    this.full = true;
    this.logger.error(
      { event: 'storage_full', db: this.file },
      'the disk holding the database is full; writes answer 503 storage-full',
    );
  }

  private noteRoom(why: string): void {
    if (!this.full) return;
    this.full = false;
    this.logger.info({ event: 'storage_recovered', db: this.file }, `storage usable again: ${why}`);
  }
}
