import { describe, expect, it } from 'vitest';
import type { Step } from '../../src/domain/circuit.js';
import { GroupCommit } from '../../src/service/group-commit.js';
import type { BatchItem } from '../../src/store/circuit-store.js';

const item = (name: string): BatchItem => ({ name, step: () => null });
const tick = () => new Promise((r) => setImmediate(r));

/** A commit the test finishes by hand, like a Redis round trip. */
function manualCommits() {
  const calls: { names: string[]; finish: () => void; fail: (e: unknown) => void }[] = [];
  const commit = (items: readonly BatchItem[]) =>
    new Promise<(Step | null)[]>((resolve, reject) => {
      calls.push({ names: items.map((i) => i.name), finish: () => resolve(items.map(() => null)), fail: reject });
    });
  return { calls, commit };
}

describe('GroupCommit with an asynchronous commit (Redis)', () => {
  it('runs one commit at a time: what arrives meanwhile waits and goes in the next one', async () => {
    const { calls, commit } = manualCommits();
    const group = new GroupCommit(commit, () => {});
    const first = group.submit([item('a')]);
    await tick();
    expect(calls).toHaveLength(1);
    const second = group.submit([item('a')]);
    const third = group.submit([item('b')]);
    await tick();
    expect(calls).toHaveLength(1); // still waiting for the first commit
    calls[0]!.finish();
    await first;
    await tick();
    expect(calls.map((c) => c.names)).toEqual([['a'], ['a', 'b']]);
    calls[1]!.finish();
    await Promise.all([second, third]);
  });

  it('keeps a circuit pending until the commit holding it has ended, so no caller overtakes it', async () => {
    const { calls, commit } = manualCommits();
    const group = new GroupCommit(commit, () => {});
    const done = group.submit([item('a')]);
    await tick();
    expect(calls).toHaveLength(1);
    expect(group.isPending('a')).toBe(true); // taken from the queue, not yet committed
    calls[0]!.finish();
    await done;
    expect(group.isPending('a')).toBe(false);
  });

  it('fails every caller of a failed commit alike, and goes on with the next', async () => {
    const { calls, commit } = manualCommits();
    const group = new GroupCommit(commit, () => {});
    const failed = group.submit([item('a')]);
    await tick();
    const next = group.submit([item('b')]);
    calls[0]!.fail(new Error('storage unavailable'));
    await expect(failed).rejects.toThrow('storage unavailable');
    await tick();
    calls[1]!.finish();
    await expect(next).resolves.toEqual([null]);
  });
});
