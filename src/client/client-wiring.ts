/**
 * How the client's parts are wired to each other: the outcome queue's and the event
 * stream's hooks, and the shutdown that `close()` runs (client.ts).
 */

import { CircuitlogUnavailableError } from './errors.js';
import type { Emitter } from './emitter.js';
import type { LocalThrottles } from './local-throttle.js';
import type { ClientEvents } from './options.js';
import type { OutcomeQueue, OutcomeQueueHooks } from './outcome-queue.js';
import type { InFlight } from './run-call.js';
import type { StreamHooks, StreamKeeper } from './stream-keeper.js';
import type { Transport } from './transport.js';
import type { CircuitView, Link } from './view.js';

/** The outcome queue's hooks: batches go to the transport, delivery tells the link. */
export function queueHooks(transport: Transport, link: Link, events: Emitter<ClientEvents>): OutcomeQueueHooks {
  return {
    send: (batch) => transport.postOutcomes(batch),
    onDelivered: () => link.setReachable(true),
    onUnreachable: (error) => link.setReachable(false, error),
    onRejected: (count, error) => events.emit('rejected', { count, error }),
  };
}

/** The parts the event stream's hooks act on. */
export interface StreamParts {
  readonly link: Link;
  readonly queue: OutcomeQueue;
  readonly view: CircuitView;
  readonly throttles: LocalThrottles;
  readonly events: Emitter<ClientEvents>;
}

/** The event stream's hooks: transitions update the view, the stream's state the link. */
export function streamHooks({ link, queue, view, throttles, events }: StreamParts): StreamHooks {
  return {
    onOpen: () => {
      link.generation++; // every snapshot taken before this is re-taken on its next use
      link.set(true, true);
      queue.flush();
    },
    onEvent: (event) => {
      view.apply(event);
      if (event.from !== event.to) throttles.forget(event.circuit); // counts start empty at a state change, as the server's
      events.emit('transition', event);
    },
    onReset: (reset) => {
      // Transitions may have been missed: every snapshot is re-taken on its next use.
      link.generation++;
      events.emit('reset', reset);
    },
    onDown: (error) =>
      link.set(false, error === null || error.kind === 'rejected' ? link.reachable : false, error ?? undefined),
  };
}

/** The parts `close()` stops. */
export interface ShutdownParts {
  readonly inFlight: InFlight;
  readonly queue: OutcomeQueue;
  readonly stream: StreamKeeper;
  readonly transport: Transport;
  readonly closeTimeoutMs: number;
}

/** Wait for calls under way and the queue's delivery (at most `closeTimeoutMs`), then stop everything. */
export async function shutdown({ inFlight, queue, stream, transport, closeTimeoutMs }: ShutdownParts): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), closeTimeoutMs)));
  const done = (async () => {
    if (inFlight.busy) await inFlight.idle();
    queue.flush();
    await queue.drained();
    return true;
  })();
  const delivered = await Promise.race([done, expired]);
  clearTimeout(timer);
  const pending = queue.pending;
  queue.stop();
  stream.stop();
  await transport.close();
  if (!delivered) {
    throw new CircuitlogUnavailableError(
      `close(): ${pending} outcome(s) not acknowledged by circuitlog within ${closeTimeoutMs} ms`,
    );
  }
}
