import cluster, { type Worker } from 'node:cluster';

/**
 * Workers on one SQLite file learn of each other's transitions at once (issue 29's fleet proof:
 * a cool-down must reach every client within 250 ms). Each worker's event hub reads the shared
 * transitions table every 200 ms; a worker that commits a transition also says so to the
 * primary, which passes it on to the other workers, and their hubs read the table at once
 * (`EventHub.nudge`). A message says only "read now": a lost one costs the 200 ms tick, nothing
 * more. Redis needs none of this: its hosts hear each other through the store's change feed
 * (`OpenedStore.onForeignTransitions`, which this is for SQLite workers: server/open-store.ts).
 */
const TYPE = 'circuitlog:transitions';

interface TransitionsMessage {
  readonly type: typeof TYPE;
}

const isTransitionsMessage = (message: unknown): message is TransitionsMessage =>
  typeof message === 'object' && message !== null && (message as { type?: unknown }).type === TYPE;

/** In the primary: pass each worker's word on to every other live worker. */
export function relayClusterTransitions(): void {
  cluster.on('message', (from: Worker, message: unknown) => {
    if (!isTransitionsMessage(message)) return;
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker === undefined || worker === from || !worker.isConnected()) continue;
      worker.send(message, undefined, () => {}); // a worker on its way out: its error is nobody's business
    }
  });
}

/**
 * In a worker: `announce` (called on each local transition; one message per turn of the event
 * loop however many) and `onSibling` (a listener for the other workers' word).
 */
export function clusterTransitionSignal(): { announce: () => void; onSibling: (listener: () => void) => void } {
  let pending = false;
  const announce = () => {
    if (pending || process.send === undefined) return;
    pending = true;
    setImmediate(() => {
      pending = false;
      if (process.connected) process.send!({ type: TYPE } satisfies TransitionsMessage, undefined, {}, () => {});
    });
  };
  const onSibling = (listener: () => void) => {
    process.on('message', (message: unknown) => {
      if (isTransitionsMessage(message)) listener();
    });
  };
  return { announce, onSibling };
}
