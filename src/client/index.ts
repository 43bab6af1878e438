/**
 * `circuitlog/client`: protect a call with a circuit shared by every process, at in-process
 * speed. See README "Using circuitlog from your service".
 *
 * ```ts
 * const breakers = createClient({ url: 'http://127.0.0.1:8080', token: process.env.CIRCUITLOG_TOKEN });
 * const user = await breakers.call('users-api/get', (signal) => fetchUser(id, { signal }), { timeoutMs: 2000 });
 * await breakers.close();
 * ```
 */

import { CircuitlogClient } from './client.js';
import type { ClientOptions } from './options.js';

export { CircuitlogClient } from './client.js';
export type { CallOptions, ClientEvents, ClientOptions, ClientStats } from './options.js';
export type { Classification } from './classify.js';
export type { TokenProvider } from './token-source.js';
export type { OutcomeKind } from '../domain/outcome-kind.js';
export type { ConnectionState } from './view.js';
export {
  CallTimeoutError,
  CircuitOpenError,
  CircuitRampingError,
  CircuitThrottledError,
  DependencyThrottledError,
  CircuitlogRequestError,
  CircuitlogUnavailableError,
  ClientClosedError,
} from './errors.js';
export type { StreamReset, TransitionEvent } from './transport.js';
export type { CircuitState } from '../domain/circuit.js';

/** Create a client; it connects to circuitlog's event stream at once. Call `close()` when done. */
export function createClient(options: ClientOptions): CircuitlogClient {
  return new CircuitlogClient(options);
}
