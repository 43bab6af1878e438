import type { Step } from '../domain/circuit.js';
import type { BatchItem } from '../store/circuit-store.js';
import { isPromise, type MaybePromise } from '../store/maybe-promise.js';

interface Entry<I extends BatchItem> {
  readonly items: readonly I[];
  readonly resolve: (results: (Step | null)[]) => void;
  readonly reject: (error: unknown) => void;
}

/** Most steps one transaction takes; a longer queue goes on in the next one (entries stay whole). */
const MAX_STEPS_PER_COMMIT = 4_096;

/**
 * Group commit: steps submitted while the event loop is busy (a transaction running, other
 * requests being parsed) are applied together in the next transaction, scheduled with
 * `setImmediate` so every request whose bytes arrived in this turn joins it. The batch is
 * gathered asynchronously and applied synchronously, so no transaction spans an `await`;
 * each submitter's promise settles only after the transaction holding its steps
 * committed (or failed, for all of them alike). An asynchronous commit (Redis) runs one at
 * a time: what arrives meanwhile waits for the next one, so one process never races itself.
 */
export class GroupCommit<I extends BatchItem = BatchItem> {
  private queue: Entry<I>[] = [];
  private scheduled = false;
  private committing = false;
  /** How many queued steps name each circuit: a caller must not overtake queued work. */
  private readonly pendingByName = new Map<string, number>();

  constructor(
    private readonly commit: (items: readonly BatchItem[]) => MaybePromise<(Step | null)[]>,
    private readonly onCommitted: (items: readonly I[], results: readonly (Step | null)[]) => void,
  ) {}

  /** Whether steps for `name` wait in the queue. */
  isPending(name: string): boolean {
    return this.pendingByName.has(name);
  }

  /** Queue steps that must be applied in order in one transaction; resolves with their results. */
  submit(items: readonly I[]): Promise<(Step | null)[]> {
    for (const { name } of items) this.pendingByName.set(name, (this.pendingByName.get(name) ?? 0) + 1);
    return new Promise((resolve, reject) => {
      this.queue.push({ items, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    if (this.committing) return; // the running commit schedules the next flush when it ends
    let steps = 0;
    let taken = 0;
    while (
      taken < this.queue.length &&
      (taken === 0 || steps + this.queue[taken]!.items.length <= MAX_STEPS_PER_COMMIT)
    ) {
      steps += this.queue[taken]!.items.length;
      taken++;
    }
    const batch = this.queue.splice(0, taken);
    const items = batch.length === 1 ? batch[0]!.items : batch.flatMap((e) => e.items);
    let results: MaybePromise<(Step | null)[]>;
    try {
      results = this.commit(items);
    } catch (error) {
      this.settle(batch, items, error, null);
      return;
    }
    if (!isPromise(results)) {
      this.settle(batch, items, null, results);
      return;
    }
    this.committing = true;
    results.then(
      (done) => this.settle(batch, items, null, done),
      (error: unknown) => this.settle(batch, items, error, null),
    );
  }

  /** After a commit (or its failure): answer its submitters, then go on with the queue. */
  private settle(
    batch: readonly Entry<I>[],
    items: readonly I[],
    error: unknown,
    results: (Step | null)[] | null,
  ): void {
    this.committing = false;
    // Only now: until the commit ends, a caller for these circuits must wait behind it.
    for (const { name } of items) {
      const left = this.pendingByName.get(name)! - 1;
      if (left === 0) this.pendingByName.delete(name);
      else this.pendingByName.set(name, left);
    }
    if (this.queue.length > 0) this.schedule();
    if (results === null) {
      for (const entry of batch) entry.reject(error);
      return;
    }
    this.onCommitted(items, results);
    let at = 0;
    for (const entry of batch) {
      entry.resolve(results.slice(at, at + entry.items.length));
      at += entry.items.length;
    }
  }
}
