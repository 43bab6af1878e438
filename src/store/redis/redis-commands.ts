import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError } from '../../domain/errors.js';
import type { RedisConnection } from './redis-client.js';

/**
 * Where commands go: one connection (plain Redis, Sentinel), or a Cluster client that sends each
 * to the primary of its key's slot (`routeKey`: the first key; none for PING).
 */
export interface CommandLink {
  send(args: string[], routeKey: string | undefined): Promise<unknown>;
}

/** A single connection as a link: every command on it, whatever its key. */
export const connectionLink = (client: RedisConnection): CommandLink => ({ send: (args) => client.sendCommand(args) });

const READ_FAILED = 'The shared store (Redis) is unavailable; nothing was read or changed. Try again.';
const WRITE_FAILED = 'The shared store (Redis) is unavailable; the change may or may not have been applied.';

const sha1 = (script: string) => createHash('sha1').update(script).digest('hex');

/**
 * A Cluster slot in migration answers `TRYAGAIN` to a command whose keys are not all on one
 * side yet (a script names several): the command is sent again every 10 ms until it runs or
 * the command's timeout ends (Redis Cluster spec; @redis/client follows MOVED and ASK itself).
 */
const TRYAGAIN_DELAY_MS = 10;
const isTryAgain = (error: unknown) => String((error as Error)?.message).startsWith('TRYAGAIN');

/** Commands and scripts on one connection, each bounded by a timeout. */
export class RedisCommands {
  private readonly shas = new Map<string, string>();
  private lastWarningMs = -Infinity;

  constructor(
    private readonly link: CommandLink,
    private readonly timeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /**
   * One command with the store's timeout; any failure is a 503 STORAGE_UNAVAILABLE whose
   * detail says what a caller can know: a read changed nothing, while a write that got no
   * answer may have been applied (a frozen Redis runs it when it wakes up).
   */
  command<T>(
    args: string[],
    kind: 'read' | 'write' = 'write',
    timeoutMs = this.timeoutMs,
    routeKey: string | undefined = args[1],
  ): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(new Error(`no answer from Redis within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    const attempt = (): Promise<T> =>
      (this.link.send(args, routeKey) as Promise<T>).catch((error: unknown) => {
        if (!isTryAgain(error) || timedOut) throw error;
        return new Promise((r) => setTimeout(r, TRYAGAIN_DELAY_MS)).then(attempt);
      });
    return Promise.race([attempt(), timeout])
      .catch((error: unknown) => {
        if (error instanceof AppError) throw error;
        const noScript = String((error as Error).message).startsWith('NOSCRIPT'); // expected once per script: eval() loads it
        // One line a second during an outage, not one per request.
        if (!noScript && Date.now() - this.lastWarningMs >= 1_000) {
          this.lastWarningMs = Date.now();
          this.logger.warn(
            { event: 'redis_command_failed', command: args[0], err: (error as Error).message },
            'Redis command failed',
          );
        }
        throw new AppError('STORAGE_UNAVAILABLE', kind === 'read' ? READ_FAILED : WRITE_FAILED, {
          retryAfterSeconds: 1,
          cause: error,
        });
      })
      .finally(() => clearTimeout(timer));
  }

  /** EVALSHA, loading the script on NOSCRIPT (a restarted or failed-over Redis forgets scripts). */
  async eval<T>(source: string, keys: string[], args: string[], kind: 'read' | 'write' = 'write'): Promise<T> {
    let sha = this.shas.get(source);
    if (sha === undefined) {
      sha = sha1(source);
      this.shas.set(source, sha);
    }
    const call = [String(keys.length), ...keys, ...args];
    try {
      return await this.command<T>(['EVALSHA', sha, ...call], kind, this.timeoutMs, keys[0]);
    } catch (error) {
      if (!String((error as AppError).options?.cause ?? '').includes('NOSCRIPT')) throw error;
      return this.command<T>(['EVAL', source, ...call], kind, this.timeoutMs, keys[0]);
    }
  }
}
