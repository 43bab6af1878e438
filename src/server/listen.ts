import net from 'node:net';
import { ConfigError } from '../config.js';

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
 * Bind host:port once and let go. The primary of several workers listens on nothing itself
 * (each worker asks it for the shared socket later), so it tries the address before it
 * migrates the database and forks: a busy port stops the start with a reason at once.
 */
export async function probeListen(port: number, host: string): Promise<void> {
  const probe = net.createServer();
  await listen(probe, port, host);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}
