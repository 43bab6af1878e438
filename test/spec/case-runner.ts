/**
 * Runs one case of clients/spec/client-cases.json with the Node client against the real
 * server process: the thin harness the README describes, so the cases are known to be
 * right before any other client meets them.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect, vi } from 'vitest';
import {
  CallTimeoutError,
  CircuitOpenError,
  CircuitlogUnavailableError,
  createClient,
  type CircuitlogClient,
  type ClientOptions,
} from '../../src/client/index.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { startCountingProxy, type CountingProxy } from './counting-proxy.js';

export interface ClientCase {
  readonly id: string;
  readonly description: string;
  readonly server: { readonly circuit_defaults: Record<string, unknown> };
  readonly clients: number;
  /** Each client's `caller` option, by index (without it, each client's default). */
  readonly callers?: readonly string[];
  readonly options?: Record<string, unknown>;
  readonly count_requests?: boolean;
  readonly steps: readonly Step[];
}

/** One step; which members are used depends on `op` (clients/spec/README.md "Client cases"). */
export type Step = Record<string, unknown> & { readonly op: string };

/** The spec's option names (snake_case) to the Node client's. */
const OPTION_NAMES: Record<string, keyof ClientOptions> = {
  fail_open: 'failOpen',
  flush_delay_ms: 'flushDelayMs',
  flush_at: 'flushAt',
  max_batch: 'maxBatch',
  max_queued_outcomes: 'maxQueuedOutcomes',
  request_timeout_ms: 'requestTimeoutMs',
  reconnect_max_delay_ms: 'reconnectMaxDelayMs',
  stream_idle_timeout_ms: 'streamIdleTimeoutMs',
  close_timeout_ms: 'closeTimeoutMs',
};

export class CaseRun {
  private server!: ServerProcess;
  private proxy: CountingProxy | null = null;
  private clients: CircuitlogClient[] = [];
  private readonly dir = tempDir();

  constructor(private readonly spec: ClientCase) {}

