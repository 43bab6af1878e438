// A loopback HTTP relay between the edge agent and the server: the agent's `--server` URL
// stays valid while the server behind it is killed and started again (on any port), every
// request the agent sends is counted, and the relay can be cut so that no batch is between
// the agent and the server at the moment the server is killed (an outcome the server took but
// whose answer never came back would be sent again: that is at-least-once, not an outage).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Relayed {
  readonly method: string;
  /** The path as sent, without the query. */
  readonly path: string;
}

export interface RelayProxy {
  readonly url: string;
  /** Every request the agent sent, in order, whatever became of it. */
  readonly requests: Relayed[];
  /** Requests with this method and path. */
  count(method: string, path: string): number;
  /**
   * Stop relaying: from now on every request's connection is closed unanswered; resolves once
   * the requests already relayed have had their answers (the event stream is cut at once).
   */
  cut(): Promise<void>;
  /**
   * The next `count` requests to `path` reach the server, and the server's answer is thrown
   * away: the agent's connection is closed instead, as when the server dies after its commit.
   */
  loseAnswers(path: string, count: number): void;
  /** Relay again, to this server. */
  resume(target: string): void;
  close(): Promise<void>;
}

interface InFlight {
  readonly stream: boolean;
  readonly res: http.ServerResponse;
  readonly upstream: http.ClientRequest;
}

/** A relay on 127.0.0.1 to `target` (the server's base URL). */
export async function startRelay(target: string): Promise<RelayProxy> {
  let upstreamUrl = new URL(target);
  let cut = false;
  const requests: Relayed[] = [];
  const inFlight = new Set<InFlight>();
  let drained: (() => void) | null = null;
  const losing = new Map<string, number>();
  let agent = new http.Agent({ keepAlive: true });

  const settle = (entry: InFlight) => {
    inFlight.delete(entry);
    if (drained !== null && ![...inFlight].some((e) => !e.stream)) drained();
  };

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    requests.push({ method: req.method ?? 'GET', path });
    if (cut) {
      req.socket.destroy();
      return;
    }
    const upstream = http.request({
      host: upstreamUrl.hostname,
      port: upstreamUrl.port,
      method: req.method,
      path: req.url,
      headers: req.headers,
      agent,
    });
    const entry: InFlight = { stream: path === '/events/stream', res, upstream };
    inFlight.add(entry);
    res.once('close', () => settle(entry));
    const lose = (losing.get(path) ?? 0) > 0;
    if (lose) losing.set(path, losing.get(path)! - 1);
    upstream.on('response', (answer) => {
      if (lose) {
        answer.resume();
        answer.once('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      res.flushHeaders();
      answer.pipe(res);
      answer.once('error', () => res.destroy());
      answer.once('aborted', () => res.destroy());
    });
    upstream.once('error', () => {
      res.destroy();
      req.socket.destroy();
    });
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    count: (method, path) => requests.filter((r) => r.method === method && r.path === path).length,
    cut: async () => {
      cut = true;
      for (const entry of inFlight) {
        if (!entry.stream) continue;
        entry.upstream.destroy();
        entry.res.destroy();
      }
      if ([...inFlight].some((e) => !e.stream)) await new Promise<void>((resolve) => (drained = resolve));
      drained = null;
      server.closeIdleConnections();
    },
    loseAnswers: (path, count) => losing.set(path, count),
    resume: (next) => {
      upstreamUrl = new URL(next);
      agent.destroy(); // no kept-alive socket to the old server
      agent = new http.Agent({ keepAlive: true });
      cut = false;
    },
    close: async () => {
      for (const entry of inFlight) entry.res.destroy();
      server.closeAllConnections();
      agent.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
