import net from 'node:net';
import { ConfigError } from '../config.js';
import { answerStarting } from './starting.js';

/** `host` as the host of a URL: an IPv6 literal in brackets (RFC 3986 section 3.2.2), `http://[::1]:8080`. */
export function urlHost(host: string): string {
  return net.isIPv6(host) ? `[${host}]` : host;
}

/** Why listening failed, naming the variable to fix (`HOST` or `PORT`). */
export function listenProblem(error: NodeJS.ErrnoException, host: string, port: number): string {
  switch (error.code) {
    case 'EADDRINUSE':
      return `PORT: ${host}:${port} is already in use by another process`;
    case 'EADDRNOTAVAIL':
      return `HOST: ${host} is not an address of this machine`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
    case 'EAI_NONAME':
      return `HOST: cannot resolve '${host}' to an address (${error.code})`;
    case 'EACCES':
      return `PORT: no permission to listen on ${host}:${port} (ports below 1024 need privileges)`;
    default:
      return `HOST/PORT: cannot listen on ${host}:${port}: ${error.message}`;
  }
}

/** `server.listen`, resolved once listening; a failure becomes a ConfigError naming HOST or PORT. */
export function listen(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => reject(new ConfigError(listenProblem(error, host, port)));
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * Bind host:port once and let go, so a busy port or a foreign address stops the start with a
 * reason before the database is migrated. The server listens for real only once it can serve
 * (a single process after opening its store; each worker when ready, node:cluster sharing the
 * socket); a connection that slips in while the probe is bound is answered `503 NOT_READY`
 * with `Retry-After: 1`, never left hanging.
 */
export async function probeListen(port: number, host: string): Promise<void> {
  const pending = new Set<() => void>();
  const probe = net.createServer((socket) => {
    const answerNow = answerStarting(socket);
    pending.add(answerNow);
    socket.once('close', () => pending.delete(answerNow));
  });
  await listen(probe, port, host);
  await new Promise<void>((resolve) => {
    probe.close(() => resolve());
    for (const answerNow of pending) answerNow();
  });
}
