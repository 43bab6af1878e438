import net from 'node:net';

let lastRefusedPort = 0;

/**
 * A port on 127.0.0.1 that refuses connections now and stays refusing: one below 1024, which
 * no `listen(0)` of any process is ever given (Linux hands those out from
 * net.ipv4.ip_local_port_range, 32768-60999 by default). A freed ephemeral port would not do: on
 * a busy machine another test's server is given it and answers in its place. Distinct per call.
 */
export async function refusedPort(): Promise<number> {
  while (lastRefusedPort < 1023) {
    const port = ++lastRefusedPort;
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error('no refusing port below 1024 on 127.0.0.1');
}
