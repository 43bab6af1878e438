import { describe, expect, it } from 'vitest';
import { transitionData, transitionFrame } from '../../src/observe/event-frames.js';
import type { LoggedTransition } from '../../src/store/transition-reader.js';

const row = (): LoggedTransition => ({ id: 7, circuit: 'pay', from: 'closed', to: 'open', reason: 'failures', at: 0 });

describe('transitionFrame', () => {
  it('serialises a transition once: every stream sending it under the same id gets the same bytes', () => {
    const t = row();
    const first = transitionFrame(t, '7');
    expect(first.toString()).toBe(`event: transition\nid: 7\ndata: ${transitionData(t)}\n\n`);
    expect(transitionFrame(t, '7')).toBe(first); // the same Buffer, not an equal copy
  });

  it('gives a stream that names the event differently its own frame over the same data', () => {
    const t = row();
    const shared = transitionFrame(t, '7');
    const other = transitionFrame(t, 'c1-7');
    expect(other.toString()).toBe(`event: transition\nid: c1-7\ndata: ${transitionData(t)}\n\n`);
    expect(transitionFrame(t, '7')).toBe(shared);
  });

  it('makes a new frame for another row with the same id (the row object is the key)', () => {
    const a = transitionFrame(row(), '7');
    const b = transitionFrame({ ...row(), to: 'half_open' }, '7');
    expect(b).not.toBe(a);
    expect(b.toString()).toContain('"to":"half_open"');
  });
});
