import http from 'node:http';
import net from 'node:net';

/** A request unanswered this long counts as hung (an answered /health takes milliseconds). */
export const HANG_MS = 5_000;
/**
 * A reset this soon after connecting is the kernel refusing late: a handshake it completed in
 * the instant a listening socket was open before it closed (the HOST/PORT probe). The client
 * learns at once that nobody serves it, as with a refusal; a reset after waiting is a failure.
 */
export const RESET_AT_ONCE_MS = 1_000;

/** What a hammering client saw: answers by status, refused connects, hangs, anything else. */
export interface Tally {
  readonly statuses: Record<number, number>;
  /** 503 answers without `Retry-After` (a 503 must say when to come back). */
  readonly bare503: number;
  readonly refused: number;
  /** Reset within RESET_AT_ONCE_MS of sending: as good as refused. */
  readonly resetAtOnce: number;
  readonly hung: number;
  readonly errors: string[];
}

/** A loopback port free right now (bound and released), for a server started on it next. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

type Outcome = { status: number; retryAfter: boolean } | 'refused' | 'reset-at-once' | 'hung' | string;

function once(port: number, path: string): Promise<Outcome> {
  const sent = Date.now();
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] !== undefined }),
      );
      res.on('error', (error) => resolve(`response: ${error.message}`));
    });
    req.setTimeout(HANG_MS, () => {
      resolve('hung');
      req.destroy();
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') return resolve('refused');
      const quick = Date.now() - sent < RESET_AT_ONCE_MS;
      if (quick && (error.code === 'ECONNRESET' || error.code === 'EPIPE')) return resolve('reset-at-once');
      resolve(`${error.code ?? ''} ${error.message} after ${Date.now() - sent} ms`);
    });
  });
}

/**
 * `lanes` clients sending GET `path` on fresh connections back to back until `stop()`, which
 * waits for the requests in flight (each bounded by HANG_MS) and returns what they saw.
 */
export function hammer(port: number, path = '/health', lanes = 3): { stop(): Promise<Tally> } {
  const tally = {
    statuses: {} as Record<number, number>,
    bare503: 0,
    refused: 0,
    resetAtOnce: 0,
    hung: 0,
    errors: [] as string[],
  };
  let stopped = false;
  const lane = async () => {
    while (!stopped) {
      const outcome = await once(port, path);
      if (outcome === 'refused') tally.refused++;
      else if (outcome === 'reset-at-once') tally.resetAtOnce++;
      else if (outcome === 'hung') tally.hung++;
      else if (typeof outcome === 'string') tally.errors.push(outcome);
      else {
        tally.statuses[outcome.status] = (tally.statuses[outcome.status] ?? 0) + 1;
        if (outcome.status === 503 && !outcome.retryAfter) tally.bare503++;
      }
      if (outcome === 'refused' || outcome === 'reset-at-once') await new Promise((r) => setTimeout(r, 1)); // a refusal is instant; do not spin
    }
  };
  const running = Array.from({ length: lanes }, lane);
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(running);
      return tally;
    },
  };
}
