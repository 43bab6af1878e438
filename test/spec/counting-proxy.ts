/**
 * A loopback HTTP proxy that forwards every request to the server (answers streamed, so
 * `/events/stream` passes through) and logs `METHOD path` of each: the request log the
 * client cases count the client's server calls with.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountingProxy {
  readonly url: string;
  /**
   * How many requests were `METHOD path` (the path as sent, without its query); with `query`, only
   * those whose query has each given parameter with that value (`null`: without that parameter).
   */
  count(method: string, path: string, query?: Readonly<Record<string, string | null>>): number;
  close(): Promise<void>;
}

export async function startCountingProxy(targetPort: number): Promise<CountingProxy> {
  const log: { line: string; query: URLSearchParams }[] = [];
  const server = http.createServer((req, res) => {
    // Counted by path, the query kept apart (a client adds ?caller= to its admissions).
    const [pathOnly, search] = (req.url ?? '').split('?', 2);
    log.push({ line: `${req.method} ${pathOnly}`, query: new URLSearchParams(search ?? '') });
    const upstream = http.request(
      { host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    count: (method, path, query = {}) =>
      log.filter(
        (r) =>
          r.line === `${method} ${path}` &&
          Object.entries(query).every(([k, v]) => (v === null ? !r.query.has(k) : r.query.get(k) === v)),
      ).length,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
