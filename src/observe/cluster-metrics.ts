import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

const REQUEST = 'circuitlog:metrics-req';
const RESPONSE = 'circuitlog:metrics-res';
const ANSWER_TIMEOUT_MS = 8_000; // 8 s; prom-client gives up on a silent worker after 5 s

interface MetricsMessage {
  readonly type: string;
  readonly id: number;
  readonly text?: string;
  readonly error?: string;
}

/**
 * In the cluster primary: answer a worker's request for the cluster-wide counters with
 * prom-client's AggregatorRegistry, which asks every worker for its registry and sums
 * the series (https://github.com/siimon/prom-client, "Usage with Node.js cluster module").
 */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: MetricsMessage) => {
    if (message?.type !== REQUEST) return;
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: RESPONSE, id: message.id, text }),
      (error: Error) => worker.send({ type: RESPONSE, id: message.id, error: error.message }),
    );
  });
}

/**
 * In a cluster worker: offer `registry` to the primary's aggregation, and return the
 * function that fetches the summed counters through the primary.
 */
export function clusterCountersClient(registry: Registry): () => Promise<string> {
  new AggregatorRegistry(); // installs prom-client's worker-side listener
  AggregatorRegistry.setRegistries([registry]);
  const pending = new Map<number, (m: MetricsMessage) => void>();
  let nextId = 0;
  process.on('message', (message: MetricsMessage) => {
    if (message?.type === RESPONSE) pending.get(message.id)?.(message);
  });
  return () =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error('the primary did not answer with the cluster metrics'));
      }, ANSWER_TIMEOUT_MS);
      pending.set(id, (m) => {
        clearTimeout(timer);
        pending.delete(id);
        if (m.error !== undefined) reject(new Error(m.error));
        else resolve(m.text ?? '');
      });
      process.send!({ type: REQUEST, id });
    });
}
