/**
 * A loopback HTTP proxy that forwards every request to the server (answers streamed, so
 * `/events/stream` passes through) and logs `METHOD path` of each: the request log the
 * client cases count the client's server calls with.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountingProxy {
  readonly url: string;
  /** How many requests were `METHOD path` (the path as sent, query included). */
  count(method: string, path: string): number;
  close(): Promise<void>;
}

export async function startCountingProxy(targetPort: number): Promise<CountingProxy> {
  const log: string[] = [];
  const server = http.createServer((req, res) => {
    // Counted by path: a client may add a query (the Node client's ?caller=).
    log.push(`${req.method} ${req.url?.split('?')[0]}`);
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
    count: (method, path) => log.filter((line) => line === `${method} ${path}`).length,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
