/** The client's options with every default filled in, once, with units. */

import type { CircuitSettings } from '../domain/circuit.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import { createHttpTransport } from './http-transport.js';
import type { ClientOptions } from './options.js';
import type { OutcomeQueueOptions } from './outcome-queue.js';
import { SSE_LIMITS, backoffDelay } from './sse.js';
import type { Transport } from './transport.js';
import { checkedCaller } from './caller-id.js';

export interface ClientSettings {
  readonly transport: Transport;
  readonly clock: () => number;
  /** Soft throttling's draws, uniform in [0, 1). */
  readonly random: () => number;
  readonly failOpen: boolean;
  readonly closeTimeoutMs: number;
  readonly reconnectMaxDelayMs: number;
  readonly maxCircuits: number;
  /** The local breakers' policy for a circuit never seen while connected. */
  readonly localDefaults: CircuitSettings;
  /** How long a locally admitted half-open probe holds its slot. */
  readonly probeLeaseMs: number;
  readonly queue: OutcomeQueueOptions;
  /** This client's caller id, sent on every outcome and admission (option `caller`). */
  readonly caller: string;
}

function transportFor(options: ClientOptions): Transport {
  return (
    options.transport ??
    createHttpTransport({
      url: options.url,
      token: options.token,
      requestTimeoutMs: options.requestTimeoutMs ?? 2_000, // 2 s, a deadline
      maxResponseBytes: options.maxResponseBytes,
      streamLimits: {
        maxLineChars: options.maxStreamLineChars ?? SSE_LIMITS.maxLineChars,
        maxEventChars: options.maxStreamEventChars ?? SSE_LIMITS.maxEventChars,
      },
      streamIdleTimeoutMs: options.streamIdleTimeoutMs ?? 45_000, // 45 s: three missed heartbeats
      connections: options.connections ?? 8,
    })
  );
}

/** Every option resolved; throws a TypeError for an unusable `maxCircuits`. */
export function clientSettings(options: ClientOptions): ClientSettings {
  const reconnectMaxDelayMs = options.reconnectMaxDelayMs ?? 5_000; // 5 s
  const maxCircuits = options.maxCircuits ?? 10_000;
  const transport = transportFor(options);
  if (!Number.isInteger(maxCircuits) || maxCircuits < 1)
    throw new TypeError(`maxCircuits must be an integer >= 1, got ${String(maxCircuits)}`);
  const { failureThreshold, timeoutSeconds, halfOpenMaxCalls } = POLICY_DEFAULTS.circuit;
  return {
    transport,
    clock: options.clock ?? Date.now,
    random: options.random ?? Math.random,
    caller: checkedCaller(options.caller), // default: the host name
    failOpen: options.failOpen ?? true,
    closeTimeoutMs: options.closeTimeoutMs ?? 10_000, // 10 s
    reconnectMaxDelayMs,
    maxCircuits,
    localDefaults: { failureThreshold, timeoutSeconds, halfOpenMaxCalls, ...options.localDefaults },
    probeLeaseMs: POLICY_DEFAULTS.probeLeaseSeconds * 1000, // as the server's default
    queue: {
      flushAt: Math.min(options.flushAt ?? 250, options.maxBatch ?? 1_000),
      maxBatch: options.maxBatch ?? 1_000,
      maxInFlight: 2,
      flushDelayMs: options.flushDelayMs ?? 5, // 5 ms
      capacity: options.maxQueuedOutcomes ?? 10_000,
      retryDelayMs: (attempt) => backoffDelay(attempt, reconnectMaxDelayMs),
    },
  };
}
