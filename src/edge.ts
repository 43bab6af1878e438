/**
 * The edge agent's composition root (issue 32; docs/gateways.md): `node dist/edge.js` or
 * `circuitlog edge`. Reads its flags and the config file's `edge:` section, follows the
 * server's event stream, serves the hot routes and the gateways' check route, and takes
 * nginx's access log over syslog when asked to. The only edge file that touches `process`.
 *
 *   circuitlog edge --server http://circuitlog:8080 [--listen 127.0.0.1:8090] [--syslog 127.0.0.1:8514]
 *                   [--config FILE] [--fail-open true|false]
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { ConfigError } from './config/config-error.js';
import { redactUrl } from './domain/redact-url.js';
import { EdgeAgent } from './edge/agent.js';
import { edgeListener } from './edge/edge-server.js';
import { gateAnswer } from './edge/gate.js';
import { hostRule } from './http/request-guard.js';
import { parseListen, startSyslogIntake, type SyslogIntake } from './edge/syslog.js';
import { matchesPattern } from './auth/identity.js';
import { DropCounter } from './edge/edge-types.js';
import { EDGE_USAGE, edgeSettings, type EdgeSettings } from './edge/settings.js';

async function main(): Promise<void> {
  const logger = pino({
    level: process.env.CIRCUITLOG_LOG_LEVEL || 'info',
    base: { pid: process.pid, role: 'edge' },
  });
  let settings: EdgeSettings;
  try {
    const parsed = edgeSettings(process.argv.slice(2), process.env);
    if (parsed === 'help') {
      process.stdout.write(`${EDGE_USAGE}\n`);
      process.exit(0);
    }
    settings = parsed;
  } catch (error) {
    if (error instanceof ConfigError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`circuitlog edge: ${(error as Error).message}\n${EDGE_USAGE}\n`);
      process.exit(2);
    }
    throw error;
  }
  const agent = new EdgeAgent({
    server: settings.server,
    config: settings,
    token: process.env.CIRCUITLOG_TOKEN || undefined,
    logger,
  });
  const drops = new DropCounter(logger);
  let syslog: SyslogIntake | null = null;
  if (settings.syslog.listen !== null) {
    const { create } = settings.syslog;
    syslog = await startSyslogIntake({
      listen: settings.syslog.listen,
      maxLineBytes: settings.syslog.max_line_bytes,
      sink: agent,
      // A circuit the server knows, or one the config lets a log line create: never one made of noise.
      known: (name) => create.some((pattern) => matchesPattern(pattern, name)) || agent.knows(name),
      drops,
    });
  }
  const server = http.createServer(
    edgeListener({
      bodyLimitBytes: settings.bodyLimitBytes,
      hostRule: hostRule(parseListen(settings.listen).host, settings.allowed_hosts),
      agent,
      logger,
      gate: (request) => gateAnswer(request, settings.gate, agent),
      extraStats: () => ({ dropped: drops.counts(), ...(syslog === null ? {} : { syslog: syslog.counts() }) }),
    }),
  );
  server.keepAliveTimeout = 65_000; // longer than the usual client/LB idle timeouts (60 s)
  const { host, port } = parseListen(settings.listen);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  server.on('error', (error) => logger.error({ event: 'edge_server_error', error: String(error) }, 'server error'));
  agent.start();
  logger.info(
    {
      event: 'edge_listening',
      host,
      port: (server.address() as AddressInfo).port,
      syslog_port: syslog?.port ?? null,
      server: redactUrl(settings.server),
      fail_open: settings.fail_open,
    },
    'edge agent listening',
  );
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ event: 'edge_stopping', signal }, 'edge agent stopping');
    server.close();
    server.closeIdleConnections();
    await syslog?.close();
    const { delivered, pending } = await agent.close(5_000);
    drops.stop();
    logger.info({ event: 'edge_stopped', delivered, pending }, 'edge agent stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`circuitlog edge: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
