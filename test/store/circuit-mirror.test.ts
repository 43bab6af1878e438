import { describe, expect, it } from 'vitest';
import { newCircuit, type Circuit } from '../../src/domain/circuit.js';
import { CircuitMirror } from '../../src/store/redis/circuit-mirror.js';

// The Redis hosts' mirror for the state gauges (issue 20): start-up does not wait for it, and it
// keeps whole only the first circuits by id. A stand-in store whose listing answers when released.

const SETTINGS = { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const circuit = (id: number, extra: Partial<Circuit> = {}): Circuit => ({
  ...newCircuit(`c${id}`, SETTINGS, 0),
  id,
  ...extra,
});
const opened = (id: number, openUntil: number) => circuit(id, { state: 'open', openUntil });

/** The store as the mirror sees it: a listing over `circuits` that waits for `release()` when gated. */
function gatedStore(circuits: Circuit[], gated = true) {
  let onChange: (name: string, c: Circuit | null, callersKnown: boolean) => void = () => {};
  const waiting: (() => void)[] = [];
  let lists = 0;
  const store = {
    onChange: (listener: typeof onChange) => void (onChange = listener),
    onRebuild: () => {},
    fetch: async (name: string) => circuits.find((c) => c.name === name) ?? null,
    list: async ({ afterId, limit }: { afterId?: number; limit: number }) => {
      lists++;
      if (gated) await new Promise<void>((r) => waiting.push(r));
      return circuits
        .filter((c) => c.id > (afterId ?? 0))
        .sort((a, b) => a.id - b.id)
        .slice(0, limit);
    },
  };
  const settle = () => new Promise((r) => setImmediate(r));
  return {
    store,
    get lists() {
      return lists;
    },
    /** Let the waiting listing calls answer, then let the mirror take their pages. */
    async release(pages = 1) {
      for (let i = 0; i < pages; i++) {
        await settle();
        for (const r of waiting.splice(0)) r();
        await settle();
      }
    },
    /** A committed change as the `changes` channel delivers it; `circuits` is the truth. */
    change(name: string, c: Circuit | null) {
      const at = circuits.findIndex((x) => x.name === name);
      if (at >= 0) circuits.splice(at, 1);
      if (c !== null) circuits.push(c);
      onChange(name, c, true);
    },
  };
}

/** The counts a full recount of the truth gives at `now`. */
function recount(circuits: Circuit[], now: number) {
  const counts = { closed: 0, open: 0, half_open: 0 };
  for (const c of circuits)
    counts[c.state === 'open' && c.openUntil !== null && c.openUntil <= now ? 'half_open' : c.state]++;
  return counts;
}

describe('the Redis state-gauge mirror', () => {
  it('answers before its first load is complete: no per-state counts yet, the first circuits by id as read so far', async () => {
    const all = Array.from({ length: 2_500 }, (_, i) => circuit(i + 1));
    const fake = gatedStore(all);
    const mirror = new CircuitMirror(fake.store, undefined, 1_500);
    let loaded = false;
    void mirror.start().then(() => (loaded = true));
    expect(mirror.stateCounts(0)).toBeNull(); // nothing read yet: unknown, not zero
    expect(mirror.first(1_500, 0)).toEqual([]);
    await fake.release(); // the first page of 1,000
    expect(mirror.loaded).toBe(false);
    expect(mirror.stateCounts(0)).toBeNull();
    expect(mirror.first(1_500, 0).map((c) => c.id)).toEqual(Array.from({ length: 1_000 }, (_, i) => i + 1));
    expect(mirror.capCutoff(1_500)).toEqual(expect.objectContaining({ lastId: 1_000, full: false }));
    await fake.release(2);
    expect(loaded).toBe(true);
    expect(mirror.stateCounts(0)).toEqual({ closed: 2_500, open: 0, half_open: 0 });
    expect(mirror.first(1_500, 0).map((c) => c.id)).toEqual(Array.from({ length: 1_500 }, (_, i) => i + 1));
    expect(mirror.capCutoff(1_500)).toEqual(expect.objectContaining({ lastId: 1_500, full: true }));
  });

  it('lets changes that arrive during the load win over the pages it reads after them', async () => {
    const all = Array.from({ length: 2_500 }, (_, i) => circuit(i + 1));
    const fake = gatedStore(all);
    const mirror = new CircuitMirror(fake.store, undefined, 100);
    void mirror.start();
    await fake.release(); // ids 1..1000 read
    fake.change('c5', opened(5, 10_000)); // already read: changed in place
    fake.change('c1500', opened(1_500, 10_000)); // not read yet: its page will list the old state
    const staleRead = all.find((c) => c.name === 'c1500');
    all.splice(all.indexOf(staleRead!), 1, circuit(1_500)); // the listing still shows it closed
    fake.change('c2000', null); // deleted before its page
    all.push(circuit(2_000)); // and the listing still shows it
    fake.change('c2501', circuit(2_501)); // created during the load
    await fake.release(3);
    expect(mirror.loaded).toBe(true);
    expect(mirror.stateCounts(0)).toEqual({ closed: 2_498, open: 2, half_open: 0 });
    expect(mirror.stateCounts(10_000)).toEqual({ closed: 2_498, open: 0, half_open: 2 });
    expect(mirror.first(100, 0)[4]).toMatchObject({ name: 'c5', state: 'open' });
  });

  it('keeps whole only the first circuits: a deleted one inside lets the next in, and the counts match a recount', async () => {
    const all = Array.from({ length: 3_000 }, (_, i) => circuit(i + 1));
    const fake = gatedStore(all, false);
    const mirror = new CircuitMirror(fake.store, undefined, 50);
    await mirror.start();
    expect(mirror.first(1_000_000, 0)).toHaveLength(50); // nothing past the head is kept whole
    fake.change('c10', null);
    fake.change('c3001', circuit(3_001));
    fake.change('c20', opened(20, 500));
    fake.change('c2999', opened(2_999, 2_000));
    await new Promise((r) => setTimeout(r, 20)); // the head is read again
    expect(mirror.first(50, 0).map((c) => c.id)).toEqual([
      ...Array.from({ length: 9 }, (_, i) => i + 1),
      ...Array.from({ length: 41 }, (_, i) => i + 11),
    ]);
    expect(mirror.first(50, 1_000)[18]).toMatchObject({ name: 'c20', state: 'half_open' });
    expect(mirror.capCutoff(50)).toEqual(expect.objectContaining({ lastId: 51, full: true }));
    for (const now of [0, 1_000, 5_000]) expect(mirror.stateCounts(now)).toEqual(recount(all, now));
  });

  it('follows random changes, creations and deletions with counts equal to a recount and the head equal to the first by id', async () => {
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const all = Array.from({ length: 400 }, (_, i) => circuit(i + 1));
    const fake = gatedStore(all, false);
    const mirror = new CircuitMirror(fake.store, undefined, 30);
    await mirror.start();
    let next = 401;
    for (let i = 0; i < 2_000; i++) {
      const r = random();
      const pick = all[Math.floor(random() * all.length)]!;
      if (r < 0.2) fake.change(`c${next}`, circuit(next++));
      else if (r < 0.35) fake.change(pick.name, null);
      else
        fake.change(
          pick.name,
          random() < 0.5 ? opened(pick.id, Math.floor(random() * 1_000)) : circuit(pick.id, { failureCount: i }),
        );
      if (i % 100 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setTimeout(r, 20));
    expect(mirror.stateCounts(500)).toEqual(recount(all, 500));
    const firstById = [...all].sort((a, b) => a.id - b.id).slice(0, 30);
    expect(mirror.first(30, 0).map((c) => [c.name, c.circuit.failureCount])).toEqual(
      firstById.map((c) => [c.name, c.failureCount]),
    );
  });
});