  async start(): Promise<void> {
    // JSON is YAML's flow style: a nested policy field (a quorum) is written as is.
    const lines = Object.entries(this.spec.server.circuit_defaults).map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`);
    fs.writeFileSync(path.join(this.dir, 'circuitlog.yaml'), `circuit_defaults:\n${lines.join('\n')}\n`);
    this.server = await startServer(this.env());
    if (this.spec.count_requests === true) this.proxy = await startCountingProxy(this.server.port);
    const options = Object.fromEntries(
      Object.entries(this.spec.options ?? {}).map(([k, v]) => [OPTION_NAMES[k] ?? k, v]),
    );
    const url = this.proxy?.url ?? this.server.url;
    const callers = this.spec.callers;
    this.clients = Array.from({ length: this.spec.clients }, (_, i) =>
      createClient({ url, ...options, ...(callers === undefined ? {} : { caller: callers[i] }) }),
    );
    await Promise.all(this.clients.map((c) => c.ready()));
  }

  async stop(): Promise<void> {
    await Promise.allSettled(this.clients.map((c) => c.close()));
    await this.proxy?.close();
    await this.server.stop('SIGKILL');
  }

  async run(): Promise<void> {
    for (const [index, step] of this.spec.steps.entries()) {
      try {
        await this.step(step);
      } catch (error) {
        throw new Error(`step ${index} (${JSON.stringify(step)}): ${(error as Error).message}`, { cause: error });
      }
    }
  }

  private env(port?: number): Record<string, string> {
    const env = {
      CIRCUITLOG_DB: path.join(this.dir, 'db.sqlite'),
      CIRCUITLOG_CONFIG: path.join(this.dir, 'circuitlog.yaml'),
    };
    return port === undefined ? env : { ...env, PORT: String(port) };
  }

  private targets(step: Step): CircuitlogClient[] {
    const ids = Array.isArray(step.clients) ? (step.clients as number[]) : [step.client as number];
    return ids.map((i) => this.clients[i]!);
  }

  private async step(step: Step): Promise<void> {
    const circuit = step.circuit as string;
    const within = { timeout: (step.within_ms as number | undefined) ?? 5_000, interval: 5 };
    switch (step.op) {
      case 'call':
        return this.calls(step);
      case 'allowed':
        return this.allowed(step);
      case 'record':
        return this.records(step);
      case 'close':
        await Promise.all(this.targets(step).map((c) => c.close()));
        return;
      case 'wait_state':
        await vi.waitFor(
          () =>
            expect(this.targets(step).map((c) => c.state(circuit))).toEqual(this.targets(step).map(() => step.state)),
          within,
        );
        return;
      case 'expect_state':
        expect(this.targets(step).map((c) => c.state(circuit))).toEqual(this.targets(step).map(() => step.state));
        return;
      case 'wait_connection':
        await vi.waitFor(
          () => expect(this.targets(step).map((c) => c.connection)).toEqual(this.targets(step).map(() => step.state)),
          within,
        );
        return;
      case 'wait_acknowledged':
        await vi.waitFor(
          () =>
            expect(this.targets(step).map((c) => c.stats().outcomesPending)).toEqual(this.targets(step).map(() => 0)),
          within,
        );
        return;
      case 'wait_allowed':
        await vi.waitFor(async () => {
          const answers = await Promise.all(this.targets(step).map((c) => c.allowed(circuit)));
          expect(answers).toEqual(answers.map(() => step.expect));
        }, within);
        return;
      case 'expect_event': {
        const res = await fetch(`${this.server.url}/circuits/${encodeURIComponent(circuit)}/events`);
        const { events } = (await res.json()) as { events: unknown[] };
        expect(events).toContainEqual(expect.objectContaining(step.fields as object));
        return;
      }
      case 'expect_server': {
        const res = await fetch(`${this.server.url}/circuits/${encodeURIComponent(circuit)}`);
        expect(await res.json()).toMatchObject(step.fields as object);
        return;
      }
      case 'expect_requests': {
        const query = step.query as Record<string, string | null> | undefined;
        const count = this.proxy!.count(step.method as string, step.path as string, query);
        if (typeof step.at_least === 'number') expect(count).toBeGreaterThanOrEqual(step.at_least);
        if (typeof step.at_most === 'number') expect(count).toBeLessThanOrEqual(step.at_most);
        return;
      }
      case 'patch': {
        const res = await fetch(`${this.server.url}/circuits/${encodeURIComponent(circuit)}`, {
          method: 'PATCH',
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify(step.body),
        });
        expect(res.status).toBeLessThan(300);
        return;
      }
      case 'stop_server':
        await this.server.stop('SIGKILL');
        return;
      case 'start_server':
        this.server = await startServer(this.env(this.server.port));
        return;
      case 'sleep':
        await new Promise((resolve) => setTimeout(resolve, step.ms as number));
        return;
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  }

  private async calls(step: Step): Promise<void> {
    const [client] = this.targets(step);
    for (let i = 0; i < ((step.repeat as number | undefined) ?? 1); i++) {
      expect(await outcomeOfCall(client!, step)).toBe(step.expect);
    }
  }

  private async allowed(step: Step): Promise<void> {
    const repeat = (step.repeat as number | undefined) ?? 1;
    const asks = this.targets(step).flatMap((c) =>
      Array.from({ length: repeat }, () => () => c.allowed(step.circuit as string)),
    );
    const answers = step.concurrent === true ? await Promise.all(asks.map((ask) => ask())) : await sequential(asks);
    if (step.expect_true !== undefined) expect(answers.filter(Boolean).length).toBe(step.expect_true);
    if (step.expect !== undefined) expect(answers).toEqual(answers.map(() => step.expect));
  }

  private async records(step: Step): Promise<void> {
    const repeat = (step.repeat as number | undefined) ?? 1;
    const one = async (c: CircuitlogClient) => {
      for (let i = 0; i < repeat; i++) await c.record(step.circuit as string, { success: step.success as boolean });
    };
    const clients = this.targets(step);
    if (step.concurrent === true) await Promise.all(clients.map(one));
    else for (const c of clients) await one(c);
  }
}

async function sequential<T>(tasks: readonly (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = [];
  for (const task of tasks) out.push(await task());
  return out;
}

/** The spec's functions: `succeed`, `fail` (throws), `sleep` (for `sleep_ms`, aborted by the timeout). */
function fnOf(step: Step): (signal: AbortSignal) => Promise<string> {
  switch (step.fn) {
    case 'succeed':
      return async () => 'ok';
    case 'fail':
      return async () => {
        throw new Error('boom');
      };
    case 'sleep':
      return (signal) =>
        new Promise((resolve) => {
          const timer = setTimeout(() => resolve('ok'), step.sleep_ms as number);
          signal.addEventListener('abort', () => clearTimeout(timer));
        });
    default:
      throw new Error(`unknown fn ${String(step.fn)}`);
  }
}

/** What a call came to, in the spec's words. */
async function outcomeOfCall(client: CircuitlogClient, step: Step): Promise<string> {
  const fallback = typeof step.fallback === 'string' ? { fallback: () => step.fallback as string } : {};
  const timeout = typeof step.timeout_ms === 'number' ? { timeoutMs: step.timeout_ms } : {};
  try {
    const result = await client.call(step.circuit as string, fnOf(step), { ...fallback, ...timeout });
    return result === 'ok' ? 'ok' : result === step.fallback ? 'fallback' : `returned ${String(result)}`;
  } catch (error) {
    if (error instanceof CircuitOpenError)
      return step.scope === undefined || error.scope === step.scope
        ? 'circuit_open'
        : `circuit_open (scope ${error.scope})`;
    if (error instanceof CallTimeoutError) return 'timeout';
    if (error instanceof CircuitlogUnavailableError) return 'unavailable';
    if (error instanceof Error && error.message === 'boom') return 'fn_error';
    return `threw ${String(error)}`;
  }
}
