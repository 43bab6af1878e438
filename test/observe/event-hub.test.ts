import { describe, expect, it } from 'vitest';
import { EventHub } from '../../src/observe/event-hub.js';
import type { LoggedTransition, TransitionReader } from '../../src/store/transition-reader.js';

/** A transitions log of `count` rows (ids 1..count) that counts its reads. */
function fakeLog(count: number) {
  const rows: LoggedTransition[] = Array.from({ length: count }, (_, i) => ({
    id: i + 1,
    circuit: `c${i % 7}`,
    from: 'closed',
    to: 'open',
    reason: 'r',
    at: 0,
  }));
  const log: TransitionReader & { reads: number } = {
    reads: 0,
    maxId: () => rows.length,
    after(afterId, limit) {
      this.reads++;
      return rows.filter((r) => r.id > afterId).slice(0, limit);
    },
    latest: () => [],
    lastPerCircuit: () => new Map(),
  };
  return { rows, log };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('EventHub replay (Last-Event-ID)', () => {
  it('replays 5,000 transitions a page at a time, giving the event loop a turn between pages', async () => {
    const { log } = fakeLog(5_000);
    const hub = new EventHub({ log, maxStreams: 10 });
    const got: number[] = [];
    const unsubscribe = hub.subscribe({}, 0, { send: (t) => got.push(t.id) });
    expect(got.length).toBe(0); // nothing in the subscribing tick
    await turn();
    expect(got.length).toBe(1_000); // one page per turn, not all 5,000
    let turns = 1;
    while (got.length < 5_000 && turns < 100) {
      await turn();
      turns++;
    }
    expect(turns).toBeGreaterThanOrEqual(4);
    expect(got).toEqual(Array.from({ length: 5_000 }, (_, i) => i + 1));
    unsubscribe();
  });

  it('reads one page of one replay per turn of the event loop, however many streams replay', async () => {
    const { log } = fakeLog(3_000);
    const hub = new EventHub({ log, maxStreams: 10 });
    const got = [[], [], []] as number[][];
    for (const ids of got) hub.subscribe({}, 0, { send: (t) => ids.push(t.id) });
    const sent = () => got.reduce((n, ids) => n + ids.length, 0);
    for (let i = 1; i <= 6; i++) {
      await turn();
      expect(sent()).toBe(1_000 * i);
    }
  });

  it('waits while the stream is backlogged and goes on from where it paused once drained', async () => {
    const { log } = fakeLog(3_000);
    const hub = new EventHub({ log, maxStreams: 10 });
    const got: number[] = [];
    let full = false;
    let release = () => {};
    const unsubscribe = hub.subscribe({}, 0, {
      send: (t) => {
        got.push(t.id);
        if (t.id === 500) full = true;
      },
      backlogged: () => full,
      drained: () => new Promise<void>((resolve) => (release = resolve)),
    });
    for (let i = 0; i < 10; i++) await turn();
    expect(got.length).toBe(500);
    full = false;
    release();
    for (let i = 0; i < 20; i++) await turn();
    expect(got).toEqual(Array.from({ length: 3_000 }, (_, i) => i + 1));
    unsubscribe();
  });

  it('hands a replaying stream over to the live tail without a gap or a duplicate', async () => {
    const { rows, log } = fakeLog(2_500);
    const hub = new EventHub({ log, maxStreams: 10, pollMs: 1_000_000 });
    const live: number[] = [];
    hub.subscribe({}, null, { send: (t) => live.push(t.id) }); // starts the tail at 2,500
    const got: number[] = [];
    hub.subscribe({}, 0, { send: (t) => got.push(t.id) });
    rows.push({ id: 2_501, circuit: 'late', from: 'closed', to: 'open', reason: 'r', at: 0 });
    hub.poll(); // the live tail reads 2,501 while the replay is still at its first page
    for (let i = 0; i < 10; i++) await turn();
    rows.push({ id: 2_502, circuit: 'later', from: 'closed', to: 'open', reason: 'r', at: 0 });
    hub.poll();
    expect(got).toEqual(Array.from({ length: 2_502 }, (_, i) => i + 1));
    expect(live).toEqual([2_501, 2_502]);
  });
});

describe('EventHub live tail to many streams', () => {
  it('sends a row to 2,000 streams 512 writes per turn of the event loop, each stream once, in id order', async () => {
    const { rows, log } = fakeLog(0);
    const hub = new EventHub({ log, maxStreams: 5_000, pollMs: 1_000_000 });
    const got = Array.from({ length: 2_000 }, () => [] as number[]);
    for (const ids of got) hub.subscribe({}, null, { send: (t) => ids.push(t.id) });
    rows.push({ id: 1, circuit: 'a', from: 'closed', to: 'open', reason: 'r', at: 0 });
    rows.push({ id: 2, circuit: 'a', from: 'open', to: 'half_open', reason: 'r', at: 0 });
    const sent = () => got.reduce((n, ids) => n + ids.length, 0);
    hub.poll();
    expect(sent()).toBe(512); // the rest waits for the next turns
    hub.poll(); // a poll meanwhile reads nothing twice and sends nothing out of order
    let turns = 0;
    while (sent() < 4_000 && turns < 100) {
      await turn();
      turns++;
    }
    expect(turns).toBe(7); // 4,000 writes: 8 turns of 512 or fewer
    for (const ids of got) expect(ids).toEqual([1, 2]);
  });

  it('hands a stream whose replay ends in the middle of a fan-out over without a gap or a duplicate', async () => {
    const { rows, log } = fakeLog(10);
    const hub = new EventHub({ log, maxStreams: 5_000, pollMs: 1_000_000 });
    for (let i = 0; i < 1_000; i++) hub.subscribe({}, null, { send: () => {} }); // the tail starts at 10
    const got: number[] = [];
    hub.subscribe({}, 5, { send: (t) => got.push(t.id) }); // replays 6..10 at the next turn
    for (let id = 11; id <= 12; id++) rows.push({ id, circuit: 'a', from: 'closed', to: 'open', reason: 'r', at: 0 });
    hub.poll(); // 11 and 12 to 1,001 streams: this one, still replaying, is skipped for now
    for (let i = 0; i < 10; i++) await turn();
    expect(got).toEqual([6, 7, 8, 9, 10, 11, 12]);
  });

  it('ends a stream whose sink throws and goes on sending to the others', () => {
    const { rows, log } = fakeLog(0);
    const hub = new EventHub({ log, maxStreams: 10, pollMs: 1_000_000 });
    let closed = 0;
    const got: number[] = [];
    const send = () => {
      throw new Error('socket gone');
    };
    hub.subscribe({}, null, { send, close: () => closed++ });
    hub.subscribe({}, null, { send: (t) => got.push(t.id) });
    rows.push({ id: 1, circuit: 'a', from: 'closed', to: 'open', reason: 'r', at: 0 });
    hub.poll();
    expect(closed).toBe(1);
    expect(got).toEqual([1]);
  });
});
